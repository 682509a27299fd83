"""The driver: engine actors on Ray, whole problems handed out from one queue, one run log.

A cluster run goes through the same run driver as a single-machine run (``solver.loop.run.drive``): the same run
directory session records problems, repetitions and results and writes the answers and the report; only where
problems are solved differs. Each actor takes the next problem when it has a free slot
(``solve.parallel_problems`` per actor, default 1), so cheap problems do not wait behind expensive ones as in a
static split. The actor streams each repetition as it finishes; the driver records it at once (fsynced off its
event loop, as a single-machine run does) and is the only writer of RUN_DIR. When an actor dies mid-problem
(killed, out of memory, its engine crashed), the driver says which actor and why, and puts the problem back in the
queue: the next actor continues it from the repetitions already logged (passed as ``done``, so they are kept and
their indices never run again), and the log's (problem, index) key keeps any repetition from being written, or
voted, twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from solver.cluster.actor import ActorInfo, EngineActor, forwarded_env
from solver.cluster.connect import RayConnection
from solver.cluster.spec import ClusterFailed, actor_count, death_reason, shared_gpus
from solver.config import Config, Layout
from solver.loop.problem import SolveEvent
from solver.loop.run import Run, drive, make_run
from solver.loop.rundir import RunSession
from solver.types import Problem, ProblemResult, Repetition

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3  # actors a problem may see die under it before it is left unsolved (it may be the cause)
CLOSE_TIMEOUT_S = 60.0  # for the actors to close their engines and pools before they are killed regardless
EVENTS_NAME = "cluster.jsonl"  # beside log.jsonl: which actors ran, where, and which died and why


@dataclass(frozen=True)
class ActorDeath:
    actor: str
    host: str | None
    problem_id: str | None  # the problem it was solving, None when it died starting
    reason: str  # one line: Ray's exit detail or the exception that ended it
    kept: int = 0  # that problem's finished repetitions already in the log, kept for the next actor

    def describe(self) -> str:
        where = f" on {self.host}" if self.host else ""
        if self.problem_id is None:
            return f"actor {self.actor}{where} failed to start: {self.reason}"
        return (f"actor {self.actor}{where} died while solving {self.problem_id}: {self.reason}; "
                f"{self.problem_id} re-queued, {self.kept} logged repetitions kept")


@dataclass(frozen=True)
class ClusterRunResult:
    results: list[ProblemResult]  # in problem order, the problems decided (now or before a resume)
    deaths: list[ActorDeath] = field(default_factory=list)
    unsolved: list[str] = field(default_factory=list)  # problem ids left without a result


@dataclass
class _Actor:
    name: str
    handle: Any  # ray.actor.ActorHandle
    info: ActorInfo | None = None
    alive: bool = True


class _EventLog:
    """``cluster.jsonl``: one JSON object per line, appended and flushed (diagnostics, not needed to resume)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / EVENTS_NAME

    def write(self, event: str, **body: Any) -> None:
        with self.path.open("a") as handle:
            handle.write(json.dumps({"event": event, "time": time.time(), **body}) + "\n")


