"""A day's figures: per problem its record (``ProblemRecord``, a row of ``--json`` and of the printed table), the
prefix-cache hit rate from the engine's counters, and the variants' table (``--label``/``--table``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solver.engines.vllm_metrics import StartMark
from solver.files import atomic_write


def hit_rate(samples: Sequence[Any], starts: Sequence[StartMark] = ()) -> float | None:
    """Prefix-cache hits over queries (tokens) across polled samples (``timeline.MetricsSample``); counters that
    start again from zero (a rebuilt engine registers its metrics afresh) count on from there. ``starts``: the
    engine starts within them, on the samples' clock (``timeline.StartMark``): what the counters moved while an
    engine started (its warm-up's prompts, every lookup a miss) is no problem's; counting goes on from the counters
    at its end.

    >>> from solver.measure.request_timeline import MetricsSample
    >>> def S(t, prefix_queries, prefix_hits):  # a poll; its usage reading is not read here
    ...     return MetricsSample(t, None, prefix_queries, prefix_hits)
    >>> hit_rate([S(t=0, prefix_queries=100, prefix_hits=50), S(t=1, prefix_queries=300, prefix_hits=150),
    ...           S(t=2, prefix_queries=100, prefix_hits=100)])
    0.6666666666666666
    >>> hit_rate([S(t=0, prefix_queries=0, prefix_hits=0)]) is None
    True

    The first problem opens the engine: before it, no counters; its warm-up looks up 264,000 tokens and finds none,
    then the problem finds 990 of its 1,000 (the samples alone would say 0.4 %):

    >>> samples = [S(t=0, prefix_queries=0, prefix_hits=0), S(t=50, prefix_queries=200_000, prefix_hits=0),
    ...            S(t=100, prefix_queries=264_500, prefix_hits=450), S(t=101, prefix_queries=265_000, prefix_hits=990)]
    >>> round(hit_rate(samples), 4), hit_rate(samples, [StartMark(1, 99, 264_000, 0)])
    (0.0037, 0.99)
    """
    events = sorted([(s.t, False, s.prefix_queries, s.prefix_hits) for s in samples]
                    + [(m.end, True, m.prefix_queries, m.prefix_hits) for m in starts], key=lambda e: (e[0], not e[1]))
    hits = queries = 0.0
    for (_, _, qa, ha), (tb, mark, qb, hb) in zip(events, events[1:]):
        if mark or any(m.begin <= tb <= m.end for m in starts):
            continue  # up to a start's end: its counters, not a problem's
        dq, dh = qb - qa, hb - ha
        if dq < 0 or dh < 0:
            dq, dh = qb, hb
        queries, hits = queries + dq, hits + dh
    return hits / queries if queries > 0 else None


@dataclass
class ProblemRecord:
    """One finished problem of the slice (seconds are wall seconds of this machine unless named ``day``)."""

    id: str
    position: int  # 1-based, in the slice
    call: int  # the device call that played it
    seconds: float  # the solve: the predictor's call less any engine start or close inside it
    call_s: float  # the predictor's whole call
    engine_s: float  # engine starts and closes inside the call (the first call's start, a rebuild)
    allotted_s: float | None  # the deadline the budget gave, seconds from the call's start
    day_start_s: float  # on the day's clock
    day_end_s: float
    status: str  # the predictor's: solved, partial, default, cutoff
    stopped_by: str
    deadline_cut: bool
    answer: int
    correct: bool | None  # against the recording's reference answer
    decoded_tokens: int  # what the engine decoded
    counted_tokens: int  # the voting attempts' tokens, as the predictor counts them (scripted endings included)
    requests: int
    tool_calls: int
    finished: int  # attempts that ended (done, length, error, filtered)
    cancelled: int
    statuses: dict[str, int]
    prefix_hit_rate: float | None  # the engine's counters over the problem
    cached_share: float | None  # prompt tokens found in the prefix cache, per request
    preemptions: int | None
    kv_peak: float | None
    running_peak: int | None
    predicted_s: float | None  # what the time model said before it started
    timeline: list[dict[str, Any]] = field(default_factory=list)  # times from the solve's start
    series: list[list[float]] = field(default_factory=list)  # [t, running, waiting, kv] from the call's start
    # the wall clock (epoch seconds) at the timeline's zero: lines it up with an engine log written with
    # --log-engine (benchmarks/holds.py)
    epoch_t0: float | None = None

    @property
    def tps(self) -> float:
        return self.decoded_tokens / self.seconds if self.seconds > 0 else 0.0


COLUMNS = (f"{'problem':<28}{'call':>5}{'s':>8}{'allot':>7}{'tokens':>9}{'tok/s':>8}{'done':>5}{'canc':>5}"
           f"{'prefix':>7}{'preempt':>8}{'KV':>5}{'cut':>4}  {'stopped by':<11}{'answer':>7}")


def problem_line(r: ProblemRecord) -> str:
    """One row of the printed table."""
    hit = "-" if r.prefix_hit_rate is None else f"{100 * r.prefix_hit_rate:.0f}%"
    kv = "-" if r.kv_peak is None else f"{100 * r.kv_peak:.0f}%"
    allot = "-" if r.allotted_s is None or r.allotted_s > 9999 else f"{r.allotted_s:.0f}"
    mark = "" if r.correct is None else (" ok" if r.correct else " x")
    return (f"{r.id:<28}{r.call:>5}{r.seconds:>8.1f}{allot:>7}{r.decoded_tokens:>9}{r.tps:>8.0f}{r.finished:>5}"
            f"{r.cancelled:>5}{hit:>7}{'-' if r.preemptions is None else r.preemptions:>8}{kv:>5}"
            f"{'yes' if r.deadline_cut else '':>4}  {r.stopped_by:<11}{r.answer:>7}{mark}")


def table_row(state: dict[str, Any], label: str, json_path: Path) -> dict[str, Any]:
    """A run's row in a variants table."""
    records = state["problems"]
    seconds = sum(r["seconds"] for r in records)
    tokens = sum(r["decoded_tokens"] for r in records)
    first = state["calls"][0] if state["calls"] else {}
    return {"label": label, "json": str(json_path), "identity": state["identity"],
            "engine_args": state.get("engine_args"), "engine_env": state.get("engine_env"),
            "device": first.get("device"), "complete": len(records) == len(state["identity"]["problems"]),
            "seconds": seconds, "decoded_tokens": tokens, "tokens_per_s": tokens / seconds if seconds else 0.0,
            "problems": [{k: r[k] for k in ("id", "seconds", "decoded_tokens", "prefix_hit_rate", "cached_share",
                                             "preemptions", "kv_peak", "finished", "cancelled", "stopped_by",
                                             "answer", "deadline_cut")} for r in records]}


def upsert_row(table: Path, row: dict[str, Any]) -> list[dict[str, Any]]:
    """Put ``row`` into the table JSON (replacing the row of the same label); every row."""
    data = json.loads(table.read_text()) if table.exists() else {"rows": []}
    rows = [r for r in data.get("rows", []) if r.get("label") != row["label"]] + [row]
    atomic_write(table, json.dumps({"rows": rows}, indent=1))
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'variant':<24}{'problems':>9}{'s':>9}{'tokens':>10}{'tok/s':>8}{'prefix':>8}{'preempt':>8}{'KV peak':>8}")
    for row in rows:
        probs = row["problems"]
        hits = [p["prefix_hit_rate"] for p in probs if p["prefix_hit_rate"] is not None]
        kv = max((p["kv_peak"] for p in probs if p["kv_peak"] is not None), default=None)
        print(f"{row['label']:<24}{len(probs):>5}/{len(row['identity']['problems']):<3}{row['seconds']:>9.1f}"
              f"{row['decoded_tokens']:>10}{row['tokens_per_s']:>8.0f}"
              f"{'-' if not hits else f'{100 * min(hits):.0f}%':>8}"
              f"{sum(p['preemptions'] or 0 for p in probs):>8}{'-' if kv is None else f'{100 * kv:.0f}%':>8}")
