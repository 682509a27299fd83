"""What the engine did while a request waited: vLLM's step log and JIT monitor, read back and lined up with holds.

A run started with epoch-stamped logging (:func:`vllm_logging_config`, ``benchmarks/day.py --log-engine``) and
the engine arguments ``enable_logging_iteration_details`` (one line per engine step: its prefill and decode
requests and tokens and its milliseconds; vLLM 0.26 ``v1/metrics/loggers.py``, logged in the client's process) and
``jit_monitor_verbose`` (one line per Triton kernel compiled after vLLM's own warm-up, with its constants and
signature; ``vllm/utils/jit_monitor.py``, logged in the engine core's process) leaves every step and every
compile on one wall clock. :func:`explain_holds` then says, per hold (a request whose first token came more than
``solver.timing.measured.HOLD_S`` after it was sent), which steps ran in it, how long the longest took, which
compiles fell in it, and so what held it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# epoch seconds to the ms first, so lines of every process of the engine sort and line up on one clock
EPOCH_FORMAT = "%(created).3f %(levelname)s [%(name)s] %(message)s"

_STAMP = r"(?:\([^)]*\)\s+)?(?:(?P<t>\d{9,11}\.\d{3}) )?"  # vLLM's own format has no epoch: t 0
_ITERATION = re.compile(
    _STAMP + r".*?Iteration\((?P<i>\d+)\): (?P<cr>\d+) context requests, (?P<ct>\d+) context tokens, "
    r"(?P<gr>\d+) generation requests, (?P<gt>\d+) generation tokens, iteration elapsed time: (?P<ms>[0-9.]+) ms")
_JIT = re.compile(_STAMP + r".*?(?P<backend>Triton|CuTeDSL|TileLang) (?P<event>[^:]*?) during inference: "
                           r"(?P<fn>[\w.<>-]+)(?: \((?P<detail>.*)\))?\. This causes")
_WARMUP = re.compile(_STAMP + r".*?engine warm-up: (?P<shapes>\d+) step shapes .* in (?P<s>[0-9.]+) s")


def vllm_logging_config(level: str = "INFO") -> dict[str, Any]:
    """A ``VLLM_LOGGING_CONFIG_PATH`` config: vLLM's logger on stderr at ``level``, lines stamped with epoch
    seconds (:data:`EPOCH_FORMAT`)."""
    return {"version": 1, "disable_existing_loggers": False,
            "formatters": {"epoch": {"format": EPOCH_FORMAT}},
            "handlers": {"epoch": {"class": "logging.StreamHandler", "formatter": "epoch", "level": level,
                                   "stream": "ext://sys.stderr"}},
            "loggers": {"vllm": {"handlers": ["epoch"], "level": level, "propagate": False}}}


@dataclass(frozen=True)
class Step:
    """One engine step as vLLM logged it; ``t`` its log time (epoch s, just after the step ended)."""

    t: float
    index: int
    prefill_requests: int
    prefill_tokens: int
    decode_requests: int
    decode_tokens: int
    ms: float

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_tokens


@dataclass(frozen=True)
class Compile:
    """One kernel compiled during inference (epoch s of the log line, after the compile)."""

    t: float
    backend: str
    kernel: str
    detail: str


@dataclass(frozen=True)
class EngineLog:
    steps: tuple[Step, ...]
    compiles: tuple[Compile, ...]
    warmups: tuple[tuple[float, int, float], ...]  # (epoch s at its end, shapes, seconds)


def parse_engine_log(text: str) -> EngineLog:
    """The steps, compiles and warm-ups of an epoch-stamped engine log.

    >>> log = parse_engine_log('''1764329000.100 INFO [vllm.v1.metrics.loggers] Iteration(7): 1 context requests, \\
    ... 300 context tokens, 7 generation requests, 7 generation tokens, iteration elapsed time: 1850.20 ms, GPU KV \\
    ... cache usage: 12.0%
    ... (EngineCore pid=9) 1764329000.050 WARNING [vllm.utils.jit_monitor] Triton kernel JIT compilation during \\
    ... inference: _matmul_ogs (constexprs={BLOCK_M=16}; key='k'). This causes a latency spike; consider ...
    ... 1764328990.000 INFO [solver.engines.warmup] engine warm-up: 248 step shapes (65..2048 tokens, 9 in all) \\
    ... in 21.4 s''')
    >>> log.steps[0].tokens, log.steps[0].ms, log.compiles[0].kernel, log.compiles[0].detail, log.warmups
    (307, 1850.2, '_matmul_ogs', "constexprs={BLOCK_M=16}; key='k'", ((1764328990.0, 248, 21.4),))
    """
    steps, compiles, warmups = [], [], []
    for line in text.splitlines():
        if "Iteration(" in line and (m := _ITERATION.search(line)):
            steps.append(Step(float(m["t"] or 0), int(m["i"]), int(m["cr"]), int(m["ct"]), int(m["gr"]), int(m["gt"]),
                              float(m["ms"])))
        elif "during inference" in line and (m := _JIT.search(line)):
            compiles.append(Compile(float(m["t"] or 0), m["backend"], m["fn"], m["detail"] or ""))
        elif "engine warm-up" in line and (m := _WARMUP.search(line)):
            warmups.append((float(m["t"] or 0), int(m["shapes"]), float(m["s"])))
    return EngineLog(tuple(sorted(steps, key=lambda s: s.t)), tuple(sorted(compiles, key=lambda c: c.t)),
                     tuple(warmups))


@dataclass(frozen=True)
class HoldCause:
    """One hold lined up with the engine's log (epoch seconds)."""

    start: float
    end: float
    steps: int  # steps logged inside the hold
    longest_ms: float  # the longest of them
    longest_tokens: int  # its tokens (prefill + decode)
    longest_prefill: int
    compiles: tuple[str, ...]  # kernels compiled inside the hold
    cause: str  # "compile", "long step", "no step" (the engine ran nothing it logged), "steps"

    @property
    def seconds(self) -> float:
        return self.end - self.start


