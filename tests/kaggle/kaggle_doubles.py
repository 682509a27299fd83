"""Scripted doubles for the Kaggle predictor's control flow: an engine that answers, raises, stalls or writes
code; a sandbox that prints, raises or blocks the loop; a session that runs the real ProblemSolver over them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

from solver.config import Config, load_config
from solver.loop.parts import RunParts
from solver.types import Delta, Execution, GenerationRequest

Behaviour = Literal["answer", "raise", "stall", "code"]


@dataclass
class FaultyScriptedEngine:
    """A scripted engine double: ``behaviour(request)`` picks a reply — a boxed answer, an exception, a stream
    that stops producing tokens (waits forever, cancellably), or a python block for the sandbox."""

    behaviour: Callable[[GenerationRequest], Behaviour]
    answer: str = "42"
    name: str = "scripted"
    tokenizer: None = None
    requests: list[GenerationRequest] = field(default_factory=list)
    closed: bool = False

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        self.requests.append(request)
        what = self.behaviour(request)
        if what == "raise":
            await asyncio.sleep(0.05)
            raise RuntimeError("engine core died")
        if what == "stall":
            await asyncio.Event().wait()  # no tokens, ever
        if what == "code":
            yield Delta(text="```python\nprint(6*7)\n", token_ids=(1, 2, 3))
            yield Delta(text="", token_ids=(), finish_reason="stop", stop_reason="```\n", prompt_tokens=5)
            return
        yield Delta(text=f"So the answer is \\boxed{{{self.answer}}}.", token_ids=(1, 2, 3))
        yield Delta(text="", token_ids=(), finish_reason="stop", prompt_tokens=5)

    def running_requests(self) -> int:
        return 0

    async def close(self) -> None:
        self.closed = True


@dataclass
class ScriptedSandbox:
    """A scripted sandbox double: prints ``stdout``, or raises, or blocks the whole event loop (a sync sleep)."""

    mode: Literal["print", "raise", "block"] = "print"
    stdout: str = "42\n"
    block_s: float = 0.0

    async def run(self, code: str, *, timeout_s: float | None = None) -> Execution:
        if self.mode == "raise":
            raise OSError("sandbox worker vanished")
        if self.mode == "block":
            time.sleep(self.block_s)  # the fault under test: a call that never yields to the loop
        return Execution(code=code, status="ok", stdout=self.stdout, stderr="", duration_s=0.0)

    async def close(self) -> None:
        return None


class ScriptedSession:
    """A session double: the real ProblemSolver over scripted doubles."""

    def __init__(self, parts: RunParts, on_repetition: Callable[..., None], engine: Any, sandbox: Any) -> None:
        self.parts, self.on_repetition, self.engine, self.sandbox = parts, on_repetition, engine, sandbox

    async def __aenter__(self) -> ScriptedSession:
        from solver.loop.problem import ProblemSolver

        self.solver = ProblemSolver(self.parts, self.engine, self.sandbox, on_repetition=self.on_repetition)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.engine.close()


def scripted_factory(engines: list[Any], sandbox: Any | None = None,
                     fail_builds: int = 0) -> tuple[Callable[..., ScriptedSession], list[Any]]:
    """Each build takes the next engine of ``engines`` (the last one repeats); the first ``fail_builds`` raise."""
    built: list[Any] = []

    def open_session(parts: RunParts, on_repetition: Callable[..., None]) -> ScriptedSession:
        if len(built) < fail_builds:
            built.append(None)
            raise RuntimeError("no GPU memory left")
        engine = engines[min(len(built), len(engines) - 1)]
        built.append(engine)
        return ScriptedSession(parts, on_repetition, engine, sandbox or ScriptedSandbox())

    return open_session, built


def fast_config(**overrides: Any) -> Config:
    """Two repetitions per problem and a budget of a few seconds per problem."""
    base = {"solve.reps": 2, "solve.workers": 2, "sampling.max_turns": 2, "budget.total_s": 60.0,
            "budget.problems": 4, "budget.min_s": 1.0, "budget.max_s": 2.0, "budget.reserve_s": 0.0}
    return load_config("tiny", overrides={**base, **overrides})


def tiny_engine_config(problems: int) -> Config:
    """The tiny real model with short generations (2 cores): one turn of at most 16 tokens, 2 repetitions."""
    return load_config("tiny", overrides={
        "sampling.max_tokens": 16, "sampling.max_total_tokens": 32, "sampling.max_turns": 1,
        "solve.reps": 2, "solve.workers": 2, "budget.problems": problems, "budget.max_s": 120.0})


def columns(row_id: Any, text: str = "What is 6 times 7?", column: str = "problem") -> tuple[pl.Series, pl.Series]:
    """One gateway call's arguments: the row's columns, one polars Series each (``predict(*row)``)."""
    return pl.Series("id", [row_id]), pl.Series(column, [text])
