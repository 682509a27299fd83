"""A whole run over a problem set: run directory, log, time budget, answers file and a short report.

RUN_DIR holds ``config.yaml`` (the resolved config), ``meta.json`` (versions), ``log.jsonl`` (problems,
repetitions as they finish, results), ``answers.csv`` (id, answer) and ``report.md``. The last two are written
atomically (temp file + rename) so a crash never leaves them half-written.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from solver.core.budget import BudgetManager
from solver.clock import SystemClock
from solver.config import Config, ConfigError
from solver.report import load_summary, render_report
from solver.runlog import RunLog
from solver.loop.problem import ProblemSolver, Session, SolveEvent
from solver.types import Clock, Engine, Problem, ProblemResult, Sandbox


def check_runnable(config: Config) -> None:
    """Every part the config names exists (voter, stoppers, prompt template, dialect, engine, model path).

    Raises ConfigError or ModelError with a one-line message, before anything is written or started.
    """
    from solver.dialects import check_dialect
    from solver.engines import factory_path
    from solver.dialects.prompts import Template
    from solver.core.stopping import make_stopper
    from solver.tiny_model import resolve_model
    from solver.core.voting import make_voter

    make_voter(config.vote, config.answers)
    make_stopper(config.stop, config.solve.reps)
    Template.load(config.prompt.template)
    check_dialect(config)  # harmony's vocabulary offline; a chat template that declares hermes's tool
    factory_path(config.engine.name)
    if config.engine.name == "vllm":
        resolve_model(config.engine.model)  # a missing model path fails here
        if config.sampling.extra:
            from solver.engines.vllm_async import check_sampling_extra

            check_sampling_extra(config.sampling.extra)
    if config.engine.name == "openai" and not config.engine.endpoints:
        raise ConfigError("the openai engine needs at least one --endpoint URL")
    if config.solve.parallel_problems > 1 and (config.budget.total_s or config.budget.cutoff_s):
        raise ConfigError("a time budget needs solve.parallel_problems = 1 (problems arrive one at a time)")
    if config.engine.name == "replay" and not config.engine.replay_from:
        raise ConfigError("the replay engine needs --from RUN_DIR")


def write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def answers_csv(results: Sequence[ProblemResult]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "answer"])
    for result in results:
        writer.writerow([result.problem_id, result.answer])
    return buffer.getvalue()


def summary_markdown(problems: Sequence[Problem], results: Sequence[ProblemResult]) -> str:
    """A short per-problem table and the accuracy when reference answers are known."""
    from solver.report import markdown_table

    by_id = {p.id: p for p in problems}
    rows = []
    for r in results:
        ref = by_id[r.problem_id].answer if r.problem_id in by_id else None
        top = ", ".join(f"{a}:{w:g}" for a, w in sorted(r.votes.items(), key=lambda kv: -kv[1])[:3])
        mark = "" if r.correct is None else ("yes" if r.correct else "no")
        rows.append([r.problem_id, r.answer, ref if ref is not None else "", mark, f"{r.repetitions}/{r.launched}",
                     r.stopped_by, f"{r.duration_s:.1f}", top])
    lines = markdown_table(["id", "answer", "reference", "correct", "reps", "stopped by", "seconds", "top votes"],
                           rows).splitlines()
    graded = [r for r in results if r.correct is not None]
    if graded:
        right = sum(bool(r.correct) for r in graded)
        lines += ["", f"Accuracy: {right}/{len(graded)} ({100 * right / len(graded):.1f} %)"]
    return "\n".join(lines) + "\n"


async def solve_run(config: Config, problems: Sequence[Problem], run_dir: Path, *, resume: bool = False,
                    clock: Clock | None = None, on_event: Callable[[SolveEvent], None] | None = None,
                    engine: Engine | None = None, sandbox: Sandbox | None = None) -> list[ProblemResult]:
    """Solve every problem, logging each repetition as it finishes; ``resume`` keeps what the log has.

    ``engine`` and ``sandbox``, when given, are used as they are and left open (a sweep reuses one engine
    across runs); otherwise the run builds its own from the config and closes them at the end (a replay with
    ``engine.replay_outputs``: the replay engine and a sandbox that gives back the recorded outputs).
    """
    clock = clock or SystemClock()
    if resume:
        log, _ = RunLog.resume(run_dir)
    else:
        log = RunLog.create(run_dir, config)
    try:
        known = log.problems()
        for problem in problems:
            if problem.id not in known:
                log.append_problem(problem)
        results: dict[str, ProblemResult] = dict(log.results())
        budget = None
        if config.budget.total_s or config.budget.cutoff_s:
            # A resumed run keeps the time its earlier sessions spent and the problems they finished.
            done = sum(p.id in results for p in problems)
            budget = BudgetManager(config.budget, clock, spent_s=log.spent_s, done=done)
        todo = [p for p in problems if p.id not in results]
        async with contextlib.AsyncExitStack() as stack:
            if engine is None and sandbox is None and config.engine.name == "replay" and config.engine.replay_outputs:
                from solver.engines.replay import recorded_parts

                engine, sandbox = await stack.enter_async_context(recorded_parts(config))
            if engine is not None and sandbox is not None:
                solver = ProblemSolver(config, engine, sandbox, clock=clock, on_repetition=log.append,
                                       on_event=on_event)
            else:
                session = Session(config, clock=clock, on_repetition=log.append, on_event=on_event)
                solver = (await stack.enter_async_context(session)).solver
            if config.solve.parallel_problems == 1:
                for problem in todo:  # one at a time, as the Kaggle gateway serves them
                    deadline = budget.next_deadline() if budget is not None else None
                    result = await solver.solve(problem, deadline=deadline,
                                                done=log.completed().get(problem.id, []))
                    if budget is not None:
                        budget.finish_problem()
                    await asyncio.to_thread(log.append_result, result)  # its fsync off the event loop
                    results[problem.id] = result
            else:
                # Validation runs: several problems share the engine, so one problem's tail (its last slow
                # repetitions) does not leave the batch half empty.
                gate = asyncio.Semaphore(config.solve.parallel_problems)

                async def one(problem: Problem) -> None:
                    async with gate:
                        result = await solver.solve(problem, done=log.completed().get(problem.id, []))
                        # Other problems are streaming: the result's fsync runs off the event loop.
                        await asyncio.to_thread(log.append_result, result)
                        results[problem.id] = result

                await asyncio.gather(*(one(p) for p in todo))
        ordered = [results[p.id] for p in problems if p.id in results]
        write_atomic(run_dir / "answers.csv", answers_csv(ordered))
        # The full report (by problem and subset, wrong answers' distributions), read back from the log.
        write_atomic(run_dir / "report.md", render_report(load_summary(run_dir)))
        return ordered
    finally:
        log.close()