class Cluster:
    """Engine actors on a Ray connection. ``run`` may be called several times (a sweep's runs): the actors and
    their engines are kept while the engine and sandbox settings stay the same.

    ``on_repetition(actor, repetition)`` is called after each repetition is logged (progress displays, tests).
    ``actor_class`` (an ``EngineActor`` subclass, with ``actor_args`` after the actor's own) is what each actor
    runs: a benchmark's actor wraps the engine it owns (``EngineActor.wrap``)."""

    def __init__(self, connection: RayConnection, *,
                 on_repetition: Callable[[str, Repetition], None] | None = None,
                 actor_class: type[EngineActor] = EngineActor, actor_args: tuple[Any, ...] = ()) -> None:
        self.connection = connection
        self.on_repetition = on_repetition or (lambda actor, rep: None)
        self.actor_class, self.actor_args = actor_class, actor_args
        self.actors: list[_Actor] = []
        self.deaths: list[ActorDeath] = []
        self._started_with: tuple[Any, Any] | None = None

    # -- actors --

    async def start(self, config: Config) -> list[_Actor]:
        """Start the actors for ``config`` (once; again only when its engine or sandbox settings differ)."""
        key = (config.engine, config.sandbox)
        if self._started_with == key and any(a.alive for a in self.actors):
            return [a for a in self.actors if a.alive]
        await self.close()
        ray = self._ray()
        engine = Layout.of(config.engine.args)
        cluster_gpus = self.connection.gpus()
        count = actor_count(self.connection.spec, cluster_gpus, engine, self.connection.cpus())
        remote = ray.remote(self.actor_class)
        # One CPU slot each (the actor's event loop); a whole engine's GPUs when the cluster has GPUs (Ray then sets
        # each actor's CUDA_VISIBLE_DEVICES to its own, and the engine's processes inherit it).
        options = {"num_cpus": 1, "num_gpus": engine.engine_gpus if cluster_gpus > 0 else 0, "max_restarts": 0}
        omp, env, cache = os.environ.get("OMP_NUM_THREADS"), forwarded_env(os.environ), os.environ.get("VLLM_CACHE_ROOT")
        self.actors = [_Actor(f"engine-{i}", remote.options(**options).remote(f"engine-{i}", omp, env, cache,
                                                                              *self.actor_args))
                       for i in range(count)]
        outcomes = await asyncio.gather(*(a.handle.start.remote(config) for a in self.actors),
                                        return_exceptions=True)
        for actor, outcome in zip(self.actors, outcomes):
            if isinstance(outcome, ActorInfo):
                actor.info = outcome
                log.info("actor %s started on %s (pid %d, GPUs %s)", actor.name, outcome.host, outcome.pid,
                         outcome.gpus)
            else:
                self._lose(actor, None, outcome, kept=0)
        alive = [a for a in self.actors if a.alive]
        if not alive:
            raise ClusterFailed(f"no engine actor started: {self.deaths[-1].describe()}")
        for line in shared_gpus([a.info for a in alive if a.info is not None]):
            log.warning("cluster: %s", line)
        self._started_with = key
        return alive

    def _lose(self, actor: _Actor, problem_id: str | None, error: BaseException, kept: int) -> ActorDeath:
        """Mark an actor dead (killing it if Ray still has it) and say which one and why."""
        if actor.alive:
            actor.alive = False
            with contextlib.suppress(*self._kill_errors()):  # already gone: nothing to kill
                self._ray().kill(actor.handle, no_restart=True)
        death = ActorDeath(actor.name, actor.info.host if actor.info else None, problem_id,
                           death_reason(str(error)), kept)
        self.deaths.append(death)
        log.warning("cluster: %s", death.describe())
        return death

    async def close(self) -> None:
        """Close every live actor's engine and pool, then end the actors."""
        ray = self._ray()
        live = [a for a in self.actors if a.alive]
        if live:
            closing = asyncio.gather(*(a.handle.close.remote() for a in live), return_exceptions=True)
            try:
                await asyncio.wait_for(closing, CLOSE_TIMEOUT_S)
            except asyncio.TimeoutError:
                log.warning("cluster: engines still closing after %.0f s; ending their actors", CLOSE_TIMEOUT_S)
        for actor in live:
            with contextlib.suppress(*self._kill_errors()):  # it may have died meanwhile
                ray.kill(actor.handle, no_restart=True)
            actor.alive = False
        self.actors = []
        self._started_with = None

    @staticmethod
    def _ray() -> Any:
        import ray

        return ray

    @staticmethod
    def _kill_errors() -> tuple[type[BaseException], ...]:
        """What ``ray.kill`` raises for an actor that is already gone (or a connection already closed)."""
        from ray.exceptions import RayError

        return (RayError, ValueError, ConnectionError)

    # -- a run --

    async def run(self, config: Config, problems: Sequence[Problem], run_dir: Path, *, resume: bool = False,
                  on_event: Callable[[SolveEvent], None] | None = None) -> ClusterRunResult:
        """Solve every problem not yet decided in RUN_DIR (created, or resumed): :func:`~solver.loop.run.make_run`
        from the whole ``config`` (its names not checked again), then :meth:`drive`."""
        made = await asyncio.to_thread(make_run, config, problems, run_dir, resume=resume, check=False)
        return await self.drive(made, on_event=on_event)

    async def drive(self, run: Run, *, on_event: Callable[[SolveEvent], None] | None = None) -> ClusterRunResult:
        """Solve every problem of ``run`` not yet decided in its folder through the one run driver
        (``solver.loop.run.drive``), as a single-machine run does, plus cluster.jsonl; only where problems are
        solved differs. The run's session is closed at the end."""
        on_event = on_event or (lambda event: None)
        session = run.session
        if session is None:
            raise ValueError("a cluster run writes its folder: make it with a run_dir")
        events = _EventLog(session.run_dir)
        deaths_before = len(self.deaths)

        async def on_actors(run: Run, todo: Sequence[Problem]) -> list[str]:
            actors = await self.start(run.config)
            for actor in actors:
                if actor.info is not None:
                    events.write("actor", **asdict(actor.info))
            for death in self.deaths[deaths_before:]:
                events.write("death", **asdict(death))
            return await self._hand_out(run.config, todo, session, events, on_event)

        try:
            outcome = await drive(run, on_actors)
            return ClusterRunResult(outcome.results, self.deaths[deaths_before:], outcome.unsolved)
        finally:
            session.close()

    async def _hand_out(self, config: Config, todo: Sequence[Problem], session: RunSession, events: _EventLog,
                        on_event: Callable[[SolveEvent], None]) -> list[str]:
        from ray.exceptions import RayError

        queue: asyncio.Queue[Problem] = asyncio.Queue()
        for problem in todo:
            queue.put_nowait(problem)
        open_problems = {p.id for p in todo}
        attempts: dict[str, int] = {}
        unsolved: list[str] = []
        settled = asyncio.Event()  # every problem decided or given up, or no actor left

        def settle(problem_id: str) -> None:
            open_problems.discard(problem_id)
            if not open_problems:
                settled.set()

        async def next_problem() -> Problem | None:
            getter = asyncio.ensure_future(queue.get())
            stop = asyncio.ensure_future(settled.wait())
            await asyncio.wait({getter, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if getter.done():
                return getter.result()
            getter.cancel()
            return None

        async def solve_one(actor: _Actor, problem: Problem) -> None:
            stream = actor.handle.solve.options(num_returns="streaming").remote(config, problem,
                                                                                session.done(problem.id))
            async for ref in stream:
                item = await ref
                if isinstance(item, Repetition):
                    await asyncio.to_thread(session.record, item)  # its fsync off the event loop
                    self.on_repetition(actor.name, item)
                elif isinstance(item, SolveEvent):
                    on_event(item)
                elif isinstance(item, ProblemResult):
                    await asyncio.to_thread(session.decide, item)
                    return
            raise ClusterFailed(f"{actor.name} ended {problem.id} without a result")

        async def worker(actor: _Actor) -> None:
            while actor.alive:
                problem = await next_problem()
                if problem is None:
                    return
                try:
                    await solve_one(actor, problem)
                    settle(problem.id)
                except (RayError, ClusterFailed) as exc:
                    kept = len(session.done(problem.id))
                    death = self._lose(actor, problem.id, exc, kept)
                    events.write("death", **asdict(death))
                    attempts[problem.id] = attempts.get(problem.id, 0) + 1
                    if attempts[problem.id] >= MAX_ATTEMPTS:
                        log.warning("cluster: %s left unsolved after %d actors died under it", problem.id,
                                    attempts[problem.id])
                        unsolved.append(problem.id)
                        settle(problem.id)
                    else:
                        queue.put_nowait(problem)
                    if not any(a.alive for a in self.actors):
                        settled.set()
                    return

        slots = max(1, config.solve.parallel_problems)
        workers = [asyncio.create_task(worker(a)) for a in self.actors if a.alive for _ in range(slots)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        left = [p.id for p in todo if p.id in open_problems]
        if left:
            log.warning("cluster: no engine actor left; %d problems undecided", len(left))
        return unsolved + left