def explain_holds(holds: Sequence[tuple[float, float]], log: EngineLog, long_step_ms: float = 500.0,
                  slack_s: float = 0.05) -> list[HoldCause]:
    """Per hold window (epoch s): the steps logged in it (a step's line comes at its end, so a step that spans the
    window's end is counted by its line up to ``slack_s`` later), its longest step, the compiles in it, and the
    cause: ``compile`` when a kernel compiled inside it, ``long step`` when one step took over ``long_step_ms``
    without one (the engine ran, slowly), ``no step`` when it logged no step at all (it stood still outside its
    steps), else ``steps`` (it kept stepping: the request waited its turn).

    >>> log = EngineLog((Step(10.0, 1, 0, 0, 7, 7, 6.0), Step(12.0, 2, 1, 300, 7, 7, 1900.0)),
    ...                 (Compile(11.9, "Triton", "_matmul_ogs", ""),), ())
    >>> [(h.steps, h.longest_ms, h.compiles, h.cause) for h in explain_holds([(9.9, 12.0), (20.0, 22.0)], log)]
    [(2, 1900.0, ('_matmul_ogs',), 'compile'), (0, 0.0, (), 'no step')]
    """
    out = []
    for start, end in holds:
        inside = [s for s in log.steps if start <= s.t <= end + slack_s]
        longest = max(inside, key=lambda s: s.ms, default=None)
        kernels = tuple(c.kernel for c in log.compiles if start <= c.t <= end + slack_s)
        if kernels:
            cause = "compile"
        elif longest is None:
            cause = "no step"
        elif longest.ms >= long_step_ms:
            cause = "long step"
        else:
            cause = "steps"
        out.append(HoldCause(start, end, len(inside), longest.ms if longest else 0.0,
                             longest.tokens if longest else 0, longest.prefill_tokens if longest else 0, kernels,
                             cause))
    return out
