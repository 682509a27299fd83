"""Builds recorded runs for report, sweep and notebook tests through the run-log API, in the shape the solve loop
writes: tool-integrated repetitions (a python block, its output, a boxed answer) with mixed right and wrong
answers, a truncated repetition without a boxed answer, and an engine error.

``python tests/data/eval_runs.py`` rewrites ``tests/data/eval_sweep/`` (a sweep directory with two generation
runs, W = 1 and W = 2, and its analysis without the plots). Deterministic for a seed (except meta.json's versions and times).
"""

from __future__ import annotations

import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from solver.config import Config, load_config
from solver.runlog import RunLog
from solver.types import Answer, Execution, Problem, ProblemResult, Repetition, Turn
from solver.core.voting import decide, make_voter

HERE = Path(__file__).parent
SWEEP_DIR = HERE / "eval_sweep"


@dataclass(frozen=True)
class Planned:
    """A problem and the answers its repetitions give, in index order (None: an engine error)."""

    problem: Problem
    answers: tuple[str | None, ...]
    truncated: frozenset[int] = frozenset()  # indices cut by the token limit: code answer only, no box


def planned_problems(reps: int, seed: int = 0) -> list[Planned]:
    """Six demo-like problems from always right to never right, tagged by topic."""
    rng = random.Random(seed)
    table = (("demo-01", "What is 17 + 25?", "42", "arithmetic", 1.0),
             ("demo-02", "What is 12 times 13?", "156", "arithmetic", 0.75),
             ("demo-03", "What is the remainder when 2^10 is divided by 7?", "2", "number theory", 0.5),
             ("demo-04", "How many positive divisors does 36 have?", "9", "number theory", 0.3),
             ("demo-05", "What is the sum of the integers from 1 to 100?", "5050", "arithmetic", 0.6),
             ("demo-06", "What is 7 factorial?", "5040", "counting", 0.0))
    planned = []
    for pid, text, ref, topic, p_right in table:
        answers: list[str | None] = []
        for _ in range(reps):
            if rng.random() < p_right:
                answers.append(ref)
            else:  # wrong answers cluster on a few near misses, as real samples do
                answers.append(str(int(ref) + rng.choice((1, 1, -1, 10))))
        if pid == "demo-04":
            answers[-1] = None  # one engine failure
        truncated = frozenset({1}) if pid == "demo-05" and reps > 1 else frozenset()
        planned.append(Planned(Problem(pid, text, ref, {"subset": "demo", "topic": topic}), tuple(answers),
                               truncated))
    return planned


def repetition(pid: str, index: int, value: str | None, *, truncated: bool, seconds_per_token: float,
               rng: random.Random) -> Repetition:
    """One recorded repetition whose code prints ``value`` and whose text boxes it."""
    if value is None:
        return Repetition(pid, index, 1000 + index, "error", (), (), 1_763_800_000.0 + index, 0.05,
                          "engine failed: request aborted")
    code = f"answer = {value}\nprint(answer)\n"
    tokens0 = rng.randint(40, 90)
    run_s = round(rng.uniform(0.02, 0.06), 4)
    first = Turn(f"We compute it with a short program.\n```python\n{code}", 95, tokens0, "stop",
                 round(tokens0 * seconds_per_token, 4), Execution(code, "ok", f"{value}\n", "", run_s),
                 f"```\n```output\n{value}\n```\n")
    if truncated:
        second = Turn("Let me double-check this by another method, which takes a while " * 3, 95 + tokens0 + 12,
                      48, "length", round(48 * seconds_per_token, 4))
        answers: tuple[Answer, ...] = (Answer(value, value, "code"),)
        status = "length"
    else:
        tokens1 = rng.randint(10, 25)
        second = Turn(f"The program printed {value}, so the answer is $\\boxed{{{value}}}$.", 95 + tokens0 + 12,
                      tokens1, "stop", round(tokens1 * seconds_per_token, 4))
        answers = (Answer(value, value, "code"), Answer(value, f"\\boxed{{{value}}}", "boxed"))
        status = "done"
    duration = round(first.duration_s + run_s + second.duration_s, 4)
    return Repetition(pid, index, 1000 + index, status, (first, second), answers, 1_763_800_000.0 + index, duration)


def build_run(run_dir: Path, config: Config, planned: list[Planned], *, seconds_per_token: float = 0.05,
              seed: int = 0, finish: bool = True) -> None:
    """Write a run directory: problems, repetitions (index order) and, when ``finish``, result lines whose
    durations are the list schedule of the repetitions on ``config.solve.workers`` slots."""
    rng = random.Random(seed)
    voter = make_voter(config.vote, config.answers)
    with RunLog.create(run_dir, config) as log:
        for plan in planned:
            log.append_problem(plan.problem)
        for plan in planned:
            reps = [repetition(plan.problem.id, i, value, truncated=i in plan.truncated,
                               seconds_per_token=seconds_per_token, rng=rng)
                    for i, value in enumerate(plan.answers)]
            for rep in reps:
                log.append(rep)
            if not finish:
                continue
            slots = [0.0] * config.solve.workers
            for rep in reps:
                slots.sort()
                slots[0] += rep.duration_s
            ballots = [voter.ballot(r) if r.votes else None for r in reps]
            answer = decide(voter, ballots, config.answers.default)
            counts: dict[str, float] = {}
            for b in ballots:
                if b is not None:
                    counts[b.answer] = counts.get(b.answer, 0.0) + b.weight
            log.append_result(ProblemResult(plan.problem.id, answer, counts, len(reps), len(reps), "max_reps",
                                            round(max(slots), 4), sum(r.generated_tokens for r in reps),
                                            answer == plan.problem.answer))


def sweep_config(workers: int, reps: int) -> Config:
    """The config ``solver.offline.sweep.plan_runs`` gives the tiny preset for one worker count."""
    return load_config("tiny").replace({"solve.reps": reps, "solve.workers": workers, "stop.stoppers": [],
                                        "stop.confidence_warmup": 0, "budget.total_s": None,
                                        "budget.cutoff_s": None})


def build_sweep_runs(out: Path, workers: tuple[int, ...] = (1, 2), reps: int = 8, seed: int = 0) -> None:
    """Generation runs as a sweep over the tiny preset would leave them in ``out/runs``; more workers make each
    repetition slower (batching) but the set faster."""
    planned = planned_problems(reps, seed)
    for w in workers:
        config = sweep_config(w, reps)
        build_run(out / "runs" / f"T{config.sampling.temperature:g}-{config.prompt.template}-w{w}", config,
                  planned, seconds_per_token=0.04 * (1 + 0.25 * (w - 1)), seed=seed)


def main() -> int:
    from solver.offline.sweep import PLOTS, run_sweep, spec_from_dict

    shutil.rmtree(SWEEP_DIR, ignore_errors=True)
    build_sweep_runs(SWEEP_DIR)
    spec = spec_from_dict({"data": "demo", "limit": 6, "reps": [1, 2, 4, 8], "workers": [1, 2],
                           "stopper": ["none", "agree:3"], "draws": 50})
    from solver.datasets import load_problems

    run_sweep(spec, load_config("tiny"), load_problems("demo", limit=6), SWEEP_DIR, solve=None)
    for plot in PLOTS:  # the notebooks draw them again; the repository keeps only the data
        (SWEEP_DIR / plot).unlink()
    print(f"wrote {SWEEP_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
