"""What a finished repetition votes with, through the problem solver (control flow: scripted engine double)."""

from __future__ import annotations

import asyncio

from doubles import ScriptedEngine, ScriptedSandbox, printed

from solver.config import load_config
from solver.loop.problem import ProblemSolver
from solver.types import Problem, Repetition

PROBLEM = Problem("p1", "How many pairs?", answer="8")


def test_scripted_engine_length_cut_repetition_does_not_vote_its_last_phrase():
    # The request is cut by max_tokens right after a phrase in the middle of the reasoning.
    words = "Let us count. So far the answer is 7 and now we check the remaining cases one by one".split()
    cfg = load_config("tiny", overrides={"sampling.max_tokens": 9, "sampling.max_total_tokens": 9,
                                         "sampling.max_turns": 1, "solve.reps": 2, "solve.workers": 2,
                                         "stop.stoppers": ["max_reps"]})
    engine = ScriptedEngine(lambda req: " ".join(words))
    logged: list[Repetition] = []
    solver = ProblemSolver(cfg, engine, ScriptedSandbox(printed("1")), on_repetition=logged.append)
    result = asyncio.run(solver.solve(PROBLEM))
    assert [r.status for r in logged] == ["length", "length"]
    assert all(r.text.endswith("the answer is 7") for r in logged)
    assert result.votes == {} and result.answer == cfg.answers.default
    assert all(not any(a.source == "phrase" for a in r.answers) for r in logged)  # the log says the same


def test_scripted_engine_finished_repetition_votes_its_concluding_phrase():
    cfg = load_config("tiny", overrides={"sampling.max_tokens": 50, "sampling.max_turns": 1, "solve.reps": 1,
                                         "solve.workers": 1, "stop.stoppers": ["max_reps"]})
    engine = ScriptedEngine(lambda req: "Counting the pairs, the answer is 8.")
    result = asyncio.run(ProblemSolver(cfg, engine, ScriptedSandbox(printed("1"))).solve(PROBLEM))
    assert result.votes == {"8": 1.0} and result.correct is True
