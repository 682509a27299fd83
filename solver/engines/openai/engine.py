"""The Engine protocol over one or several vLLM OpenAI-compatible servers serving the same model.

Requests go to ``/v1/completions`` with ``stream: true`` and come back as server-sent events; each event becomes a
``Delta``. Every request goes to the healthy endpoint with the fewest requests in flight from this client. A
connection failure (refused, dropped, or ``read_timeout_s`` of silence) is retried, a bounded number of times over
a bounded time, on the next endpoint; the failed endpoint rests for a cool-down and is probed with ``/health``
before it gets work again. A stream cut after some output resumes on another server from the tokens already
streamed (the prompt grows by them), so the caller sees one uninterrupted request. When the attempts run out the
request ends with ``finish_reason="error"`` and the reason, never an exception.

Leaving a stream early (break, ``aclose``, a cancelled task) closes its HTTP connection, and vLLM aborts a request
whose client disconnected, so an early stop frees the server's batch slot at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from solver.core.clock import SystemClock
from solver.config import Config, ConfigError
from solver.engines.openai.endpoints import (
    Endpoint,
    EndpointError,
    RetryPolicy,
    choose_model,
    describe_endpoint,
    normalise_url,
    parse_metric,
    pick_endpoint,
)
from solver.engines.openai.protocol import StreamDecoder, completion_body, one_line, resume_body, server_message
from solver.types import Clock, Delta, GenerationRequest, Tokenizer

log = logging.getLogger(__name__)

# Statuses a proxy or a server that is starting or stopping answers with; the request never reached the model.
_RETRY_STATUS = frozenset({502, 503, 504})


class _Unreachable(Exception):
    """A server failed the request at the transport level (refused, dropped, silent): before any output it can
    be sent again elsewhere; after output, what is left of it can (``resume_body``)."""


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
        first_body = completion_body(request, self.model, self.max_model_len)
        if first_body["max_tokens"] <= 0:
            # The prompt already fills the context: the request ends as a length stop, like the engine would.
            yield Delta(text="", token_ids=(), finish_reason="length",
                        prompt_tokens=len(request.prompt_token_ids or ()))
            return
        delays = iter(self.retry.delays())
        started = self.clock.now()
        failures: list[str] = []
        # What already went to the caller: a cut stream resumes from here on another server (``resume_body``).
        sent_ids: list[int] = []
        sent_text: list[str] = []
        resumable = True  # every delta carried its token ids (vLLM's return_token_ids), so a resume is exact
        prompt_tokens = len(request.prompt_token_ids) if request.prompt_token_ids is not None else None
        for _ in range(self.retry.attempts):
            await self._probe_due()
            endpoint = pick_endpoint(self.endpoints, next(self._turns))
            if endpoint is not None:
                body = resume_body(first_body, sent_ids, "".join(sent_text)) if sent_text or sent_ids else first_body
                if body["max_tokens"] <= 0:  # cut right after the last allowed token
                    yield Delta(text="", token_ids=(), finish_reason="length", prompt_tokens=prompt_tokens)
                    return
                if sent_text or sent_ids:
                    log.warning("request %s resumed on %s after %d token(s)", request.request_id, endpoint.url,
                                len(sent_ids))
                try:
                    async with contextlib.aclosing(self._attempt(endpoint, body, request.logprobs)) as deltas:
                        async for delta in deltas:
                            if body is first_body and prompt_tokens is None:
                                prompt_tokens = delta.prompt_tokens  # a text prompt: the first server counts it
                            elif body is not first_body:
                                # a resumed request's prompt holds the earlier output; report the caller's own
                                delta = dataclasses.replace(delta, prompt_tokens=prompt_tokens)
                            if delta.finish_reason is None:
                                sent_ids.extend(delta.token_ids)
                                sent_text.append(delta.text)
                                resumable = resumable and (bool(delta.token_ids) or not delta.text)
                            yield delta
                    return
                except _Unreachable as exc:
                    failures.append(str(exc))
                    self.rest(endpoint, str(exc))
                    if (sent_text or sent_ids) and not resumable:
                        yield Delta(text="", token_ids=(), finish_reason="error", prompt_tokens=prompt_tokens,
                                    error=one_line(f"{exc} (after output without token ids: cannot resume)"))
                        return
                    if pick_endpoint(self.endpoints) is not None:
                        continue  # another server is up: go there now
            delay = next(delays, None)
            if delay is None or self.clock.now() - started + delay > self.retry.total_s:
                break
            await asyncio.sleep(delay)
        reason = failures[-1] if failures else "; ".join(f"{e.url}: {e.error}" for e in self.endpoints)
        where = f" (cut after {len(sent_ids)} token(s))" if sent_ids else ""
        yield Delta(text="", token_ids=(), finish_reason="error", prompt_tokens=prompt_tokens,
                    error=one_line(f"no server reachable after {len(failures)} attempt(s){where}: {reason}"))

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
                httpx.WriteError, httpx.ReadTimeout) as exc:
            # The server went away or stopped answering (a read timeout is ``read_timeout_s`` of silence): the
            # caller sends the request, or what is left of it, to another server.
            raise _Unreachable(one_line(f"{endpoint.url}: {type(exc).__name__}: {exc or 'connection failed'}"))
        except httpx.HTTPError as exc:  # a bad URL, a pool timeout and the like: not the server's failing
            decoder.final = Delta(text="", token_ids=(), finish_reason="error",
                                  error=one_line(f"{endpoint.url}: {type(exc).__name__}: {exc}"))
        finally:
            endpoint.in_flight -= 1
            self._open -= 1
        yield decoder.end()


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
    # A server run with skip_tokenizer_init (a dialect that renders and parses ids itself, e.g. harmony) may serve
    # a model folder without tokenizer files: none is needed here either.
    tokenizer = None if config.engine.args.get("skip_tokenizer_init") else await asyncio.to_thread(load_tokenizer,
                                                                                                 model)
    engine = OpenAIServerEngine([i.url for i in serving + down], model, tokenizer=tokenizer,
                                max_model_len=min(lengths) if lengths else None)
    for endpoint, info in zip(engine.endpoints[len(serving):], down):
        engine.rest(endpoint, info.error or "unreachable", announce=False)  # already announced above
    return engine
