"""Engine backend for vLLM's OpenAI-compatible server: one or several endpoints, each request streamed over HTTP.

Requests go to ``/v1/completions`` with ``stream: true`` and come back as server-sent events; each event becomes a
``Delta``. Every request goes to the healthy endpoint with the fewest requests in flight from this client. A
connection failure before any output is retried (a bounded number of times, over a bounded time) on the next
endpoint; the failed endpoint rests for a cool-down and is probed with ``/health`` before it gets work again.
Once output has streamed, a failure ends the request with ``finish_reason="error"`` instead of raising.

Leaving a stream early (break, ``aclose``, a cancelled task) closes its HTTP connection, and vLLM aborts a request
whose client disconnected, so an early stop frees the server's batch slot at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from solver.clock import SystemClock
from solver.config import Config, ConfigError
from solver.types import Clock, Delta, FinishReason, GenerationRequest, Tokenizer

log = logging.getLogger(__name__)

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort", "error": "error"}
# Statuses a proxy or a server that is starting or stopping answers with; the request never reached the model.
_RETRY_STATUS = frozenset({502, 503, 504})


class EndpointError(ConfigError):
    """No endpoint can serve the run (unreachable, or not serving the model); one line meant for the user."""


# ---- the pure core: request bodies, server-sent events, confidences, routing --------------------------------


def one_line(text: str, limit: int = 300) -> str:
    """The first line of a message, shortened: errors travel in logs and tables.

    >>> one_line("boom\\ntraceback ...")
    'boom'
    >>> one_line("x" * 10, limit=4)
    'x...'
    """
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


def normalise_url(url: str) -> str:
    """A base URL without trailing slash or ``/v1``; anything but http(s) with a host is a config error.

    >>> normalise_url("http://127.0.0.1:8000/v1/")
    'http://127.0.0.1:8000'
    >>> normalise_url("127.0.0.1:8000")
    Traceback (most recent call last):
    ...
    solver.config.ConfigError: endpoint '127.0.0.1:8000' is not an http(s) URL such as http://127.0.0.1:8000
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"endpoint {url!r} is not an http(s) URL such as http://127.0.0.1:8000")
    path = parts.path.rstrip("/")
    path = path[: -len("/v1")] if path.endswith("/v1") else path
    return f"{parts.scheme}://{parts.netloc}{path}"


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
    body.update(request.extra)  # vLLM's server takes its extra sampling parameters as top-level fields
    if request.logprobs:
        body["logprobs"] = request.logprobs
        # Keys "token_id:N": two tokens that decode to the same text would otherwise collide in the top-k map.
        body["return_tokens_as_token_ids"] = True
    return body


