"""In-process vLLM backend on ``AsyncLLM``: one streamed request per engine call, aborted in the engine when the
consumer leaves early. Engine arguments pass through unchanged from ``config.engine.args`` to ``AsyncEngineArgs``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from solver.config import Config, ConfigError
from solver.core.confidence import token_confidence
from solver.engines.compile_cache import CacheVerdict
from solver.engines.vllm_metrics import StartMark, in_process_sample
from solver.engines.vllm_compat import config_refusal, engine_shape, num_unfinished_requests, streaming_input_class
from solver.engines.warmup import WarmupReport, run_warmup
from solver.errors import first_line
from solver.models import resolve_model
from solver.types import Delta, FinishReason, GenerationRequest, Tokenizer

log = logging.getLogger(__name__)

_FINISH: dict[str | None, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}


def token_confidences(logprobs: list[Mapping[int, Any]] | None, k: int) -> tuple[float, ...]:
    """Per-token confidence (``core.confidence.token_confidence``) from vLLM's logprobs.

    vLLM returns, per token, the top-k candidates plus the sampled token when it is outside the top-k; only
    ranks 1..k enter the mean.
    """
    if not logprobs:
        return ()
    out = []
    for position in logprobs:
        top = [lp.logprob for lp in position.values() if lp.rank is not None and lp.rank <= k]
        out.append(token_confidence(top) if top else 0.0)
    return tuple(out)


class VllmEngine:
    name = "vllm"

    def __init__(self, llm: Any, tokenizer: Tokenizer | None, *, by_priority: bool = False) -> None:
        self._llm = llm
        self.tokenizer = tokenizer
        # vLLM refuses a request priority unless the engine schedules by priority (scheduling_policy).
        self._by_priority = by_priority
        self._closed = False
        self.warmup: WarmupReport | None = None  # the start's warm-up (engine.warmup), None when it ran none
        self.compile_cache: CacheVerdict | None = None  # what became of engine.compile_cache, None when unset
        # the start (its warm-up included) and the engine's counters at its end: the problems' figures count from it
        self.started: StartMark | None = None

    def session(self) -> VllmSession | None:
        """One engine request for a whole repetition (vLLM's streaming-input requests), or None when the
        installed vLLM has none: each turn's prompt then goes in as a new request."""
        return VllmSession(self) if streaming_input_class() is not None else None

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        from vllm.inputs import TokensPrompt

        params = sampling_params(request)
        prompt: Any = (TokensPrompt(prompt_token_ids=list(request.prompt_token_ids))
                       if request.prompt_token_ids is not None else request.prompt)
        # vLLM request ids must be unique across the engine's life; a retried turn reuses none.
        request_id = f"{request.request_id}-{uuid.uuid4().hex[:8]}"
        finished = False
        try:
            priority = request.priority if self._by_priority else 0
            async for delta in _deltas(self._llm.generate(prompt, params, request_id=request_id, priority=priority),
                                       request.logprobs or 0):
                yield delta
                if delta.finish_reason is not None:
                    finished = True
                    return
            finished = True
            yield Delta(text="", token_ids=(), finish_reason="error", error="engine stream ended without finishing")
        except Exception as exc:  # the engine boundary: a failed request becomes a value, the run goes on
            finished = True
            log.warning("request %s failed: %s", request_id, exc)
            yield Delta(text="", token_ids=(), finish_reason="error", error=f"{type(exc).__name__}: {exc}")
        finally:
            if not finished:
                # The consumer left early (early stop, deadline, first answer): free the sequence in the engine.
                await self._llm.abort(request_id)

    def running_requests(self) -> int:
        return 0 if self._closed else num_unfinished_requests(self._llm)

    def is_dead(self) -> bool:
        return self._closed or bool(self._llm.errored)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._llm.shutdown()  # ends the engine core process and its workers


def sampling_params(request: GenerationRequest) -> Any:
    """vLLM's ``SamplingParams`` for one request (or one turn of a streaming-input session)."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(
        n=1,
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        max_tokens=request.max_tokens,
        stop=list(request.stop),
        # The stop token stays in ``token_ids`` (a dialect parses it); it is cut from the text only.
        stop_token_ids=list(request.stop_token_ids),
        logprobs=request.logprobs,
        # DELTA: each output carries only new tokens, so a long stream costs O(n), not O(n^2).
        output_kind=RequestOutputKind.DELTA,
        **request.extra,
    )


async def _deltas(outputs: AsyncIterator[Any], k: int) -> AsyncIterator[Delta]:
    """vLLM's ``RequestOutput`` stream as deltas, up to the first output that finishes a turn: a normal
    request's last output, or a streaming-input session's turn end (a finish reason while the request goes on)."""
    first = True
    async for out in outputs:
        completion = out.outputs[0]
        ended = out.finished or completion.finish_reason is not None
        finish = _FINISH.get(completion.finish_reason, "error") if ended else None
        reason = completion.stop_reason
        yield Delta(
            text=completion.text or "",  # None when the engine runs without a tokenizer
            token_ids=tuple(completion.token_ids),
            confidences=token_confidences(completion.logprobs, k) if k else (),
            finish_reason=finish,
            stop_reason=reason if isinstance(reason, str) else None,
            stop_token=reason if isinstance(reason, int) and ended else None,
            prompt_tokens=len(out.prompt_token_ids or ()) if first else None,
            cached_tokens=out.num_cached_tokens if first else None,
        )
        first = False
        if ended:
            return


class VllmSession:
    """A repetition's turns as one vLLM streaming-input request: each turn appends only the tokens the
    dialogue added (the tool result, the next header) to the context the engine already holds, so a tool call
    costs no new admission and no prefix-cache lookup. Turns are strictly sequential.

    vLLM keeps a turn's output in the context except its last sampled token (that token has no KV yet), so the
    next turn's input starts from that token. A turn whose prompt does not extend the held context token for
    token (a dialect that re-renders history), or with stop strings (which streaming input refuses), ends the
    session's request and goes in as a plain request; the session restarts on the next turn.
    """

    def __init__(self, engine: VllmEngine) -> None:
        self.engine = engine
        self._inputs: asyncio.Queue[Any] | None = None  # StreamingInput chunks; None ends the request
        self._outputs: AsyncIterator[Any] | None = None
        self._request_id = ""
        self._held: list[int] = []  # the token ids the engine's context holds, as vLLM keeps them
        self.turns = 0  # turns served by the open streaming request (for tests and benchmarks)

    async def _inputs_gen(self, queue: asyncio.Queue[Any]) -> AsyncIterator[Any]:
        while (chunk := await queue.get()) is not None:
            yield chunk

    async def _end(self, abort: bool) -> None:
        """Close the open streaming request (abort frees its KV at once; a clean end lets vLLM finish it)."""
        inputs, outputs, self._inputs, self._outputs, self._held = self._inputs, self._outputs, None, None, []
        if inputs is None or outputs is None:
            return
        if abort:
            await self.engine._llm.abort(self._request_id)
        inputs.put_nowait(None)
        with contextlib.suppress(Exception):  # the request is over either way; its tail carries nothing
            await outputs.aclose()

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        ids = list(request.prompt_token_ids) if request.prompt_token_ids is not None else None
        cls = streaming_input_class()
        if ids is None or request.stop or cls is None or (
                self._outputs is not None and ids[:len(self._held)] != self._held):
            await self._end(abort=True)
            async for delta in self.engine.stream(request):
                yield delta
            return
        from vllm.inputs import TokensPrompt

        params = sampling_params(request)
        if self._outputs is None:
            self._inputs = asyncio.Queue()
            self._request_id = f"{request.request_id}-s{uuid.uuid4().hex[:8]}"
            priority = request.priority if self.engine._by_priority else 0
            self._outputs = self.engine._llm.generate(self._inputs_gen(self._inputs), params,
                                                      request_id=self._request_id, priority=priority)
            self._held, self.turns = [], 0
        assert self._inputs is not None and self._outputs is not None
        self._inputs.put_nowait(cls(prompt=TokensPrompt(prompt_token_ids=ids[len(self._held):]),
                                    sampling_params=params))
        self.turns += 1
        outputs, generated, finished, held = self._outputs, [], False, len(self._held)
        try:
            async for delta in _deltas(_Borrowed(outputs), request.logprobs or 0):
                generated.extend(delta.token_ids)
                if delta.finish_reason is not None:
                    finished = True
                    if delta.finish_reason in ("stop", "length") and generated:
                        self._held = ids + generated[:-1]
                        yield replace_prompt_tokens(delta, len(ids), held)
                    else:
                        await self._end(abort=True)
                        yield delta
                    return
                yield replace_prompt_tokens(delta, len(ids), held)
            finished = True
            await self._end(abort=True)
            yield Delta(text="", token_ids=(), finish_reason="error", error="engine stream ended without finishing")
        except Exception as exc:  # the engine boundary: a failed request becomes a value, the run goes on
            finished = True
            log.warning("streaming request %s failed: %s", self._request_id, exc)
            await self._end(abort=True)
            yield Delta(text="", token_ids=(), finish_reason="error", error=f"{type(exc).__name__}: {exc}")
        finally:
            if not finished:  # the consumer left mid-turn (early stop, first answer, deadline)
                await self._end(abort=True)

    async def close(self) -> None:
        await self._end(abort=self._outputs is not None)


class _Borrowed:
    """Iterates a shared async iterator without closing it when the consumer stops (the session's request
    outlives each turn's loop)."""

    def __init__(self, inner: AsyncIterator[Any]) -> None:
        self.inner = inner

    def __aiter__(self) -> _Borrowed:
        return self

    async def __anext__(self) -> Any:
        return await self.inner.__anext__()


def replace_prompt_tokens(delta: Delta, prompt_tokens: int, held: int) -> Delta:
    """A session turn's prompt is the whole context, not the chunk vLLM saw as this turn's input; of it, the
    ``held`` tokens the engine kept from earlier turns were not computed again (as a prefix-cache hit would be)."""
    if delta.prompt_tokens is None:
        return delta
    return dataclasses.replace(delta, prompt_tokens=prompt_tokens,
                               cached_tokens=held if held else delta.cached_tokens)


def engine_args(config: Config, model: str) -> Any:
    """``AsyncEngineArgs`` from the config's passthrough arguments; unknown names are a config error."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    known = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    unknown = sorted(set(config.engine.args) - known)
    if unknown:
        raise ConfigError(f"unknown vLLM engine argument {unknown[0]!r}")
    args = dict(config.engine.args)
    args.setdefault("seed", config.sampling.seed)
    return AsyncEngineArgs(model=model, **args)


def check_sampling_extra(extra: Mapping[str, Any]) -> None:
    """Fail before the engine starts, with one line, if ``sampling.extra`` is not valid for ``SamplingParams``.
    Where vLLM is not installed (a dry run here of a command written for another machine) only the names are
    checked, by the dry run's rules; the values wait for the vLLM that runs them."""
    try:
        from vllm import SamplingParams
    except ImportError:
        return

    try:
        SamplingParams(**extra)
    except Exception as exc:  # vLLM's own validation error is not a ValueError; all become one config error
        raise ConfigError(f"sampling.extra is not valid for vLLM: {first_line(exc)}") from exc


def load_tokenizer(model: str, config: Config) -> Tokenizer | None:
    """The model's tokenizer; None when the engine runs without one (``skip_tokenizer_init``: a dialect such as
    harmony renders and parses token ids itself)."""
    if config.engine.args.get("skip_tokenizer_init"):
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


def apply_engine_env(config: Config) -> None:
    """The config's ``engine.env`` into this process's environment, where the user has not set a variable (the
    user's own environment wins over the preset); the engine and a compile cache's fingerprint read it."""
    for key, value in config.engine.env.items():
        os.environ.setdefault(key, str(value))


def apply_compile_cache(config: Config, model: str) -> CacheVerdict | None:
    """Use ``engine.compile_cache`` if it was built for this vLLM, model config and GPU and is whole (its line
    logged either way); the verdict's ``model_path`` is the path to hand vLLM (the link its compiled graphs are
    keyed by)."""
    if not config.engine.compile_cache:
        return None
    from solver.engines.compile_cache import fingerprint_here, use_cache, vllm_location

    verdict = use_cache(Path(config.engine.compile_cache), fingerprint_here(model, config.engine.args),
                        model_path=model, vllm_here=vllm_location())
    (log.info if verdict.usable else log.warning)(verdict.line)
    return verdict


async def open_vllm_engine(config: Config) -> VllmEngine:
    """Start the config's engine. With a compile cache that this machine may use, the engine starts from it; an
    engine that fails to start with it is started again without it, once, and the cache is not tried again in this
    process (``compile_cache.mark_failed``): a shipped cache is never worse than a cold start."""
    begin = time.perf_counter()
    apply_engine_env(config)
    model = resolve_model(config.engine.model)
    from solver.engines import compile_cache as cc

    env_before = {name: os.environ.get(name) for name in cc.CACHE_ENV}
    verdict = apply_compile_cache(config, model)
    root = Path(os.environ["VLLM_CACHE_ROOT"]).parent if verdict is not None and verdict.usable else None
    files, kernels = (cc.root_files(root), cc.kernel_names(root)) if root is not None else (set(), set())
    try:
        engine = await _start_engine(config, model, verdict)
    except Exception as exc:
        if root is None or config.engine.compile_cache is None:
            raise
        reason = first_line(exc)
        cc.mark_failed(config.engine.compile_cache, reason)
        cc.cold_environment(os.environ, env_before)
        line = (f"the compile cache {config.engine.compile_cache}: the engine failed to start with it ({reason}); "
                "started again without it")
        log.warning(line)
        engine = await _start_engine(config, model, CacheVerdict(False, line))
        root = None
    if root is not None and verdict is not None:
        outcome = cc.cache_outcome(root, files, kernels, time.perf_counter() - begin)
        engine.compile_cache = dataclasses.replace(verdict, line=f"{verdict.line}; {outcome.describe()}",
                                                   outcome=outcome)
        log.info(engine.compile_cache.line)
    engine.started = start_mark(begin)
    return engine


async def _start_engine(config: Config, model: str, verdict: CacheVerdict | None) -> VllmEngine:
    """One engine start (its warm-up included) on ``model`` through the link ``verdict`` placed, if any."""
    from vllm.v1.engine.async_llm import AsyncLLM

    class OnceAsyncLLM(AsyncLLM):  # type: ignore[misc, valid-type]
        """Shuts down once: AsyncLLM.__del__ shuts down again, which fails when it only runs during
        interpreter teardown (module globals already gone)."""

        _shut = False

        def shutdown(self, timeout: float | None = None) -> None:
            if not self._shut:
                self._shut = True
                super().shutdown(timeout=timeout)

        def __del__(self) -> None:
            if not self._shut:
                super().__del__()

    # the model through the cache's link where one was placed: vLLM keys its compiled graphs by the path it is given
    args = engine_args(config, verdict.model_path if verdict is not None and verdict.model_path else model)
    check_sampling_extra(config.sampling.extra)
    if config.engine.streaming_input and streaming_input_class() is None:
        import vllm

        log.warning("engine.streaming_input: vLLM %s has no streaming input that keeps each turn's max_tokens "
                    "(0.32 or later has); every turn goes in as a request of its own", vllm.__version__)
    tokenizer = load_tokenizer(model, config)
    try:
        llm = OnceAsyncLLM.from_engine_args(args)
    except Exception as exc:
        reason = config_refusal(exc)
        if reason is None:
            raise
        raise ConfigError(f"vLLM refuses the engine's config: {reason}") from None
    engine = VllmEngine(llm, tokenizer, by_priority=config.engine.args.get("scheduling_policy") == "priority")
    engine.compile_cache = verdict
    if config.engine.warmup:
        try:
            engine.warmup = await run_warmup(llm, engine_shape(llm))
        except BaseException:
            llm.shutdown()  # a start that fails (or is cancelled) mid warm-up leaves no engine core behind
            raise
    return engine


def start_mark(begin: float) -> StartMark:
    """The start that began at ``begin`` (perf_counter) ends now; vLLM's counters as it left them (the warm-up's
    prompts are in them: every prefix-cache lookup it made missed, by design)."""
    _, queries, hits = in_process_sample()
    return StartMark(begin, time.perf_counter(), queries, hits)
