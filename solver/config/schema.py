"""The configuration's sections and how a ``Config`` is built from plain data: unknown keys and out-of-range
values are one-line ``ConfigError``s. The policy sections (answers, vote, stop, solve, budget) are in
``solver.config.policy``; presets, files and overrides are read in ``solver.config.loading``.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from solver.config.layout import Layout
from solver.config.policy import AnswerConfig, BudgetConfig, SolveConfig, StopConfig, VoteConfig, check as _check
from solver.errors import ConfigError

@dataclass(frozen=True)
class EngineConfig:
    name: str = "vllm"  # registry name: vllm | openai | replay
    model: str | None = None  # local path or hub id; None = the embedded tiny model
    # Passed unchanged to vLLM's AsyncEngineArgs (dtype, max_model_len, gpu_memory_utilization, ...).
    args: dict[str, Any] = field(default_factory=dict)
    # Environment variables set before the engine starts (e.g. VLLM_CPU_KVCACHE_SPACE in GiB on CPU).
    env: dict[str, str] = field(default_factory=dict)
    endpoints: tuple[str, ...] = ()  # base URLs for the openai engine
    replay_from: tuple[str, ...] = ()  # run dirs for the replay engine
    replay_tokens_per_s: float | None = None  # replay timing model: None = recorded durations
    replay_time_scale: float = 1.0  # replay speed: 1 = recorded time, 0 = instant
    # replay: each code call gets the output recorded for its turn instead of running in the sandbox
    replay_outputs: bool = False
    # A repetition's turns as one vLLM streaming-input request (no new request per tool call) where the installed
    # vLLM has them; turns with stop strings (the fences dialect) or a rewritten context go as a request each.
    streaming_input: bool = False
    # This engine's measured speed (solver/timing/data NAME, or a .yaml file): what simulate and tune time attempts
    # with, and (replay_timing: model) how long the replay engine takes, sequences in flight and contexts counted.
    time_model: str | None = None
    replay_timing: Literal["recorded", "model"] = "recorded"  # recorded: durations or replay_tokens_per_s
    # vLLM only: before the first problem, run every step shape the scheduler can produce outside the CUDA graphs,
    # so no kernel compiles mid-problem (solver/engines/warmup.py; its seconds get a line of their own at start).
    warmup: bool = False
    # vLLM only: a compile cache built by ``solver compile-cache build`` (a folder with manifest.json), checked
    # against this machine's vLLM, torch, model and GPU and used when it matches
    # (solver/engines/compile_cache/shipped.py); refused with one logged line otherwise, and the engine starts cold.
    compile_cache: str | None = None

    def __post_init__(self) -> None:
        _check(self.replay_timing == "recorded" or bool(self.time_model),
               "engine.replay_timing model needs engine.time_model")
        _check(self.replay_time_scale >= 0, "engine.replay_time_scale must be >= 0 (1 = recorded, 0 = instant)")
        _check(self.replay_tokens_per_s is None or self.replay_tokens_per_s > 0,
               "engine.replay_tokens_per_s must be > 0 or null")
        _check(not self.replay_outputs or self.name == "replay", "engine.replay_outputs needs the replay engine")


# Sampling parameters the solver sets per request; ``sampling.extra`` may not override them.
SOLVER_OWNED_SAMPLING = frozenset({
    "n", "temperature", "top_p", "seed", "max_tokens", "stop", "stop_token_ids", "logprobs", "output_kind",
    # request-body fields the server engine relies on to parse its stream
    "prompt", "model", "stream", "stream_options", "include_stop_str_in_output", "return_token_ids",
    "return_tokens_as_token_ids"})


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.8
    top_p: float = 1.0
    max_tokens: int = 2048  # per engine request (one turn)
    max_total_tokens: int = 8192  # generated tokens per repetition over all turns
    max_turns: int = 4  # engine requests per repetition
    logprobs: int | None = None  # top-k logprobs for confidence; None = off (cheaper)
    seed: int = 0  # repetition i of problem p uses a seed derived from (seed, p, i)
    # fixed: every run samples from ``seed``, so AIMO3's two private runs send the same seeds and the second repeats
    # the first's samples up to the engine's batch nondeterminism and where the clock cuts differ; per-run: the Kaggle
    # predictor takes its base from the run (entropy drawn when it starts, written into the run log's config), so
    # the runs sample apart. The mean score is the same either way; the spread and P(>= the line) are not
    # (``solver simulate --scoring aimo3-private`` shows both). fixed is the default: a rerun repeats what was seen.
    seed_policy: Literal["fixed", "per-run"] = "fixed"
    # Further sampling parameters passed unchanged to the engine (vLLM ``SamplingParams`` in process, the request
    # body of an OpenAI-compatible server): min_p, top_k, repetition_penalty, presence_penalty, ...
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in sorted(set(self.extra) & SOLVER_OWNED_SAMPLING):
            raise ConfigError(f"sampling.extra.{key} is set by the solver itself (use the sampling.* key, or leave"
                              " it to the solver)")
        _check(self.temperature >= 0, "sampling.temperature must be >= 0")
        _check(0 < self.top_p <= 1, "sampling.top_p must be in (0, 1]")
        _check(self.max_tokens > 0, "sampling.max_tokens must be > 0")
        _check(self.max_total_tokens > 0, "sampling.max_total_tokens must be > 0")
        _check(self.max_turns > 0, "sampling.max_turns must be > 0")
        _check(self.logprobs is None or 1 <= self.logprobs <= 20, "sampling.logprobs must be 1..20 or null")


@dataclass(frozen=True)
class PromptConfig:
    template: str = "tir"  # a file prompts/<template>.yaml
    output_chars: int = 600  # tool output shown to the model, characters: a longer one is cut in the middle
    # How a code run is shown (solver/dialects/output.py): plain (the output without trailing newlines, or an
    # error's last lines) or jupyter (stdout, result and traceback exactly as a Jupyter kernel harness joins them).
    output_style: Literal["plain", "jupyter"] = "plain"
    output_keep: int = 0  # characters kept at each end of a cut output; 0 = two thirds head, one third tail
    output_cut: str = "\n...\n"  # put where the middle of a long output was cut
    empty_output: str = ""  # shown for a run that showed nothing (jupyter style)
    timeout_output: str = "TimeoutError: the code ran too long"  # shown for a run stopped at its time limit
    restarted_output: str = "(the Python session was restarted: names defined by earlier calls are gone)"
    # How the conversation is spoken (solver/dialects): fences (```python blocks in text), harmony (gpt-oss,
    # through openai_harmony), hermes (Qwen3-style <tool_call> JSON, rendered by the tokenizer's chat template).
    dialect: Literal["fences", "harmony", "hermes"] = "fences"
    reasoning_effort: Literal["low", "medium", "high"] = "high"  # harmony's system message
    # harmony: the python tool's description in the system message; null = openai_harmony's default
    # (ToolNamespaceConfig.python(): files in /mnt/data, internet access UNKNOWN)
    tool_description: str | None = None
    # harmony: the user message sent after a turn that ends without a boxed answer (a <|return|>, or a <|call|>
    # to no tool), at most max_follow_ups times per repetition; 0 = such a turn ends the repetition
    follow_up: str = ""
    max_follow_ups: int = 0

    def __post_init__(self) -> None:
        _check(self.output_chars > 0, "prompt.output_chars must be > 0")
        _check(0 <= 2 * self.output_keep <= self.output_chars,
               "prompt.output_keep must be >= 0 and at most half of prompt.output_chars")
        _check(self.max_follow_ups >= 0, "prompt.max_follow_ups must be >= 0")
        _check(self.max_follow_ups == 0 or bool(self.follow_up.strip()),
               "prompt.max_follow_ups needs a prompt.follow_up text")


@dataclass(frozen=True)
class SandboxConfig:
    name: str = "pool"  # registry name
    # concurrent snippets; 0 = usable cores minus one, at most the repetitions the engine keeps generating
    # (repetitions_busy), at least 1
    workers: int = 0
    timeout_s: float = 5.0  # wall time per snippet
    memory_mb: int = 2048  # address-space cap per snippet
    output_bytes: int = 16384  # captured stdout/stderr per snippet; the rest is discarded while it streams
    preamble: str = "import math\nimport numpy as np\nimport sympy as sp\n"
    disk_mb: int = 64  # private working-directory size per snippet (tmpfs where namespaces hold)
    namespaces: bool = True  # pid/net/mount namespaces per snippet where the OS allows them
    # newest: each block runs alone in a fresh process; accumulate: the blocks that ran cleanly run again before
    # it; stateful: one Python session per repetition (``Sandbox.session()``), names survive between calls.
    code_mode: Literal["newest", "accumulate", "stateful"] = "newest"
    repl: bool = True  # show the value of a final bare expression, like a REPL
    # How a stateful session runs and shows its calls: repr (the value of a final bare expression printed with
    # repr, tracebacks of <cell N>, the preamble's names defined) or ipython (IPython's own shell, as a Jupyter
    # kernel: its pretty printer, %xmode Plain tracebacks of Cell In[N], a kernel's empty namespace; the preamble
    # then only makes its imports warm). docs/sandbox.md, "The jupyter display".
    display: Literal["repr", "ipython"] = "repr"
    starter_code: str = ""  # a cell run first in every session process (imports, seeds); its output is not shown
    # A session call interrupted at its limit that has not stopped this long after is killed, with the session's
    # state; an interrupted Python loop stops within microseconds, so this only waits for C code to return.
    interrupt_grace_s: float = 0.5

    def __post_init__(self) -> None:
        _check(self.workers >= 0, "sandbox.workers must be >= 0")
        _check(self.timeout_s > 0, "sandbox.timeout_s must be > 0")
        _check(self.memory_mb >= 64, "sandbox.memory_mb must be >= 64")
        _check(self.disk_mb >= 1, "sandbox.disk_mb must be >= 1")
        _check(self.code_mode in ("newest", "accumulate", "stateful"),
               "sandbox.code_mode must be newest, accumulate or stateful")
        _check(self.display in ("repr", "ipython"), "sandbox.display must be repr or ipython")
        _check(self.display == "repr" or self.code_mode == "stateful",
               "sandbox.display ipython shows stateful sessions: set sandbox.code_mode to stateful")
        _check(self.display == "repr" or importlib.util.find_spec("IPython") is not None,
               "sandbox.display ipython needs IPython installed (pip install ipython)")
        _check(self.interrupt_grace_s >= 0, "sandbox.interrupt_grace_s must be >= 0")


@dataclass(frozen=True)
class Config:
    preset: str = "tiny"
    engine: EngineConfig = field(default_factory=EngineConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    answers: AnswerConfig = field(default_factory=AnswerConfig)
    vote: VoteConfig = field(default_factory=VoteConfig)
    stop: StopConfig = field(default_factory=StopConfig)
    solve: SolveConfig = field(default_factory=SolveConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)

    def __post_init__(self) -> None:
        _check_speculation(self.engine, self.sampling)

    def check_run(self) -> None:
        """The rules between sections that a run of this config needs (each section checks its own fields when it
        is built; these are checked before a run starts, since a config may be built in steps or saved
        unfinished): a one-line ConfigError for the first one broken.

        >>> Config().replace({"engine.name": "replay"}).check_run()
        Traceback (most recent call last):
        ...
        solver.errors.ConfigError: the replay engine needs --from RUN_DIR
        """
        e = self.engine
        check_model_named(self)
        _check(e.name != "openai" or bool(e.endpoints), "the openai engine needs at least one --endpoint URL")
        _check(e.name != "replay" or bool(e.replay_from), "the replay engine needs --from RUN_DIR")
        _check(self.solve.parallel_problems == 1 or not (self.budget.total_s or self.budget.cutoff_s),
               "a time budget needs solve.parallel_problems = 1 (problems arrive one at a time)")

    def to_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))

    def replace(self, overrides: dict[str, Any]) -> Config:
        """A new config with dotted-key overrides applied, e.g. {"solve.reps": 4}."""
        return from_dict(_merge(self.to_dict(), _undot(overrides)))


def cpu_engine(env: Mapping[str, Any]) -> bool:
    """Whether an engine section (its ``engine.env``) is written for vLLM's CPU build, the one installed here: it
    sets the CPU backend's own variables (``VLLM_CPU_*``), as the tiny preset's engine does (and the CPU engine
    the day and the benchmarks put in a GPU preset's place). Every other engine is written for the GPU kit's vLLM.

    >>> cpu_engine({"VLLM_CPU_KVCACHE_SPACE": "2"}), cpu_engine({"TOKENIZERS_PARALLELISM": "false"})
    (True, False)
    """
    return any(key.startswith("VLLM_CPU_") for key in env)


def check_model_named(config: Config) -> None:
    """A vLLM engine written for a GPU (every engine but one for vLLM's CPU build, ``cpu_engine``) names its model:
    without ``--model`` it would load the embedded tiny model with the GPU's arguments (its ``max_model_len``, fp8
    KV cache), which fails minutes later or measures nothing worth having; a one-line ConfigError here instead.
    Every preset's engine sets ``engine.env``; one with none is a config built in code (``Config()``), left alone.

    >>> check_model_named(Config())
    >>> check_model_named(Config(preset="h100").replace({"engine.env": {"TOKENIZERS_PARALLELISM": "false"}}))
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: --model is required with preset h100 (its engine is written for a GPU; ...
    """
    e = config.engine
    _check(e.name != "vllm" or e.model is not None or not e.env or cpu_engine(e.env),
           f"--model is required with preset {config.preset} (its engine is written for a GPU; the embedded tiny "
           "model runs on the CPU preset tiny)")


# vLLM's own threshold for "min_p is set" (vllm/sampling_params.py, _SAMPLING_EPS in 0.26).
_MIN_P_SET = 1e-5


def _check_speculation(engine: EngineConfig, sampling: SamplingConfig) -> None:
    """Speculative decoding (``engine.args.speculative_config``) with ``sampling.extra.min_p``: vLLM 0.26 accepts
    the engine and then refuses every request (``SamplingParams._validate_spec_decode``: "The min_p and logit_bias
    sampling parameters are not yet supported with speculative decoding"), minutes into a GPU start; refused here
    in one line, before anything starts.

    >>> spec = {"engine.args": {"speculative_config": {"method": "eagle3", "num_speculative_tokens": 3}}}
    >>> Config().replace({**spec, "sampling.extra.min_p": 0.02})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: sampling.extra.min_p 0.02 with engine.args.speculative_config: vLLM refuses min_p ...
    >>> Config().replace({**spec, "sampling.extra.min_p": 0}).sampling.extra
    {'min_p': 0}
    """
    if not engine.args.get("speculative_config"):
        return
    refused = {"min_p": "0", "logit_bias": "null"}  # what vLLM refuses, and the value that turns each off
    for key, off in refused.items():
        value = sampling.extra.get(key)
        on = value > _MIN_P_SET if key == "min_p" and isinstance(value, (int, float)) else bool(value)
        _check(not on, f"sampling.extra.{key} {value} with engine.args.speculative_config: vLLM refuses {key} with "
                       f"speculative decoding; set sampling.extra.{key}={off} (or drop engine.args.speculative_config)")


def repetitions_busy(config: Config) -> int:
    """Repetitions the engine can keep generating at once: its batch (``Layout.batch``) with auto workers
    (``solve.workers: 0``), else ``solve.workers x solve.parallel_problems`` but no more than the batch.

    A repetition runs at most one snippet at a time, and one the engine cannot be generating for only waits in its
    queue, so this also bounds the sandbox snippets worth running side by side (``sandbox.workers: 0``).

    >>> repetitions_busy(Config()), repetitions_busy(Config().replace({"solve.workers": 0}))
    (8, 64)
    >>> repetitions_busy(Config().replace({"solve.workers": 16, "solve.parallel_problems": 4,
    ...                                    "engine.args": {"max_num_seqs": 8, "data_parallel_size": 2}}))
    16
    """
    batch = Layout.of(config.engine.args).batch
    if config.solve.workers == 0:
        return batch
    return min(batch, config.solve.workers * config.solve.parallel_problems)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _undot(overrides: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


_PASSTHROUGH = ("args", "env", "weights", "extra")  # maps merged key by key, their keys not validated here


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in _PASSTHROUGH:
            out[key] = _merge(out[key], value)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}  # passthrough maps merge key by key
        else:
            out[key] = value
    return out


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    nullable = origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)
    if value is None and not nullable and hint is not Any:
        raise ConfigError(f"{where or 'config'} cannot be null (only keys documented as 'or null' can)")
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where)
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where} must be a list")
        return tuple(value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping")
        return dict(value)
    if origin is Literal:
        if value not in typing.get_args(hint):
            raise ConfigError(f"{where} must be one of {', '.join(map(str, typing.get_args(hint)))}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false")
        return value
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} must be a number")
        if hint is int and value != int(value):
            raise ConfigError(f"{where} must be a whole number")
        return hint(value)
    if hint is str:
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{where} must be text")
        return str(value)
    return value


def _build(cls: Any, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'} must be a mapping")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        nearest = difflib.get_close_matches(unknown[0], sorted(names), n=1, cutoff=0.0)
        raise ConfigError(f"unknown config key {'.'.join(filter(None, [where, unknown[0]]))}"
                          + (f" (nearest: {'.'.join(filter(None, [where, nearest[0]]))!r})" if nearest else ""))
    kwargs = {k: _coerce(v, hints[k], ".".join(filter(None, [where, k]))) for k, v in data.items()}
    return cls(**kwargs)


def from_dict(data: dict[str, Any]) -> Config:
    return _build(Config, data, "")