def token_confidences(top_logprobs: Sequence[dict[str, float] | None] | None, k: int) -> tuple[float, ...]:
    """Per-token confidence: minus the mean of the k largest logprobs (DeepConf). Higher = more peaked.

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
        out.append(-sum(top) / len(top) if top else 0.0)
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
    [Delta(text=' Paris', token_ids=(7042,), token_count=0, confidences=(), finish_reason=None, stop_reason=None, prompt_tokens=2, cached_tokens=None, error=None)]
    >>> d.feed('data: {"choices": [{"text": "", "token_ids": [30], "finish_reason": "stop", "stop_reason": "."}]}')
    []
    >>> d.feed('data: {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 2}}')
    []
    >>> d.feed("data: [DONE]"), d.done
    ([], True)
    >>> d.end()
    Delta(text='', token_ids=(30,), token_count=0, confidences=(), finish_reason='stop', stop_reason='.', prompt_tokens=2, cached_tokens=None, error=None)

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
        self.emitted = False  # at least one delta went out (a retry would repeat output)
        self.ids_seen = 0
        self.completion_tokens: int | None = None  # from the usage event

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
        self.emitted = self.emitted or bool(out)
        return out

    def end(self) -> Delta:
        """The last delta, once the stream has ended (cleanly or not)."""
        if self.final is None:
            return Delta(text="", token_ids=(), finish_reason="error", prompt_tokens=self.prompt_tokens,
                         error="the server closed the stream before the request finished")
        # A server that streams text without token ids still reports how many tokens it generated.
        missing = (self.completion_tokens or 0) - self.ids_seen
        count = missing if missing > 0 and not self.final.token_ids else 0
        return dataclasses.replace(self.final, prompt_tokens=self.prompt_tokens, token_count=count)

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
                     stop_reason=stop if isinstance(stop, str) else None,  # an int is a stop token id
                     prompt_tokens=self.prompt_tokens, error=error)


@dataclass
class Endpoint:
    """One server, as this client sees it."""

    url: str
    in_flight: int = 0  # requests from this client streaming from it now
    healthy: bool = True
    probe_at: float = 0.0  # when unhealthy: clock time of the next /health probe
    error: str | None = None  # why it was last marked unhealthy


def pick_endpoint(endpoints: Sequence[Endpoint], turn: int = 0) -> Endpoint | None:
    """The healthy endpoint with the fewest requests in flight; ties rotate with ``turn``.

    >>> es = [Endpoint("a", in_flight=2), Endpoint("b", in_flight=1), Endpoint("c", in_flight=1, healthy=False)]
    >>> pick_endpoint(es).url
    'b'
    >>> [pick_endpoint([Endpoint("a"), Endpoint("b")], t).url for t in range(3)]
    ['a', 'b', 'a']
    >>> pick_endpoint([Endpoint("a", healthy=False)]) is None
    True
    """
    n = len(endpoints)
    candidates = [(e.in_flight, (i - turn) % n, i) for i, e in enumerate(endpoints) if e.healthy]
    return endpoints[min(candidates)[2]] if candidates else None


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one request tries to reach a server before it gives up with an error delta."""

    attempts: int = 5  # connection attempts per request, over all endpoints
    first_delay_s: float = 0.5  # wait before retrying when no endpoint is healthy; doubles each time
    max_delay_s: float = 4.0  # per wait
    total_s: float = 20.0  # all waits of one request together

    def delays(self) -> tuple[float, ...]:
        """The waits between attempts, capped per wait and in total.

        >>> RetryPolicy(attempts=5, first_delay_s=1, max_delay_s=3, total_s=6).delays()
        (1.0, 2.0, 3.0)
        >>> RetryPolicy(attempts=1).delays()
        ()
        """
        out: list[float] = []
        delay = self.first_delay_s
        for _ in range(self.attempts - 1):
            wait = min(delay, self.max_delay_s)
            if sum(out) + wait > self.total_s:
                break
            out.append(float(wait))
            delay *= 2
        return tuple(out)


