"""Solving problems: W repetitions in flight per problem, each finish an event of the problem's state
(``solver.core.state.ProblemState``, the rules the simulator replays), an early stop or the deadline cancels the
rest (engine requests aborted, queued snippets dropped), and the voted answer comes back at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from types import TracebackType

from solver.core.answers import is_correct, prepare_expressions, voting_answers
from solver.core.clock import SystemClock, remaining
from solver.config import Config, engine_batch, repetitions_busy
from solver.dialects import make_dialect
from solver.loop.parts import RunParts
from solver.loop.repetition import Activity, run_repetition
from solver.core.confidence import confidence_threshold
from solver.core.state import ProblemState, Rules, cast  # noqa: F401 - Rules: doctests
from solver.types import Clock, Engine, Problem, ProblemResult, Repetition, Sandbox

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SolveEvent:
    """Progress of one problem, for displays: emitted when it starts, after each repetition, and at the end."""

    kind: str  # "start" | "repetition" | "end"
    problem_id: str
    finished: int
    launched: int
    target: int  # repetitions at most
    leader: str | None  # the answer leading the vote now
    result: ProblemResult | None = None


async def record_off_loop(record: Callable[[Repetition], None], rep: Repetition) -> None:
    """Hand a finished repetition to ``record`` in a worker thread and wait for it: the run log fsyncs each
    record (milliseconds on a real disk, more on a network one), which on the event loop's thread would stall
    every engine stream for that long. Waiting keeps the order "on disk, then voted" that resume relies on.
    ``benchmarks/runlog_stall.py`` measures the stall both ways."""
    await asyncio.to_thread(record, rep)


class ProblemSolver:
    """Solves problems on one engine and sandbox. ``on_repetition`` receives every finished or cancelled
    repetition, in finish order, in a worker thread (see :func:`record_off_loop`); ``on_event`` runs on the
    event loop."""

    def __init__(self, made_of: Config | RunParts, engine: Engine, sandbox: Sandbox, *, clock: Clock | None = None,
                 on_repetition: Callable[[Repetition], None] | None = None,
                 on_event: Callable[[SolveEvent], None] | None = None) -> None:
        """``made_of``: what the run's ``prepare_run`` made (its config, rules and prompt template), or a config,
        whose rules and template are then made here."""
        parts = made_of if isinstance(made_of, RunParts) else RunParts.of(made_of)
        config = parts.config
        self.config = config
        self.engine = engine
        self.sandbox = sandbox
        self.clock = clock or SystemClock()
        self.rules = parts.rules
        self.voter = self.rules.voter
        self.dialect = make_dialect(config, engine.tokenizer, parts.template)
        if config.answers.integer:
            prepare_expressions()  # not on the event loop's first expression answer, mid-run
        self.on_repetition = on_repetition or (lambda rep: None)
        self.on_event = on_event or (lambda event: None)
        self._launch_order = itertools.count()  # request priority: earlier-launched repetitions go first
        # Shared by the problems solved at once (solve.parallel_problems): repetitions in flight, each problem's
        # count of repetitions running code, and each problem's wake-up, so auto workers cap the total.
        self._in_flight = 0
        self._activities: set[_SharedActivity] = set()
        self._wakers: set[asyncio.Event] = set()

    async def solve(self, problem: Problem, *, deadline: float | None = None,
                    done: Sequence[Repetition] = ()) -> ProblemResult:
        """Vote over up to ``solve.reps`` repetitions; ``done`` are earlier finished ones (a resumed run), which
        enter the problem's state first, in the order given."""
        cfg = self.config
        started = self.clock.now()
        t0 = time.monotonic()
        state = ProblemState(self.rules)
        warmup = _Warmup(cfg.stop.confidence_warmup, cfg.stop.confidence_percentile)
        counted: list[Repetition] = []  # the repetitions that entered the state, in finish order
        earlier = [_settled(r) for r in done if r.finished]
        used = {r.index for r in earlier}
        free_indices = (i for i in itertools.count() if i not in used)
        for rep in enter_finished(state, earlier):
            counted.append(rep)
            warmup.note(rep)
        target = self.rules.max_repetitions
        auto = cfg.solve.workers == 0
        capacity = self.engine_capacity()
        wake = asyncio.Event()  # set when any problem's repetition ends or enters/leaves the sandbox
        activity = _SharedActivity(notify=self._notify)

        def may_launch(in_flight: int) -> bool:
            """Fixed W per problem, or (auto) while the engine has a free batch slot, counted over every problem
            this solver runs at once: repetitions running code are not in the engine, so others are launched to
            take their place, and K problems together never hold more than the engine's batch."""
            if not auto:
                return in_flight < cfg.solve.workers
            return self._in_flight - sum(a.executing for a in self._activities) < capacity

        def event(kind: str, result: ProblemResult | None = None) -> SolveEvent:
            leader = result.answer if result is not None else state.leader()
            return SolveEvent(kind, problem.id, state.finished, state.launched, target, leader, result)

        pending: dict[asyncio.Task[Repetition], int] = {}  # task -> launch number
        self.on_event(event("start"))
        self._wakers.add(wake)
        self._activities.add(activity)
        try:
            while state.stopped_by is None:
                if deadline is not None and self.clock.now() >= deadline:
                    state.expire()
                    break
                while state.may_launch() and may_launch(len(pending)):
                    index = next(free_indices)
                    task = asyncio.create_task(run_repetition(
                        problem, index, engine=self.engine, sandbox=self.sandbox, dialect=self.dialect,
                        config=cfg, confidence_floor=warmup.floor, activity=activity,
                        priority=next(self._launch_order)), name=f"{problem.id}-r{index}")
                    pending[task] = state.launch()
                    self._in_flight += 1
                if not pending and not (auto and state.may_launch()):
                    state.exhaust()
                    break
                # Only this problem clears its own wake-up, between its launch check and its wait (no await in
                # between), so a change signalled by another problem is never lost.
                wake.clear()
                waiting: set[asyncio.Future[object]] = set(pending)
                woken = asyncio.ensure_future(wake.wait()) if auto else None
                if woken is not None:
                    waiting.add(woken)
                try:
                    done_now, _ = await asyncio.wait(waiting, timeout=remaining(self.clock, deadline),
                                                     return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if woken is not None:
                        woken.cancel()
                # Finished together: events in launch order, as the simulator breaks ties.
                ready = sorted((t for t in done_now if t in pending), key=pending.__getitem__)
                if ready:
                    self._in_flight -= len(ready)
                    self._notify()  # engine slots freed: other problems may launch
                for task in ready:
                    pending.pop(task)
                    rep = _settled(task.result())
                    await record_off_loop(self.on_repetition, rep)  # on disk, then voted
                    if state.finish(cast(self.voter, rep)):  # a finish after the stop is logged, not counted
                        counted.append(rep)
                        warmup.note(rep)
                    self.on_event(event("repetition"))
        finally:
            try:
                await self._cancel(pending)
            finally:
                self._in_flight -= len(pending)
                self._wakers.discard(wake)
                self._activities.discard(activity)
                self._notify()
        assert state.stopped_by is not None
        answer = state.answer()
        correct = is_correct(answer, problem.answer, cfg.answers) if problem.answer is not None else None
        result = ProblemResult(
            problem_id=problem.id, answer=answer, votes=state.counts(), repetitions=state.finished,
            launched=state.launched, stopped_by=state.stopped_by, duration_s=time.monotonic() - t0,
            generated_tokens=sum(r.generated_tokens for r in counted), correct=correct)
        log.info("problem %s: %s after %d repetitions (%s, %.1f s)", problem.id, answer, state.finished,
                 state.stopped_by, self.clock.now() - started)
        self.on_event(event("end", result))
        return result

    def _notify(self) -> None:
        for waker in self._wakers:
            waker.set()

    def engine_capacity(self) -> int:
        """Sequences the engine batches at once: its own ``capacity`` if it has one, else the whole engine's
        batch from the engine arguments, ``max_num_seqs x data_parallel_size`` (``engine_batch``)."""
        capacity = getattr(self.engine, "capacity", None)
        if isinstance(capacity, int) and capacity > 0:
            return capacity
        return engine_batch(self.config.engine.args)

    async def _cancel(self, pending: dict[asyncio.Task[Repetition], int]) -> None:
        """Cancel what is still running and log the partial repetitions: status "cancelled", or the rare one that
        finished just before its cancel arrived (late: the problem had stopped, so it does not count)."""
        if not pending:
            return
        for task in pending:
            task.cancel()
        outcomes = await asyncio.gather(*pending, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, Repetition):
                await record_off_loop(self.on_repetition, _settled(outcome))
            elif isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
                log.warning("a cancelled repetition failed while stopping: %r", outcome)


class _Warmup:
    """DeepConf online: the lowest group confidences of the first ``k`` voting repetitions that recorded one set a
    floor (their ``percentile``); later repetitions below it are cut while they stream (status "filtered")."""

    def __init__(self, k: int, percentile: float) -> None:
        self.k = k
        self.percentile = percentile
        self.lows: list[float] = []
        self.threshold: float | None = None

    def floor(self) -> float | None:
        return self.threshold

    def note(self, rep: Repetition) -> None:
        if self.k <= 0 or not rep.votes or len(self.lows) >= self.k:
            return
        lows = [t.tail_confidence for t in rep.turns if t.tail_confidence is not None]
        if lows:
            self.lows.append(min(lows))
            if len(self.lows) == self.k:
                self.threshold = confidence_threshold(self.lows, self.percentile)


@dataclass(eq=False)
class _SharedActivity(Activity):
    """One problem's count of repetitions running code, which also wakes every problem of the solver when it
    changes: a repetition entering the sandbox frees an engine slot any problem may fill."""

    notify: Callable[[], None] = lambda: None
    __hash__ = object.__hash__  # one per problem, kept in a set: identity, not field values
    __eq__ = object.__eq__

    def move(self, step: int) -> None:
        super().move(step)
        self.notify()


def enter_finished(state: ProblemState, finished: Sequence[Repetition]) -> list[Repetition]:
    """Enter repetitions that finished elsewhere (an earlier session, a solve that failed midway) into ``state``,
    in the order given, each launched then finished with its ballot, as far as the state lets them launch;
    returns those that counted.

    >>> from solver.config import Config
    >>> from solver.types import Answer
    >>> state = ProblemState(Rules.of(Config().replace({"stop.stoppers": ["agree:2"]})))
    >>> reps = [Repetition("p", i, 0, "done", (), (Answer(a, a, "boxed"),), 0.0, 1.0) for i, a in enumerate("775")]
    >>> [r.index for r in enter_finished(state, reps)], state.stopped_by, state.answer()
    ([0, 1], 'agree:2', '7')
    """
    counted = []
    for rep in finished:
        if not state.may_launch():
            break
        state.launch()
        if state.finish(cast(state.rules.voter, rep)):
            counted.append(rep)
    return counted


def _settled(rep: Repetition) -> Repetition:
    """The repetition with only the candidates it may vote with (see ``voting_answers``), as it is logged and
    voted: a repetition cut by length keeps its boxes and code outputs but not its "the answer is" phrases."""
    kept = voting_answers(rep.answers, rep.status)
    return rep if kept == rep.answers else replace(rep, answers=kept)


class SolverSession:
    """The engine, the sandbox and the solver over them, for a run: the one way a run gets its solver.

    ``engine`` and ``sandbox``, when given (both), are used as they are and left open (a sweep or the demo reuses
    them across runs). Otherwise the session opens its own from the config and closes them with itself: the replay
    engine with the sandbox that gives back its recorded outputs for ``engine.replay_outputs``, else the sandbox
    pool and the configured engine, the pool's warm process first, before the engine exists, so it is never a fork
    of a process holding engine (or CUDA) state."""

    def __init__(self, made_of: Config | RunParts, *, clock: Clock | None = None,
                 on_repetition: Callable[[Repetition], None] | None = None,
                 on_event: Callable[[SolveEvent], None] | None = None, engine: Engine | None = None,
                 sandbox: Sandbox | None = None) -> None:
        """``made_of``: what the run's ``prepare_run`` made, or a config (the solver then makes its parts)."""
        if (engine is None) != (sandbox is None):
            raise ValueError("give both an engine and a sandbox, or neither (the session then opens its own)")
        self.made_of = made_of
        self.config = made_of.config if isinstance(made_of, RunParts) else made_of
        self.clock = clock
        self.on_repetition = on_repetition
        self.on_event = on_event
        self.engine: Engine | None = engine
        self.sandbox: Sandbox | None = sandbox
        self.solver: ProblemSolver
        self._stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> SolverSession:
        stack = contextlib.AsyncExitStack()
        try:
            if self.engine is None or self.sandbox is None:
                self.engine, self.sandbox = await stack.enter_async_context(open_parts(self.config))
            self.solver = ProblemSolver(self.made_of, self.engine, self.sandbox, clock=self.clock,
                                        on_repetition=self.on_repetition, on_event=self.on_event)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close what the session opened (nothing it was given); the session is done afterwards."""
        stack, self._stack = self._stack, None
        if stack is not None:
            self.engine = self.sandbox = None
            await stack.aclose()


@contextlib.asynccontextmanager
async def open_parts(config: Config) -> AsyncIterator[tuple[Engine, Sandbox]]:
    """The engine and the sandbox the config names, closed on the way out (the engine first): the replay engine
    and its recorded outputs for ``engine.replay_outputs``; else the sandbox pool, started before the engine."""
    if config.engine.replay_outputs:
        from solver.replay import recorded_parts

        async with recorded_parts(config) as parts:
            yield parts
        return
    from solver.engines import open_engine
    from solver.sandbox.pool import create_sandbox

    sandbox = create_sandbox(config.sandbox, busy=repetitions_busy(config))
    try:
        await sandbox.start()  # type: ignore[attr-defined]
        engine = await open_engine(config)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            await sandbox.close()
        raise
    try:
        yield engine, sandbox
    finally:
        try:
            await engine.close()
        finally:
            with contextlib.suppress(ProcessLookupError):
                await sandbox.close()
