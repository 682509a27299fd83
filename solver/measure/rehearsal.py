"""Rehearsing a submission locally through the same ``predict`` the notebook serves.

Two gateways:

- the competition's own (``kaggle_evaluation``, :func:`run_gateway`): its gRPC relay, argument serialisation,
  shuffling, response checks and ``submission.parquet``, exactly as on Kaggle;
- where that package is not at hand, :func:`rehearse` calls ``predict`` as that gateway does: the rows of a
  test.csv in the competition's layout, shuffled, one call per row with the row's columns as polars Series
  (``predict(*row)``), no deadline on the first call and the competition's per-call limit on the others.

Both check each answer frame more strictly than Kaggle does (the id must echo the row id; the answer must be an
integer in the competition's range; Kaggle silently overwrites ids and would score such answers wrong) and
record a failure as a fault. A call past the per-call limit, which Kaggle fails the submission for, is a fault
that ends the rehearsal; other faults are recorded and the rehearsal goes on.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import polars as pl

from solver.errors import describe
from solver.files import atomic_write
from solver.kaggle import Competition
from solver.kaggle import check_prediction


@dataclass(frozen=True)
class GatewayCall:
    order: int  # 0-based position in the served order
    id: str
    answer: int | None  # None when the frame failed the check
    reference: str | None
    correct: bool | None  # None without a reference or an answer
    seconds: float
    limit_s: float | None  # the per-call limit that applied (the first call has none)
    fault: str | None  # what the gateway failed the submission with, or the stricter check refused


@dataclass(frozen=True)
class Rehearsal:
    gateway: Literal["rehearsal", "kaggle_evaluation"]
    competition: str
    calls: tuple[GatewayCall, ...]
    seconds: float
    total_limit_s: float
    failure: str | None = None  # the gateway stopped the run (kaggle_evaluation's error, or a deadline)

    @property
    def faults(self) -> list[str]:
        out = [f"{c.id}: {c.fault}" for c in self.calls if c.fault]
        if self.failure:
            out.append(f"gateway: {self.failure}")
        if self.seconds > self.total_limit_s:
            out.append(f"the run took {self.seconds:.0f} s, over the {self.total_limit_s:.0f} s limit")
        return out

    @property
    def score(self) -> tuple[int, int]:
        graded = [c for c in self.calls if c.correct is not None]
        return sum(bool(c.correct) for c in graded), len(graded)


def gateway_table(problems: Sequence[Any], comp: Competition) -> pl.DataFrame:
    """The problems as the competition's test.csv: ``id`` and its problem column, ids as text.

    >>> from solver.kaggle.competition import competition
    >>> from solver.types import Problem
    >>> gateway_table([Problem(id="7", text="1+1?")], competition("aimo2")).to_dicts()
    [{'id': '7', 'question': '1+1?'}]
    """
    return pl.DataFrame({"id": [str(p.id) for p in problems], comp.problem_column: [p.text for p in problems]},
                        schema={"id": pl.String, comp.problem_column: pl.String})


def _call_with_limit(predict: Callable[..., Any], args: tuple[Any, ...],
                     limit_s: float | None) -> tuple[bool, Any, BaseException | None]:
    """(finished, result, exception): ``predict(*args)`` on a worker thread, waited for at most ``limit_s``
    seconds. A call past the limit keeps running on its daemon thread, as a call the gRPC deadline gave up on
    keeps running in the server."""
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["result"] = predict(*args)
        except BaseException as exc:  # handed to the caller, which records it as a fault
            box["error"] = exc

    worker = threading.Thread(target=call, name="rehearsal-call", daemon=True)
    worker.start()
    worker.join(limit_s)
    if worker.is_alive():
        return False, None, None
    return True, box.get("result"), box.get("error")


def _grade(answer: int | None, reference: str | None, comp: Competition) -> bool | None:
    from solver.core.answers import is_correct

    if reference is None or answer is None:
        return None
    return is_correct(str(answer), reference, comp.answers)


def rehearse(predict: Callable[..., Any], data: str | Path, out_dir: Path, *, comp: Competition, seed: int = 0,
             limit: int | None = None, total_limit_s: float | None = None) -> Rehearsal:
    """Serve every problem of ``data`` to ``predict`` as the competition's gateway calls it, then write OUT."""
    from solver.datasets import load_problems

    problems = load_problems(data, limit=limit)
    references = {str(p.id): p.answer for p in problems}
    table = gateway_table(problems, comp).sample(fraction=1.0, shuffle=True, with_replacement=False, seed=seed)
    calls: list[GatewayCall] = []
    answers: list[tuple[str, int]] = []
    failure = None
    started = time.monotonic()
    for order, row in enumerate(table.iter_slices(n_rows=1)):
        row_id = row["id"].item(0)
        limit_s = None if order == 0 else comp.call_limit_s  # the gateway's deadline applies after call 1
        t0 = time.monotonic()
        done, frame, error = _call_with_limit(predict, tuple(row), limit_s)  # predict(*row): one Series a column
        seconds = time.monotonic() - t0
        answer, fault = None, None
        if not done:
            fault = failure = f"no answer within the {limit_s:g} s per-call limit"
        elif error is not None:
            fault = f"predict raised {describe(error)}"
        else:
            answer, fault = check_prediction(frame, row_id, comp.low, comp.high)
        calls.append(GatewayCall(order, row_id, answer, references.get(row_id),
                                 _grade(answer, references.get(row_id), comp), seconds, limit_s, fault))
        if answer is not None:
            answers.append((row_id, answer))
        if failure:
            break
    rehearsal = Rehearsal("rehearsal", comp.name, tuple(calls), time.monotonic() - started,
                          comp.total_s if total_limit_s is None else total_limit_s, failure)
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_parquet(out_dir / "submission.parquet", answers)
    write_reports(out_dir, rehearsal)
    return rehearsal