def parse_metric(text: str, name: str) -> float | None:
    """The sum of one metric over its label sets in Prometheus text format, None when absent.

    >>> page = '# HELP x\\nvllm:num_requests_running{engine="0"} 2.0\\nvllm:num_requests_waiting 1'
    >>> parse_metric(page, "vllm:num_requests_running"), parse_metric(page, "vllm:other")
    (2.0, None)
    """
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith(name) and line[len(name): len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    return total if seen else None


class _Unreachable(Exception):
    """A request failed before any output: safe to send again, elsewhere."""


# ---- the engine ----------------------------------------------------------------------------------------------


class OpenAIServerEngine:
    """The Engine protocol over one or several vLLM OpenAI-compatible servers serving the same model."""

    name = "openai"

    def __init__(self, endpoints: Sequence[str], model: str, *, tokenizer: Tokenizer | None = None,
                 max_model_len: int | None = None, retry: RetryPolicy = RetryPolicy(), cooldown_s: float = 10.0,
                 connect_timeout_s: float = 5.0, read_timeout_s: float | None = 900.0,
                 clock: Clock | None = None, client: httpx.AsyncClient | None = None) -> None:
        """``read_timeout_s``: longest silence while streaming (seconds). A busy server sends nothing until the
        first token of a queued request, so this is generous; the run's deadline cancels sooner anyway."""
        if not endpoints:
            raise ConfigError("engine.endpoints is empty: give at least one server URL (--endpoint URL)")
        self.endpoints = [Endpoint(normalise_url(u)) for u in endpoints]
        self.model = model
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len
        self.retry = retry
        self.cooldown_s = cooldown_s
        self.clock: Clock = clock or SystemClock()
        timeout = httpx.Timeout(connect=connect_timeout_s, read=read_timeout_s, write=30.0, pool=None)
        # No connection cap: the solver bounds requests in flight itself (solve.workers).
        self._client = client or httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=None))
        self._turns = itertools.count()
        self._open = 0
        self._probing = False

    # -- Engine protocol --

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        body = completion_body(request, self.model, self.max_model_len)
        if body["max_tokens"] <= 0:
            # The prompt already fills the context: the request ends as a length stop, like the engine would.
            yield Delta(text="", token_ids=(), finish_reason="length",
                        prompt_tokens=len(request.prompt_token_ids or ()))
            return
        delays = iter(self.retry.delays())
        started = self.clock.now()
        failures: list[str] = []
        for _ in range(self.retry.attempts):
            await self._probe_due()
            endpoint = pick_endpoint(self.endpoints, next(self._turns))
            if endpoint is not None:
                try:
                    async with contextlib.aclosing(self._attempt(endpoint, body, request.logprobs)) as deltas:
                        async for delta in deltas:
                            yield delta
                    return
                except _Unreachable as exc:
                    failures.append(str(exc))
                    self.rest(endpoint, str(exc))
                    if pick_endpoint(self.endpoints) is not None:
                        continue  # another server is up: go there now
            delay = next(delays, None)
            if delay is None or self.clock.now() - started + delay > self.retry.total_s:
                break
            await asyncio.sleep(delay)
        reason = failures[-1] if failures else "; ".join(f"{e.url}: {e.error}" for e in self.endpoints)
        yield Delta(text="", token_ids=(), finish_reason="error",
                    error=one_line(f"no server reachable after {len(failures)} attempt(s): {reason}"))

    def running_requests(self) -> int:
        """Streams this client holds open now (each is one request running or queued in a server)."""
        return self._open

    async def close(self) -> None:
        await self._client.aclose()

    # -- endpoints --

    async def server_running(self) -> dict[str, float | None]:
        """Each server's own count of running requests (its ``/metrics``), None when unreadable."""
        async def one(endpoint: Endpoint) -> float | None:
            try:
                response = await self._client.get(endpoint.url + "/metrics", timeout=5.0)
            except httpx.HTTPError:
                return None
            return parse_metric(response.text, "vllm:num_requests_running") if response.status_code == 200 else None

        values = await asyncio.gather(*(one(e) for e in self.endpoints))
        return {e.url: v for e, v in zip(self.endpoints, values)}

    def rest(self, endpoint: Endpoint, why: str, *, announce: bool = True) -> None:
        """Take an endpoint out of rotation until a /health probe after the cool-down succeeds."""
        if endpoint.healthy and announce:
            log.warning("endpoint %s unhealthy, skipped for %.0f s: %s", endpoint.url, self.cooldown_s, why)
        endpoint.healthy = False
        endpoint.error = why
        endpoint.probe_at = self.clock.now() + self.cooldown_s

    async def _probe_due(self) -> None:
        """Probe the resting endpoints whose cool-down has passed; one probe round at a time."""
        now = self.clock.now()
        due = [e for e in self.endpoints if not e.healthy and e.probe_at <= now]
        if not due or self._probing:
            return
        self._probing = True
        try:
            results = await asyncio.gather(*(self._healthy(e.url) for e in due))
        finally:
            self._probing = False
        for endpoint, ok in zip(due, results):
            if ok:
                log.warning("endpoint %s is back", endpoint.url)
                endpoint.healthy, endpoint.error = True, None
            else:
                endpoint.probe_at = self.clock.now() + self.cooldown_s

    async def _healthy(self, url: str) -> bool:
        try:
            response = await self._client.get(url + "/health", timeout=2.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def _attempt(self, endpoint: Endpoint, body: dict[str, Any], top_k: int | None) -> AsyncIterator[Delta]:
        """One HTTP request. Raises ``_Unreachable`` only before any output; otherwise every end is a delta."""
        decoder = StreamDecoder(top_k)
        endpoint.in_flight += 1
        self._open += 1
        try:
            async with self._client.stream("POST", endpoint.url + "/v1/completions", json=body) as response:
                if response.status_code != 200:
                    text = (await response.aread()).decode(errors="replace")
                    message = f"{endpoint.url}: HTTP {response.status_code}: {server_message(text)}"
                    if response.status_code in _RETRY_STATUS:
                        raise _Unreachable(message)
                    yield Delta(text="", token_ids=(), finish_reason="error", error=one_line(message))
                    return
                async for line in response.aiter_lines():
                    for delta in decoder.feed(line):
                        yield delta
                    if decoder.done:
                        break
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError,
                httpx.WriteError) as exc:
            message = f"{endpoint.url}: {type(exc).__name__}: {exc or 'connection failed'}"
            if not decoder.emitted:
                raise _Unreachable(one_line(message)) from exc
            decoder.final = Delta(text="", token_ids=(), finish_reason="error", error=one_line(message))
        except httpx.HTTPError as exc:  # a read timeout and the like, after the request reached the server
            decoder.final = Delta(text="", token_ids=(), finish_reason="error",
                                  error=one_line(f"{endpoint.url}: {type(exc).__name__}: {exc}"))
        finally:
            endpoint.in_flight -= 1
            self._open -= 1
        yield decoder.end()


# ---- opening: discover the model, check every endpoint, load the tokenizer -----------------------------------


@dataclass(frozen=True)
class EndpointInfo:
    url: str
    models: dict[str, int | None]  # served model id -> its max_model_len (None when not reported)
    error: str | None = None


