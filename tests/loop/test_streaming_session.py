"""The repetition loop's use of an engine session (``engine.streaming_input``), with control-flow doubles: which
turns go through the session, and that the session is closed however the repetition ends."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from doubles import ScriptedEngine, ScriptedSandbox, printed

from solver.config import load_config
from solver.dialects import make_dialect
from solver.loop.repetition import run_repetition
from solver.types import GenerationRequest, Problem

PROBLEM = Problem("p1", "What is 6 times 7?", answer="42")


def script(req: GenerationRequest) -> str:
    if req.turn == 0:
        return "Compute it.\n```python\nprint(6*7)\n```\n"
    return "So the answer is \\boxed{42}."


@dataclass
class SessionDouble:
    """Stands for a streaming-input request: forwards each turn to the scripted engine and records it."""

    engine: ScriptedEngine
    turns: list[int] = field(default_factory=list)
    closed: int = 0

    def stream(self, request: GenerationRequest):
        self.turns.append(request.turn)
        return self.engine.stream(request)

    async def close(self) -> None:
        self.closed += 1


@dataclass
class SessionEngine(ScriptedEngine):
    """A scripted engine double that also offers sessions."""

    sessions: list[SessionDouble] = field(default_factory=list)

    def session(self) -> SessionDouble:
        self.sessions.append(SessionDouble(self))
        return self.sessions[-1]


def run(engine, streaming: bool):
    cfg = load_config("tiny", overrides={"sampling.max_tokens": 200, "sampling.max_total_tokens": 1000,
                                         "sampling.max_turns": 4, "engine.streaming_input": streaming})
    return asyncio.run(run_repetition(PROBLEM, 0, engine=engine, sandbox=ScriptedSandbox(printed("42")),
                                      dialect=make_dialect(cfg, None), config=cfg))


def test_streaming_input_sends_every_turn_through_one_session_and_closes_it():
    engine = SessionEngine(script)
    rep = run(engine, streaming=True)
    assert rep.status == "done" and rep.answer_from("boxed").value == "42"
    assert len(engine.sessions) == 1
    assert engine.sessions[0].turns == [0, 1] and engine.sessions[0].closed == 1


def test_without_the_switch_no_session_is_opened():
    engine = SessionEngine(script)
    rep = run(engine, streaming=False)
    assert rep.status == "done" and engine.sessions == [] and len(engine.requests) == 2


def test_a_cancelled_repetition_closes_its_session():
    engine = SessionEngine(script, delay_s=0.05)
    cfg = load_config("tiny", overrides={"engine.streaming_input": True})

    async def cancel_mid_turn():
        task = asyncio.create_task(run_repetition(PROBLEM, 0, engine=engine, sandbox=ScriptedSandbox(printed("42")),
                                                  dialect=make_dialect(cfg, None), config=cfg))
        await asyncio.sleep(0.08)
        task.cancel()
        return await task

    rep = asyncio.run(cancel_mid_turn())
    assert rep.status == "cancelled"
    assert engine.sessions[0].closed == 1 and engine.aborted  # the turn's stream was left, then the session closed
