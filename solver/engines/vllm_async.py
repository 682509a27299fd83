"""In-process vLLM backend on ``AsyncLLM``: one streamed request per engine call, aborted in the engine when the
consumer leaves early. Engine arguments pass through unchanged from ``config.engine.args`` to ``AsyncEngineArgs``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from solver.config import Config, ConfigError
from solver.core.stopping import token_confidence
from solver.engines.vllm_compat import num_unfinished_requests
from solver.tiny_model import resolve_model
from solver.types import Delta, FinishReason, GenerationRequest, Tokenizer

log = logging.getLogger(__name__)

_FINISH: dict[str | None, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}


def token_confidences(logprobs: list[Mapping[int, Any]] | None, k: int) -> tuple[float, ...]:
    """Per-token confidence (``core.stopping.token_confidence``) from vLLM's logprobs.

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

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(
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
        prompt: Any = (TokensPrompt(prompt_token_ids=list(request.prompt_token_ids))
                       if request.prompt_token_ids is not None else request.prompt)
        # vLLM request ids must be unique across the engine's life; a retried turn reuses none.
        request_id = f"{request.request_id}-{uuid.uuid4().hex[:8]}"
        finished = False
        try:
            first = True
            priority = request.priority if self._by_priority else 0
            async for out in self._llm.generate(prompt, params, request_id=request_id, priority=priority):
                completion = out.outputs[0]
                finish = _FINISH.get(completion.finish_reason) if out.finished else None
                if out.finished and finish is None:
                    finish = "error"
                reason = completion.stop_reason
                yield Delta(
                    text=completion.text or "",  # None when the engine runs without a tokenizer
                    token_ids=tuple(completion.token_ids),
                    confidences=token_confidences(completion.logprobs, request.logprobs or 0),
                    finish_reason=finish,
                    stop_reason=reason if isinstance(reason, str) else None,
                    stop_token=reason if isinstance(reason, int) and out.finished else None,
                    prompt_tokens=len(out.prompt_token_ids or ()) if first else None,
                    cached_tokens=out.num_cached_tokens if first else None,
                )
                first = False
                if out.finished:
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
    """Fail before the engine starts, with one line, if ``sampling.extra`` is not valid for ``SamplingParams``."""
    from vllm import SamplingParams

    try:
        SamplingParams(**extra)
    except Exception as exc:  # vLLM's own validation error is not a ValueError; all become one config error
        raise ConfigError(f"sampling.extra is not valid for vLLM: {str(exc).splitlines()[0]}") from exc


def load_tokenizer(model: str, config: Config) -> Tokenizer | None:
    """The model's tokenizer; None when the engine runs without one (``skip_tokenizer_init``: a dialect such as
    harmony renders and parses token ids itself)."""
    if config.engine.args.get("skip_tokenizer_init"):
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


async def open_vllm_engine(config: Config) -> VllmEngine:
    for key, value in config.engine.env.items():
        os.environ.setdefault(key, str(value))  # the user's own environment wins over the preset
    model = resolve_model(config.engine.model)
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

    args = engine_args(config, model)
    check_sampling_extra(config.sampling.extra)
    tokenizer = load_tokenizer(model, config)
    llm = OnceAsyncLLM.from_engine_args(args)
    return VllmEngine(llm, tokenizer, by_priority=config.engine.args.get("scheduling_policy") == "priority")