async def describe_endpoint(client: httpx.AsyncClient, url: str) -> EndpointInfo:
    """What one server serves, from ``/v1/models``; an unreachable or odd server is described by ``error``."""
    try:
        response = await client.get(url + "/v1/models", timeout=5.0)
    except httpx.HTTPError as exc:
        return EndpointInfo(url, {}, one_line(f"unreachable ({type(exc).__name__}: {exc or 'no answer'})"))
    if response.status_code != 200:
        return EndpointInfo(url, {}, f"HTTP {response.status_code} on /v1/models: {server_message(response.text)}")
    try:
        data = response.json()["data"]
        models = {m["id"]: m.get("max_model_len") for m in data}
    except (ValueError, KeyError, TypeError):
        return EndpointInfo(url, {}, "/v1/models did not answer with a model list (not an OpenAI server?)")
    return EndpointInfo(url, models)


def same_model(wanted: str, served: str) -> bool:
    """A configured model matches a served id exactly, or as the same local path.

    >>> same_model("org/name", "org/name"), same_model("/tmp/m/", "/tmp/m"), same_model("a", "b")
    (True, True, False)
    """
    if wanted == served:
        return True
    if wanted.startswith(("/", ".", "~")) and served.startswith(("/", ".", "~")):
        return Path(wanted).expanduser().resolve() == Path(served).expanduser().resolve()
    return False


def choose_model(infos: Sequence[EndpointInfo], wanted: str | None) -> tuple[str, list[EndpointInfo]]:
    """The served model id to use and the endpoints that serve it; raises EndpointError when none do.

    >>> a, b = EndpointInfo("http://a", {"m": 2048}), EndpointInfo("http://b", {}, "unreachable")
    >>> model, ok = choose_model([a, b], None); model, [i.url for i in ok]
    ('m', ['http://a'])
    >>> choose_model([a], "other")
    Traceback (most recent call last):
    ...
    solver.engines.openai_server.EndpointError: no endpoint serves model 'other' (http://a serves m)
    >>> choose_model([b], None)
    Traceback (most recent call last):
    ...
    solver.engines.openai_server.EndpointError: no endpoint reachable: http://b: unreachable
    """
    live = [i for i in infos if i.error is None and i.models]
    if not live:
        raise EndpointError("no endpoint reachable: " + "; ".join(f"{i.url}: {i.error or 'serves no model'}"
                                                               for i in infos))
    if wanted is None:
        wanted = next(iter(live[0].models))
    matching = [i for i in live if any(same_model(wanted, m) for m in i.models)]
    if not matching:
        served = "; ".join(f"{i.url} serves {', '.join(i.models)}" for i in live)
        raise EndpointError(f"no endpoint serves model {wanted!r} ({served})")
    served_id = next(m for m in matching[0].models if same_model(wanted, m))
    return served_id, matching


def load_tokenizer(model: str) -> Tokenizer | None:
    """The model's tokenizer when the model is a local directory (prompts then go as token ids), else None."""
    path = Path(model).expanduser()
    if not (path / "config.json").is_file():
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


async def open_openai_engine(config: Config) -> OpenAIServerEngine:
    """Check every endpoint, pick the served model, load its tokenizer when local; raise EndpointError (one line)
    when no endpoint can serve. Endpoints that are down now start as unhealthy and are probed again later;
    endpoints serving another model are dropped."""
    urls = [normalise_url(u) for u in config.engine.endpoints]
    if not urls:
        raise EndpointError("engine.endpoints is empty: give a server URL (--endpoint http://127.0.0.1:8000)")
    async with httpx.AsyncClient() as probe:
        infos = await asyncio.gather(*(describe_endpoint(probe, u) for u in urls))
    model, serving = choose_model(infos, config.engine.model)
    down = [i for i in infos if i.error is not None]
    wrong = [i for i in infos if i.error is None and i not in serving]
    for info in down:
        log.warning("endpoint %s: %s; it will be probed again later", info.url, info.error)
    for info in wrong:
        log.warning("endpoint %s skipped: it serves %s, not %s", info.url, ", ".join(info.models), model)
    lengths = [n for i in serving for m, n in i.models.items() if m == model and n is not None]
    tokenizer = await asyncio.to_thread(load_tokenizer, model)
    engine = OpenAIServerEngine([i.url for i in serving + down], model, tokenizer=tokenizer,
                                max_model_len=min(lengths) if lengths else None)
    for endpoint, info in zip(engine.endpoints[len(serving):], down):
        engine.rest(endpoint, info.error or "unreachable", announce=False)  # already announced above
    return engine
