"""``solver kaggle-local DATA.csv``: rehearse a Kaggle submission locally, through the same ``predict``.

With ``kaggle_evaluation`` importable (on Kaggle, or with the competition's files on ``sys.path``) its own local
gateway runs. Otherwise a small local gateway does what the AIMO gateways do — one problem per call, shuffled
order, the row passed in the competition's calling style, the answer frame checked — with these differences:
a call over the per-call limit, a frame that fails the check, or a ``predict`` that raises is recorded and the
rehearsal goes on (the real gateway fails the whole submission at once), and the limit is measured after the
call, not enforced by a gRPC deadline. The exit code is 1 when any such fault was recorded.

OUT holds ``submission.parquet`` and ``submission.csv`` (what Kaggle would score), ``report.md`` (per call:
order, id, answer, reference, seconds, faults) and ``run/`` (the solver's log, replayable).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from solver.commands.common import EXIT_FAILED, add_config_arguments, config_from_args, fail

# Light imports only at module level: the CLI imports every command to build its parser.


@dataclass(frozen=True)
class GatewayCall:
    order: int  # 0-based position in the served order
    id: str
    answer: int | None  # None when the frame failed the check
    reference: str | None
    correct: bool | None  # None without a reference or an answer
    seconds: float
    limit_s: float | None  # the per-call limit that applied (the first call has none)
    fault: str | None  # what the real gateway would have failed the submission with


@dataclass(frozen=True)
class Rehearsal:
    gateway: Literal["local", "kaggle_evaluation"]
    competition: str
    calls: tuple[GatewayCall, ...]
    seconds: float
    total_limit_s: float

    @property
    def faults(self) -> list[str]:
        out = [f"{c.id}: {c.fault}" for c in self.calls if c.fault]
        if self.seconds > self.total_limit_s:
            out.append(f"the run took {self.seconds:.0f} s, over the {self.total_limit_s:.0f} s limit")
        return out

    @property
    def score(self) -> tuple[int, int]:
        graded = [c for c in self.calls if c.correct is not None]
        return sum(bool(c.correct) for c in graded), len(graded)


def check_prediction(frame: Any, row_id: str, low: int, high: int) -> tuple[int | None, str | None]:
    """The answer in a ``predict`` result, or why the gateway would refuse it.

    >>> import polars as pl
    >>> check_prediction(pl.DataFrame({"id": ["a"], "answer": [7]}), "a", 0, 999)
    (7, None)
    >>> check_prediction(pl.DataFrame({"id": ["b"], "answer": [7]}), "a", 0, 999)
    (None, "id 'b' does not match the row id 'a'")
    >>> check_prediction(pl.DataFrame({"id": ["a"], "answer": [1000]}), "a", 0, 999)
    (None, 'answer 1000 is outside 0..999')
    >>> check_prediction(pl.DataFrame({"id": ["a"], "answer": [1.5]}), "a", 0, 999)
    (None, 'answer 1.5 is not an integer')
    """
    import polars as pl

    if isinstance(frame, pl.DataFrame):
        rows, columns = frame.height, list(frame.columns)
    elif hasattr(frame, "iloc") and hasattr(frame, "columns"):  # pandas, read without converting
        rows, columns = len(frame), [str(c) for c in frame.columns]
    else:
        return None, f"predict returned {type(frame).__name__}, not a DataFrame"
    if rows != 1:
        return None, f"expected 1 row, got {rows}"
    if "id" not in columns or "answer" not in columns:
        return None, f"columns {columns}, expected id and answer"
    if isinstance(frame, pl.DataFrame):
        got_id, answer = frame["id"].item(0), frame["answer"].item(0)
    else:
        got_id, answer = frame["id"].iloc[0], frame["answer"].iloc[0]
        answer = answer.item() if hasattr(answer, "item") else answer  # numpy scalar -> Python
    if str(got_id) != str(row_id):
        return None, f"id {got_id!r} does not match the row id {row_id!r}"
    if isinstance(answer, bool) or not isinstance(answer, int):
        return None, f"answer {answer!r} is not an integer"
    if not low <= answer <= high:
        return None, f"answer {answer} is outside {low}..{high}"
    return answer, None


def rehearse(predict: Callable[..., Any], data: str | Path, out_dir: Path, *, comp: Any, seed: int = 0,
             limit: int | None = None, total_limit_s: float | None = None) -> Rehearsal:
    """Serve every problem of ``data`` to ``predict`` like the competition's gateway, then write OUT."""
    import polars as pl

    from solver.core.answers import is_correct
    from solver.datasets import load_problems

    problems = load_problems(data, limit=limit)
    references = {p.id: p.answer for p in problems}
    table = pl.DataFrame({"id": [p.id for p in problems], "problem": [p.text for p in problems]})
    table = table.sample(fraction=1.0, shuffle=True, with_replacement=False, seed=seed)
    calls: list[GatewayCall] = []
    answers: list[tuple[str, int]] = []
    started = time.monotonic()
    for order, row in enumerate(table.iter_slices(n_rows=1)):
        row_id = row["id"].item(0)
        if comp.row_style == "columns":
            args: tuple[Any, ...] = tuple(row.get_columns())  # AIMO2: predict(id_, problem)
        else:
            args = (row, row.select("id").with_columns(pl.lit(0).alias("answer")))  # AIMO3
        limit_s = None if order == 0 else comp.call_limit_s
        t0 = time.monotonic()
        try:
            frame = predict(*args)
            answer, fault = check_prediction(frame, row_id, comp.low, comp.high)
        except Exception as exc:  # the real gateway would fail the submission; the rehearsal records it
            answer, fault = None, f"predict raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        seconds = time.monotonic() - t0
        if fault is None and limit_s is not None and seconds > limit_s:
            fault = f"took {seconds:.0f} s, over the {limit_s:.0f} s per-call limit"
        reference = references.get(row_id)
        correct = None
        if reference is not None and answer is not None:
            correct = is_correct(str(answer), reference, comp.answers)
        calls.append(GatewayCall(order, row_id, answer, reference, correct, seconds, limit_s, fault))
        if answer is not None:
            answers.append((row_id, answer))
    rehearsal = Rehearsal("local", comp.name, tuple(calls), time.monotonic() - started,
                          comp.total_s if total_limit_s is None else total_limit_s)
    write_outputs(out_dir, answers, rehearsal)
    return rehearsal


