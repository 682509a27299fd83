"""An asyncio event loop on virtual time, for tests that need a run's timing without waiting for it.

Time stands still while anything is ready to run or a worker thread (``asyncio.to_thread``, the run log's
fsync) is busy, and jumps to the next timer when nothing else can happen: ``asyncio.sleep(3600)`` returns at
once with ``loop.time()`` an hour later, and events happen in the order their virtual times say, whatever the
machine's load. ``clock()`` gives a ``solver.types.Clock`` reading that time, for deadlines.

``LoopTime`` keeps such time for code whose event loop runs on a thread of its own and which reads the clock
from others too (the Kaggle predictor: its engine's loop on a ``LoopThread``, its budget on the caller's thread).
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from concurrent.futures import Future as ThreadFuture
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.virtual_now = 0.0
        self.threads_busy = 0
        super().__init__(_Selector(self))

    def time(self) -> float:
        return self.virtual_now

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:
        future = super().run_in_executor(executor, func, *args)
        self.threads_busy += 1
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, _future: asyncio.Future[Any] | ThreadFuture[Any]) -> None:
        self.threads_busy -= 1


class _Selector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The loop's selector: a wait with a timeout moves virtual time instead of waiting, unless a worker thread
    is busy (its end wakes the loop through its self-pipe, at the same virtual time)."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self.loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if self.loop.threads_busy or timeout is None:
            return super().select(None)  # a thread's end, or the loop's shutdown, wakes it
        self.loop.virtual_now += timeout
        return []


class _Clock:
    def now(self) -> float:
        return asyncio.get_running_loop().time()


def clock() -> _Clock:
    """A ``Clock`` on the running loop's time (virtual inside :func:`run`)."""
    return _Clock()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a :class:`VirtualTimeLoop`."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(coro)


class LoopTime:
    """Virtual time across threads: ``new_loop`` is a loop factory (``LoopThread(loop_factory=...)``) whose loops
    run on virtual time, each going on from where the last one stood, and ``now`` reads that time from any thread
    (a ``solver.types.Clock``).

    Time moves only inside the current loop, while it waits for its next timer with nothing ready and no worker
    thread busy; a caller on another thread that waits for the loop (``LoopThread.run``) sees the time its
    coroutine took, and between such calls, with nothing scheduled, time stands still."""

    def __init__(self) -> None:
        self.loop: VirtualTimeLoop | None = None

    def new_loop(self) -> VirtualTimeLoop:
        loop = VirtualTimeLoop()
        loop.virtual_now = self.now()
        self.loop = loop
        return loop

    def now(self) -> float:
        loop = self.loop
        return 0.0 if loop is None else loop.virtual_now
