"""The engine's life behind ``predict``: built on first use, checked after a problem that looked wrong, rebuilt
when its process died or it stopped producing tokens, at most ``max_builds`` times, always on one background
event loop (:mod:`solver.kaggle.thread`) whose blocked state is detected and abandoned."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from solver.loop.parts import RunParts
from solver.kaggle.thread import LoopResult, LoopThread
from solver.types import Clock, GenerationRequest, ProblemResult, Repetition

log = logging.getLogger(__name__)
T = TypeVar("T")

SessionFactory = Callable[[RunParts, Callable[[Repetition], None]], contextlib.AbstractAsyncContextManager[Any]]
"""Builds, from what the run's ``prepare_run`` made (its config, rules and prompt template), an async context
manager whose value has ``engine``, ``sandbox`` and ``solver`` (a ProblemSolver that reports each finished
repetition to the callback) — :class:`solver.loop.problem.SolverSession` by default."""


def default_session_factory(clock: Clock) -> SessionFactory:
    """Sessions on ``clock`` whose solver is made of the parts the session is opened with."""

    def open_session(parts: RunParts, on_repetition: Callable[[Repetition], None]) -> Any:
        from solver.loop.problem import SolverSession

        return SolverSession(parts, clock=clock, on_repetition=on_repetition)

    return open_session


@dataclass(frozen=True)
class EngineLimits:
    """How long the engine's life may take at each step, in seconds, and how often it may be built.

    >>> EngineLimits().max_builds, EngineLimits(probe_timeout_s=1.0).probe_timeout_s
    (3, 1.0)
    """

    build_timeout_s: float | None = None  # None: a build is bounded only by the call's end
    probe_timeout_s: float = 60.0  # a one-token probe
    close_timeout_s: float = 60.0  # closing an engine before giving up on it
    max_builds: int = 3
    grace_s: float = 20.0  # the solver's own wind-down after a problem's deadline
    loop_grace_s: float = 10.0  # a cancelled coroutine's cleanup on the loop, after the solver's grace
    loop_check_s: float = 5.0  # a loop that cannot run a no-op this fast is abandoned


class EngineSupervisor:
    """Owns the loop thread and the session (engine + sandbox + solver) on it. Not thread-safe: the predictor
    calls it under its own lock."""

    def __init__(self, parts: RunParts, open_session: SessionFactory, clock: Clock,
                 on_repetition: Callable[[Repetition], None], limits: EngineLimits | None = None,
                 loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> None:
        self.parts = parts  # what every session is opened with
        self.open_session = open_session
        self.clock = clock
        self.on_repetition = on_repetition
        self.limits = limits or EngineLimits()
        self.loop_factory = loop_factory  # the engine's event loop (None: asyncio.new_event_loop)
        self.builds = 0
        self.session: Any = None
        self._loop: LoopThread | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._suspect: str | None = None  # why the engine may be unwell, checked before the next problem
        self._probes = 0
        # each built engine's compile-cache line (what became of engine.compile_cache), in build order
        self.cache_lines: list[str] = []

    def suspect(self, reason: str | None) -> None:
        """Remember why the engine may be unwell (None: it looked fine); checked at the next ``ensure``."""
        self._suspect = reason

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> LoopResult[T]:
        """Run ``coro`` on the engine's loop, bounded by ``timeout_s`` plus the loop grace."""
        assert self._loop is not None, "ensure() first"
        return self._loop.run(coro, timeout_s=timeout_s, grace_s=self.limits.loop_grace_s)

    def ensure(self, call_end: float | None) -> str | None:
        """Build the engine if there is none (or it died); None when ready, else why not."""
        if self._loop is None or not self._loop.alive:
            self._loop, self.session, self._stack = LoopThread(loop_factory=self.loop_factory), None, None
        if self.session is not None and self._suspect is not None:
            self._verify(self._suspect)
        self._suspect = None
        if self.session is not None and engine_dead(self.session.engine):
            self._drop("the engine died")
        if self.session is not None:
            return None
        if self.builds >= self.limits.max_builds:
            return f"no engine: {self.builds} builds failed or died already"
        self.builds += 1
        limits = [x for x in (self.limits.build_timeout_s,
                              None if call_end is None else call_end - self.clock.now()) if x is not None]
        timeout = max(0.0, min(limits)) if limits else None
        outcome = self.run(self._open(), timeout)
        if not outcome.ok:
            log.error("engine build %d failed: %s", self.builds, outcome.error)
            self.session = None
            return f"engine build failed: {outcome.error}"
        log.info("engine ready (build %d)", self.builds)
        verdict = getattr(getattr(self.session, "engine", None), "compile_cache", None)
        if verdict is not None:
            self.cache_lines.append(verdict.line)
        return None

    def close(self) -> None:
        """Close the session (bounded) and the loop."""
        if self._loop is not None:
            self._drop("closing", level=logging.INFO)
            self._loop.close()
            self._loop = None

    async def _open(self) -> None:
        stack = contextlib.AsyncExitStack()
        try:
            session = await stack.enter_async_context(self.open_session(self.parts, self.on_repetition))
        except BaseException:
            await stack.aclose()
            raise
        self._stack, self.session = stack, session

    def _verify(self, suspicion: str) -> None:
        """Before a problem, after one that looked wrong: is the loop free and does the engine still generate?
        A blocked loop is abandoned (its engine closes whenever it runs again, not waited for); a dead or silent
        engine is closed, so the caller builds a new one."""
        assert self._loop is not None
        if not self._loop.run(_noop(), timeout_s=self.limits.loop_check_s, grace_s=0.0).ok:
            log.error("event loop unresponsive (%s); abandoning it", suspicion)
            if self._stack is not None:
                self._loop.submit(self._stack.aclose())
            self._loop, self.session, self._stack = LoopThread(loop_factory=self.loop_factory), None, None
            return
        healthy = self.run(self._probe(), self.limits.probe_timeout_s)
        if not (healthy.ok and healthy.value):
            self._drop(f"engine probe failed ({suspicion}): {healthy.error or 'no tokens'}")

    async def _probe(self) -> bool:
        """One greedy token: does the engine still generate?"""
        engine = self.session.engine
        if engine_dead(engine):
            return False
        if engine.name == "replay":
            return True  # recordings answer only recorded requests, and there is no process to die
        prompt = "1 + 1 ="
        ids = None
        if engine.tokenizer is not None:
            ids = tuple(engine.tokenizer.encode(prompt, add_special_tokens=False))
        self._probes += 1
        request = GenerationRequest(request_id=f"probe-{self._probes}", prompt=prompt, prompt_token_ids=ids,
                                    max_tokens=1, temperature=0.0, top_p=1.0, seed=0, stop=())
        stream = engine.stream(request)
        try:
            async for delta in stream:
                if delta.error is not None:
                    return False
                if delta.token_ids or delta.token_count or delta.finish_reason in ("stop", "length"):
                    return True
            return False
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    def _drop(self, reason: str, level: int = logging.WARNING) -> None:
        if self._loop is None or self._stack is None:
            self.session = None
            return
        log.log(level, "closing the engine: %s", reason)
        stack, self._stack, self.session = self._stack, None, None
        closed = self._loop.run(stack.aclose(), timeout_s=self.limits.close_timeout_s, grace_s=self.limits.loop_grace_s)
        if not closed.ok:
            log.error("closing the engine failed: %s", closed.error)


async def _noop() -> None:
    return None


def engine_dead(engine: Any) -> bool:
    """The engine's own death flag when it has one (vLLM: its core process exited or its loop failed)."""
    is_dead = getattr(engine, "is_dead", None)
    try:
        return bool(is_dead()) if callable(is_dead) else False
    except Exception:  # a broken engine object is a dead engine
        return True


def suspicion(outcome: LoopResult[ProblemResult], reps: Sequence[Repetition]) -> str | None:
    """Why the engine may be unwell after a problem, or None: the solve failed or overran, a repetition failed in
    the engine, nothing was generated, or the deadline cut off a repetition that had not produced a single token
    (what a stalled engine looks like)."""
    result = outcome.value
    if not outcome.ok or result is None:
        return f"the solve ended with {outcome.status}: {outcome.error}"
    if any(r.status == "error" for r in reps):
        return "a repetition failed in the engine"
    if result.launched > 0 and result.generated_tokens == 0:
        return "no tokens generated"
    if result.stopped_by == "deadline" and any(r.status == "cancelled" and r.generated_tokens == 0 for r in reps):
        return "a repetition produced no token before the deadline"
    return None
