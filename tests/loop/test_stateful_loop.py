"""The repetition loop over the real sandbox pool's stateful sessions: the model's calls are scripted token
sequences made by the real harmony encoder (a control-flow double for the engine), the code runs in real
sandbox sessions, so a name defined by one call is there for the next and the session is gone afterwards."""

from __future__ import annotations

import pytest
from doubles import ScriptedTokenEngine

from solver.config import SandboxConfig, load_config
from solver.dialects import make_dialect
from solver.loop.repetition import run_repetition
from solver.sandbox.pool import ProcessPoolSandbox
from solver.types import Problem

PROBLEM = Problem("s1", "What is 6 times 7?", answer="42")


@pytest.fixture(scope="module")
def pool_options() -> dict:
    """The shared ``pool`` (tests/conftest.py) with one worker and a 5 s limit."""
    return {"config": SandboxConfig(workers=1, timeout_s=5.0)}


def config(mode: str):
    return load_config("tiny", overrides={"prompt.dialect": "harmony", "sandbox.code_mode": mode,
                                          "sampling.max_tokens": 400, "sampling.max_total_tokens": 2000,
                                          "sampling.max_turns": 6})


def script(dialect) -> list[list[int]]:
    def ids(text: str) -> list[int]:
        return list(dialect.encoding.encode(text, allowed_special="all"))
    return [
        ids("<|channel|>analysis<|message|>Define it.<|end|>"
            "<|start|>assistant to=python<|channel|>analysis code<|message|>import math\nx = 6 * 7<|call|>"),
        ids("<|channel|>analysis<|message|>Use it.<|end|>"
            "<|start|>assistant to=python<|channel|>analysis code<|message|>math.isqrt(x * x)<|call|>"),
        ids("<|channel|>final<|message|>\\boxed{42}<|return|>"),
    ]


class SessionRecorder:
    """The real pool, with a note of every session it hands out (to check each is released)."""

    def __init__(self, pool: ProcessPoolSandbox) -> None:
        self.pool, self.sessions = pool, []

    async def run(self, code, *, timeout_s=None):
        return await self.pool.run(code, timeout_s=timeout_s)

    async def session(self):
        self.sessions.append(await self.pool.session())
        return self.sessions[-1]


def solve(loop, pool: ProcessPoolSandbox, mode: str):
    cfg = config(mode)
    dialect = make_dialect(cfg, None)
    turns = script(dialect)
    engine = ScriptedTokenEngine(lambda req: turns[req.turn])
    recorder = SessionRecorder(pool)
    rep = loop.run_until_complete(run_repetition(PROBLEM, 0, engine=engine, sandbox=recorder, dialect=dialect,
                                                 config=cfg))
    return rep, recorder.sessions


def test_stateful_repetition_keeps_names_across_calls_in_the_real_sandbox(loop, pool):
    rep, sessions = solve(loop, pool, "stateful")
    assert rep.status == "done", rep.error
    first, second = rep.turns[0].execution, rep.turns[1].execution
    assert first is not None and first.status == "ok"
    # The bare last expression is shown, computed from the first call's import and variable.
    assert second is not None and second.status == "ok" and second.stdout.strip() == "42"
    assert rep.answer_from("code").value == "42"
    # One session held for the whole repetition and released when it ended.
    assert len(sessions) == 1 and sessions[0].closed


def test_fresh_mode_forgets_names_between_calls_in_the_real_sandbox(loop, pool):
    rep, sessions = solve(loop, pool, "newest")
    assert sessions == []
    second = rep.turns[1].execution
    assert second is not None and second.status == "error" and "NameError" in second.stderr