def write_outputs(out_dir: Path, answers: Sequence[tuple[str, int]], rehearsal: Rehearsal) -> None:
    """submission.parquet and submission.csv (served order, as the gateway concatenates them) and report.md."""
    import polars as pl

    from solver.loop.run import write_atomic

    out_dir.mkdir(parents=True, exist_ok=True)
    frame = pl.DataFrame({"id": [a[0] for a in answers], "answer": pl.Series([a[1] for a in answers],
                                                                             dtype=pl.Int64)})
    tmp = out_dir / ".submission.parquet.tmp"
    frame.write_parquet(tmp)
    os.replace(tmp, out_dir / "submission.parquet")
    write_atomic(out_dir / "submission.csv", frame.write_csv())
    write_atomic(out_dir / "report.md", report_markdown(rehearsal))


def report_markdown(r: Rehearsal) -> str:
    right, graded = r.score
    lines = [f"# Kaggle rehearsal ({r.competition}, {r.gateway} gateway)", "",
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


def rehearse_official(predictor: Any, data: str | Path, out_dir: Path, *, comp: Any,
                      limit: int | None = None) -> Rehearsal | None:
    """Run ``kaggle_evaluation``'s own local gateway when it is importable; None when it is not."""
    import importlib

    import polars as pl

    from solver.datasets import load_problems

    module_name, class_name = comp.server.split(":")
    if comp.input_dir not in sys.path and Path(comp.input_dir).is_dir():
        sys.path.append(comp.input_dir)
    try:
        server_class = getattr(importlib.import_module(module_name), class_name)
    except ImportError:
        return None
    problems = load_problems(data, limit=limit)
    out_dir.mkdir(parents=True, exist_ok=True)
    test_csv = (out_dir / "test.csv").resolve()
    pl.DataFrame({"id": [p.id for p in problems], "problem": [p.text for p in problems]}).write_csv(test_csv)
    started, here = time.monotonic(), Path.cwd()
    os.chdir(out_dir)  # the official gateway writes submission.parquet into the working directory
    try:
        server_class(predictor).run_local_gateway((str(test_csv),))
    finally:
        os.chdir(here)
    references = {p.id: p.answer for p in problems}
    from solver.core.answers import is_correct

    calls = tuple(
        GatewayCall(i, c.id, c.answer, references.get(c.id),
                    None if references.get(c.id) is None else is_correct(str(c.answer), references[c.id],
                                                                       comp.answers),
                    c.seconds, None if i == 0 else comp.call_limit_s, None)
        for i, c in enumerate(predictor.calls))
    rehearsal = Rehearsal("kaggle_evaluation", comp.name, calls, time.monotonic() - started, comp.total_s)
    from solver.loop.run import write_atomic

    write_atomic(out_dir / "report.md", report_markdown(rehearsal))
    return rehearsal


# ---- the command -----------------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "kaggle-local", help="rehearse a Kaggle submission: the predict adapter behind a local gateway",
        description="Serve DATA one problem at a time, shuffled, to the same predict the notebook uses; write "
                    "submission.parquet, submission.csv and report.md to OUT.")
    parser.add_argument("data", metavar="DATA.csv", help="problems: CSV (id, problem[, answer]) or JSONL")
    parser.add_argument("--competition", choices=("aimo2", "aimo3"), default="aimo3",
                        help="answer range, modulus and time limits (default aimo3)")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default runs/kaggle-local-TIME)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="total time for the set (default: the competition's 5 h)")
    add_config_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from solver.config import ConfigError
    from solver.datasets import DatasetError, load_problems
    from solver.kaggle.predictor import KagglePredictor, competition
    from solver.tiny_model import ModelError, resolve_model

    out = args.out or Path("runs") / time.strftime("kaggle-local-%Y%m%d-%H%M%S")
    try:
        if args.time_limit is not None and args.time_limit <= 0:
            raise ConfigError("--time-limit must be > 0")
        comp = competition(args.competition)
        config = config_from_args(args)
        problems = load_problems(args.data, limit=args.limit)
        if out.exists() and any(out.iterdir()):
            raise ConfigError(f"{out} is not empty; choose another --out")
        if config.engine.name == "vllm":
            resolve_model(config.engine.model)  # a missing model fails here, before OUT exists
        config = config.replace({"budget.problems": len(problems)})
    except (ConfigError, DatasetError, ModelError) as exc:
        return fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    predictor = KagglePredictor(config, comp, run_dir=out / "run", total_s=args.time_limit)
    try:
        rehearsal = rehearse_official(predictor, args.data, out, comp=comp, limit=args.limit)
        if rehearsal is None:
            rehearsal = rehearse(predictor, args.data, out, comp=comp, seed=config.sampling.seed,
                                 limit=args.limit, total_limit_s=predictor.config.budget.total_s)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    finally:
        predictor.close()
    print(report_markdown(rehearsal), end="")
    print(f"output: {out}")
    return EXIT_FAILED if rehearsal.faults else 0
