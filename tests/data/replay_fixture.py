"""Builds a small recorded run in the shape the solve loop writes: tool-integrated repetitions (a python
block, its output, a boxed answer), mixed right and wrong answers, one cancelled and one truncated repetition.

``PYTHONPATH=. python tests/data/replay_fixture.py`` rewrites ``tests/data/replay_run/``; tests call ``build_run`` to make
larger variants in a temporary directory. Deterministic for a seed (except meta.json's versions and time).
"""

from __future__ import annotations

import random
import shutil
import sys
from collections import Counter
from pathlib import Path

from solver.config import Config
from solver.runlog import RunLog
from solver.types import Answer, Execution, Problem, ProblemResult, Repetition, Turn

HERE = Path(__file__).parent
FIXTURE_RUN = HERE / "replay_run"

# (id, text, reference, probability that a repetition is right)
PROBLEMS: tuple[tuple[str, str, str, float], ...] = (
    ("demo-01", "What is 17 + 25?", "42", 1.0),
    ("demo-02", "What is 12 times 13?", "156", 0.8),
    ("demo-03", "What is the remainder when 2^10 is divided by 7?", "2", 0.55),
    ("demo-04", "How many positive divisors does 36 have?", "9", 0.35),
    ("demo-05", "What is the sum of the integers from 1 to 100?", "5050", 0.7),
    ("demo-06", "What is 7 factorial?", "5040", 0.0),
)
CODE_STOP = "```\n"


def _wrong(reference: str, rng: random.Random) -> str:
    # Wrong answers cluster on a few near misses, as real samples do.
    return str(int(reference) + rng.choice((1, 1, -1, 2, 10)))


def make_repetition(pid: str, index: int, value: str, rng: random.Random, *, status: str = "done",
                    started_at: float = 1_763_800_000.0, tokens_per_s: float = 60.0) -> Repetition:
    """One recorded repetition whose code prints ``value`` and whose text boxes it."""
    code = f"answer = {value}\nprint(answer)\n"
    t0_tokens = rng.randint(40, 120)
    t0 = Turn(text=f"We work it out with a short program.\n```python\n{code}", prompt_tokens=95,
              generated_tokens=t0_tokens, finish_reason="stop", duration_s=round(t0_tokens / tokens_per_s, 4),
              execution=Execution(code, "ok", f"{value}\n", "", round(rng.uniform(0.01, 0.05), 4)),
              appended=f"{CODE_STOP}```output\n{value}\n```\n")
    if status == "length":
        t1 = Turn(text="Let me double-check this by another method, which takes a while " * 4,
                  prompt_tokens=95 + t0_tokens + 12, generated_tokens=64, finish_reason="length",
                  duration_s=round(64 / tokens_per_s, 4))
        answers = (Answer(value, value, "code"),)
    else:
        t1_tokens = rng.randint(10, 30)
        t1 = Turn(text=f"The program printed {value}, so the answer is $\\boxed{{{value}}}$.",
                  prompt_tokens=95 + t0_tokens + 12, generated_tokens=t1_tokens, finish_reason="stop",
                  duration_s=round(t1_tokens / tokens_per_s, 4))
        answers = (Answer(value, value, "code"), Answer(value, value, "boxed"))
    turns = (t0,) if status == "cancelled" else (t0, t1)
    if status == "cancelled":
        answers = (Answer(value, value, "code"),)
    duration = sum(t.duration_s + (t.execution.duration_s if t.execution else 0.0) for t in turns)
    return Repetition(pid, index, 1000 * index + 7, status, turns, answers,
                      started_at + index * 0.01, round(duration, 4))


def build_run(run_dir: Path, *, reps: int = 8, seed: int = 0, problems=PROBLEMS,
              config: Config | None = None, results: bool = True) -> Path:
    """Write a complete run with ``reps`` repetitions per problem into ``run_dir`` (which must not exist)."""
    rng = random.Random(seed)
    config = config or Config().replace({"engine.name": "replay", "solve.reps": reps, "solve.workers": 4})
    log = RunLog.create(run_dir, config)
    try:
        for p_index, (pid, text, reference, p_right) in enumerate(problems):
            log.append_problem(Problem(pid, text, reference, {"source": "demo"}))
            voted: list[str] = []
            tokens = 0
            for i in range(reps):
                value = reference if rng.random() < p_right else _wrong(reference, rng)
                status = "done"
                if (p_index, i) == (2, reps - 1):
                    status = "cancelled"  # a repetition an early stop cut short
                elif (p_index, i) == (3, 1):
                    status = "length"
                rep = make_repetition(pid, i, value, rng, status=status)
                log.append(rep)
                tokens += rep.generated_tokens
                if rep.votes:
                    voted.append(value)
            if results:
                counts = Counter(voted)
                answer = counts.most_common(1)[0][0] if counts else config.answers.default
                log.append_result(ProblemResult(pid, answer, {k: float(v) for k, v in counts.items()},
                                                len(voted), reps, "max_reps", 1.5, tokens, answer == reference))
    finally:
        log.close()
    return run_dir


def main() -> int:
    if FIXTURE_RUN.exists():
        shutil.rmtree(FIXTURE_RUN)
    build_run(FIXTURE_RUN)
    print(f"wrote {FIXTURE_RUN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
