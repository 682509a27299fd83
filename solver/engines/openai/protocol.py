"""The wire protocol of vLLM's OpenAI-compatible server, pure: the ``/v1/completions`` request body, server-sent
events, their decoding into ``Delta``s, per-token confidences, error messages.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from solver.core.confidence import token_confidence
from solver.types import Delta, FinishReason, GenerationRequest

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort", "error": "error"}


def one_line(text: str, limit: int = 300) -> str:
    """The first line of a message, shortened: errors travel in logs and tables.

    >>> one_line("boom\\ntraceback ...")
    'boom'
    >>> one_line("x" * 10, limit=4)
    'x...'
    """
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


def completion_body(request: GenerationRequest, model: str, max_model_len: int | None = None) -> dict[str, Any]:
    """The JSON body of one streamed ``/v1/completions`` request.

    Token ids are sent when known (the prompt is then exactly what the prefix cache saw last turn). With the
    model's context length known, ``max_tokens`` is capped to what the prompt leaves, as the in-process engine
    would stop there too; vLLM's server rejects a larger value instead.

    >>> r = GenerationRequest("p1-r0-t0", "Hi", (1, 2, 3), 100, 0.8, 1.0, 7, ("```\\n",), logprobs=5)
    >>> body = completion_body(r, "m", max_model_len=50)
    >>> body["prompt"], body["max_tokens"], body["seed"], body["logprobs"], body["stop"]
    ([1, 2, 3], 47, 7, 5, ['```\\n'])
    >>> "logprobs" in completion_body(dataclasses.replace(r, logprobs=None), "m")
    False
    >>> completion_body(dataclasses.replace(r, extra={"min_p": 0.05}), "m")["min_p"]
    0.05
    >>> completion_body(dataclasses.replace(r, stop=(), stop_token_ids=(200012, 200002)), "m")["stop_token_ids"]
    [200012, 200002]
    """
    prompt: str | list[int] = list(request.prompt_token_ids) if request.prompt_token_ids is not None else request.prompt
    max_tokens = request.max_tokens
    if max_model_len is not None and request.prompt_token_ids is not None:
        max_tokens = min(max_tokens, max_model_len - len(request.prompt_token_ids))
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "stream": True,
        "stream_options": {"include_usage": True},  # the prompt token count arrives in a last usage event
        "max_tokens": max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "seed": request.seed,
        "stop": list(request.stop),
        "include_stop_str_in_output": False,
        "return_token_ids": True,  # vLLM extra: generated ids per event, prompt ids in the first
    }
    if request.stop_token_ids:
        body["stop_token_ids"] = list(request.stop_token_ids)  # vLLM extra; the stop token stays in token_ids
    body.update(request.extra)  # vLLM's server takes its extra sampling parameters as top-level fields
    if request.logprobs:
        body["logprobs"] = request.logprobs
        # Keys "token_id:N": two tokens that decode to the same text would otherwise collide in the top-k map.
        body["return_tokens_as_token_ids"] = True
    return body


def resume_body(body: dict[str, Any], sent_ids: Sequence[int], sent_text: str) -> dict[str, Any]:
    """The body that continues a request whose stream was cut after ``sent_ids`` (decoding to ``sent_text``) went
    out: the prompt grows by what was generated, ``max_tokens`` shrinks by as many tokens. Sent to another
    server, it carries on where the first stopped, so nothing already streamed is generated twice.

    >>> body = {"prompt": [1, 2, 3], "max_tokens": 16, "seed": 7}
    >>> resume_body(body, [19, 20], "42")
    {'prompt': [1, 2, 3, 19, 20], 'max_tokens': 14, 'seed': 7}
    >>> resume_body({"prompt": "Hi", "max_tokens": 16}, [19, 20], "42")["prompt"]
    'Hi42'
    """
    prompt = body["prompt"]
    grown = [*prompt, *sent_ids] if isinstance(prompt, list) else prompt + sent_text
    return {**body, "prompt": grown, "max_tokens": body["max_tokens"] - len(sent_ids)}


def token_confidences(top_logprobs: Sequence[dict[str, float] | None] | None, k: int) -> tuple[float, ...]:
    """Per-token confidence (``core.confidence.token_confidence``) from the server's top logprobs.

    The server lists the top-k candidates plus the sampled token when it is outside them; the k largest values
    are exactly the top-k.

    >>> token_confidences([{"a": -0.5, "b": -1.5, "c": -9.0}, {"a": -0.1}], 2)
    (1.0, 0.1)
    >>> token_confidences(None, 5)
    ()
    """
    out = []
    for position in top_logprobs or ():
        top = sorted((position or {}).values(), reverse=True)[:k]
        out.append(token_confidence(top) if top else 0.0)
    return tuple(out)


def sse_data(line: str) -> str | None:
    """The payload of one server-sent-event line, None for blank lines, comments and other fields.

    >>> sse_data('data: {"a": 1}'), sse_data(""), sse_data(": keep-alive")
    ('{"a": 1}', None, None)
    """
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


def server_message(body: str) -> str:
    """The error message inside an OpenAI-style error body, else the body itself (one line).

    >>> server_message('{"error": {"message": "The model `x` does not exist.", "code": 404}}')
    'The model `x` does not exist.'
    >>> server_message("Internal Server Error")
    'Internal Server Error'
    """
    try:
        data = json.loads(body)
    except ValueError:
        return one_line(body)
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return one_line(error["message"])
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return one_line(data["message"])
    return one_line(body)


class StreamDecoder:
    """Turns the server's event lines into ``Delta``s. The finishing delta is held back until the stream ends,
    because the prompt token count comes in a usage event after it.

    >>> d = StreamDecoder(top_k=None)
    >>> d.feed('data: {"choices": [{"text": " Paris", "token_ids": [7042], "prompt_token_ids": [1, 2]}]}')
    [Delta(text=' Paris', token_ids=(7042,), token_count=0, confidences=(), finish_reason=None, stop_reason=None, stop_token=None, prompt_tokens=2, cached_tokens=None, error=None)]
    >>> d.feed('data: {"choices": [{"text": "", "token_ids": [30], "finish_reason": "stop", "stop_reason": "."}]}')
    []
    >>> d.feed('data: {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 2}}')
    []
    >>> d.feed("data: [DONE]"), d.done
    ([], True)
    >>> d.end()
    Delta(text='', token_ids=(30,), token_count=0, confidences=(), finish_reason='stop', stop_reason='.', stop_token=None, prompt_tokens=2, cached_tokens=None, error=None)

    A stop token id (``stop_token_ids``) comes back as an integer stop reason:

    >>> d = StreamDecoder(top_k=None)
    >>> _ = d.feed('data: {"choices": [{"text": "", "token_ids": [200012], "finish_reason": "stop", "stop_reason": 200012}]}')
    >>> d.end().stop_token, d.end().stop_reason
    (200012, None)

    A server run with ``--enable-prompt-tokens-details`` says how much of the prompt its prefix cache held:

    >>> d = StreamDecoder(top_k=None)
    >>> _ = d.feed('data: {"choices": [{"text": "", "token_ids": [7], "finish_reason": "length"}]}')
    >>> _ = d.feed('data: {"choices": [], "usage": {"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 32}}}')
    >>> d.end().cached_tokens
    32

    Without token ids (a server that ignores ``return_token_ids``) the usage count fills ``token_count``:

    >>> d = StreamDecoder(top_k=None)
    >>> _ = d.feed('data: {"choices": [{"text": "ab", "finish_reason": "length"}]}')
    >>> _ = d.feed('data: {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}')
    >>> d.end().token_count
    2
    """

    def __init__(self, top_k: int | None) -> None:
        self.top_k = top_k
        self.prompt_tokens: int | None = None
        self.final: Delta | None = None
        self.done = False  # [DONE] or an error event arrived
        self.ids_seen = 0
        self.completion_tokens: int | None = None  # from the usage event
        self.cached_tokens: int | None = None  # of the prompt, from the prefix cache (usage details, when sent)

    def feed(self, line: str) -> list[Delta]:
        payload = sse_data(line)
        if payload is None or self.done:
            return []
        if payload == "[DONE]":
            self.done = True
            return []
        try:
            event = json.loads(payload)
        except ValueError:
            return self._fail(f"unreadable event from the server: {one_line(payload, 80)}")
        if not isinstance(event, dict):
            return self._fail(f"unexpected event from the server: {one_line(payload, 80)}")
        if "error" in event:
            return self._fail(f"server error: {server_message(payload)}")
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            self.prompt_tokens = usage["prompt_tokens"]
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.completion_tokens = usage["completion_tokens"]
        details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
        if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
            self.cached_tokens = details["cached_tokens"]  # a server run with --enable-prompt-tokens-details
        out = []
        try:
            for choice in event.get("choices") or ():
                delta = self._choice(choice)
                self.ids_seen += len(delta.token_ids)
                if delta.finish_reason is not None:
                    self.final = delta
                elif delta.text or delta.token_ids:
                    out.append(delta)
        except (AttributeError, TypeError, ValueError) as exc:  # fields of the wrong shape: not a vLLM server?
            self._fail(f"malformed event from the server ({exc}): {one_line(payload, 80)}")
        return out

    def end(self) -> Delta:
        """The last delta, once the stream has ended (cleanly or not)."""
        if self.final is None:
            return Delta(text="", token_ids=(), finish_reason="error", prompt_tokens=self.prompt_tokens,
                         error="the server closed the stream before the request finished")
        # A server that streams text without token ids still reports how many tokens it generated.
        missing = (self.completion_tokens or 0) - self.ids_seen
        count = missing if missing > 0 and not self.final.token_ids else 0
        return dataclasses.replace(self.final, prompt_tokens=self.prompt_tokens, token_count=count,
                                   cached_tokens=self.cached_tokens)

    def _fail(self, message: str) -> list[Delta]:
        self.done = True
        self.final = Delta(text="", token_ids=(), finish_reason="error", error=message)
        return []

    def _choice(self, choice: dict[str, Any]) -> Delta:
        if isinstance(choice.get("prompt_token_ids"), list):
            self.prompt_tokens = len(choice["prompt_token_ids"])
        logprobs = choice.get("logprobs") or {}
        confidences = token_confidences(logprobs.get("top_logprobs"), self.top_k) if self.top_k else ()
        reason = choice.get("finish_reason")
        finish: FinishReason | None = None
        error = None
        if reason is not None:
            finish = _FINISH.get(reason, "error")
            error = None if reason in _FINISH else f"unknown finish reason {reason!r}"
            if reason == "error":
                error = "the server failed the request"
        stop = choice.get("stop_reason")
        return Delta(text=choice.get("text") or "", token_ids=tuple(choice.get("token_ids") or ()),
                     confidences=confidences, finish_reason=finish,
                     stop_reason=stop if isinstance(stop, str) else None,
                     stop_token=stop if isinstance(stop, int) and not isinstance(stop, bool) else None,
                     prompt_tokens=self.prompt_tokens, error=error)