def run_gateway(predictor: Any, server_class: type, data: str | Path, out_dir: Path, *, comp: Competition,
                limit: int | None = None, total_limit_s: float | None = None) -> Rehearsal:
    """The competition's own local gateway over ``data``'s problems (written to OUT/test.csv in the
    competition's layout); it writes OUT/submission.parquet. ``predictor`` is a
    :class:`~solver.kaggle.predictor.KagglePredictor` (its call records give the per-call table)."""
    from solver.datasets import load_problems
    from solver.kaggle import endpoint

    problems = load_problems(data, limit=limit)
    references = {str(p.id): p.answer for p in problems}
    out_dir.mkdir(parents=True, exist_ok=True)
    test_csv = (out_dir / "test.csv").resolve()
    gateway_table(problems, comp).write_csv(test_csv)
    failure = None
    started, here = time.monotonic(), Path.cwd()
    os.chdir(out_dir)  # the gateway writes submission.parquet into the working directory
    try:
        server_class(endpoint(predictor)).run_local_gateway((str(test_csv),))
    except Exception as exc:  # the gateway's verdict on the submission (GatewayRuntimeError and its kind)
        detail = getattr(exc, "error_details", None) or str(exc)
        kind = getattr(getattr(exc, "error_type", None), "name", type(exc).__name__)
        failure = f"{kind}: {str(detail).strip().splitlines()[-1] if str(detail).strip() else ''}"
    finally:
        os.chdir(here)
    calls = []
    for order, c in enumerate(predictor.calls):
        limit_s = None if order == 0 else comp.call_limit_s
        answer, fault = c.answer, None
        if not comp.low <= c.answer <= comp.high:
            answer, fault = None, f"answer {c.answer} is outside {comp.low}..{comp.high}"
        calls.append(GatewayCall(order, c.id, answer, references.get(c.id),
                                 _grade(answer, references.get(c.id), comp), c.seconds, limit_s, fault))
    rehearsal = Rehearsal("kaggle_evaluation", comp.name, tuple(calls), time.monotonic() - started,
                          comp.total_s if total_limit_s is None else total_limit_s, failure)
    write_reports(out_dir, rehearsal)
    return rehearsal


def _write_parquet(path: Path, answers: Sequence[tuple[str, int]]) -> None:
    frame = pl.DataFrame({"id": pl.Series([a[0] for a in answers], dtype=pl.String),
                          "answer": pl.Series([a[1] for a in answers], dtype=pl.Int64)})
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    atomic_write(path, buffer.getvalue())


def write_reports(out_dir: Path, rehearsal: Rehearsal) -> None:
    """submission.csv (from submission.parquet, when the gateway wrote one) and report.md, each atomically."""
    parquet = out_dir / "submission.parquet"
    if parquet.is_file():
        atomic_write(out_dir / "submission.csv", pl.read_parquet(parquet).write_csv())
    atomic_write(out_dir / "report.md", report_markdown(rehearsal))


def report_markdown(r: Rehearsal) -> str:
    right, graded = r.score
    gateway = "kaggle_evaluation gateway" if r.gateway == "kaggle_evaluation" else "rehearsal gateway"
    lines = [f"# Kaggle rehearsal ({r.competition}, {gateway})", "",
             f"- problems: {len(r.calls)}; wall time {r.seconds:.1f} s of {r.total_limit_s:.0f} s",
             f"- slowest call: {max((c.seconds for c in r.calls), default=0.0):.1f} s",
             f"- score: {right}/{graded}" if graded else "- score: no reference answers",
             f"- faults: {len(r.faults)}", "",
             "| order | id | answer | reference | correct | seconds | limit | fault |",
             "|---|---|---|---|---|---|---|---|"]
    for c in r.calls:
        mark = "" if c.correct is None else ("yes" if c.correct else "no")
        lines.append(f"| {c.order} | {c.id} | {'' if c.answer is None else c.answer} | "
                     f"{c.reference or ''} | {mark} | {c.seconds:.1f} | "
                     f"{'' if c.limit_s is None else f'{c.limit_s:.0f}'} | {c.fault or ''} |")
    if r.faults:
        lines += ["", "## Faults", ""] + [f"- {f}" for f in r.faults]
    return "\n".join(lines) + "\n"
