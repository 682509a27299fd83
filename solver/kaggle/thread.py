"""One asyncio event loop in a background thread, for callers that are synchronous (the Kaggle ``predict``).

vLLM's async engine must live on ONE event loop for its whole life (a fresh ``asyncio.run`` per call fails with
"attached to a different loop"), and the Kaggle gateway calls ``predict`` synchronously, once per problem. So
the engine is built and used on this thread's loop, and each call submits a coroutine and waits for it with a
wall-time bound. Failures and timeouts come back as values.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from solver.errors import describe

T = TypeVar("T")
log = logging.getLogger(__name__)

LoopResultStatus = Literal["ok", "timeout", "error"]


@dataclass(frozen=True)
class LoopResult(Generic[T]):
    """What a submitted coroutine came to: its value, or why there is none."""

    status: LoopResultStatus
    value: T | None = None
    error: str | None = None  # one line: the exception type and message

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class LoopThread:
    """A daemon thread running one event loop until ``close``.

    >>> async def add(a, b):
    ...     return a + b
    >>> loop = LoopThread()
    >>> loop.run(add(2, 3), timeout_s=5).value
    5
    >>> loop.close()
    """

    def __init__(self, name: str = "solver-loop",
                 loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> None:
        self._loop = (loop_factory or asyncio.new_event_loop)()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._loop.is_closed()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None, grace_s: float = 10.0) -> LoopResult[T]:
        """Run ``coro`` on the loop; wait at most ``timeout_s`` (None = no bound) plus ``grace_s``.

        The coroutine is cancelled at ``timeout_s`` inside the loop (``asyncio.wait_for``), which gives its
        cleanup (aborting engine requests, killing snippets) up to ``grace_s`` more seconds. If even that does
        not end it, the caller gets a timeout and the task is cancelled again and left behind.
        """
        if not self.alive:
            coro.close()
            return LoopResult("error", error="event loop is not running")
        bounded = coro if timeout_s is None else asyncio.wait_for(coro, max(0.0, timeout_s))
        future = asyncio.run_coroutine_threadsafe(bounded, self._loop)
        wall = None if timeout_s is None else max(0.0, timeout_s) + grace_s
        try:
            return LoopResult("ok", value=future.result(timeout=wall))
        except (asyncio.TimeoutError, concurrent.futures.TimeoutError) as exc:
            future.cancel()
            return LoopResult("timeout", error=describe(exc) if str(exc) else "timed out")
        except concurrent.futures.CancelledError:
            return LoopResult("error", error="cancelled")
        except Exception as exc:  # the coroutine's own failure, handed back as a value
            return LoopResult("error", error=describe(exc))

    def submit(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Schedule ``coro`` on the loop without waiting for it (it runs whenever the loop is free)."""
        if self.alive:
            asyncio.run_coroutine_threadsafe(coro, self._loop)
        else:
            coro.close()

    def close(self, timeout_s: float = 10.0) -> None:
        """Cancel what is still running, stop the loop and join the thread (bounded by ``timeout_s``)."""
        if self._loop.is_closed():
            return

        async def _cancel_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=timeout_s) if tasks else None

        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(_cancel_rest(), self._loop).result(timeout=timeout_s + 1)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                # A task that ignores cancellation: the daemon thread is abandoned below.
                log.warning("tasks still running on %s after %.0f s; abandoning its thread", self._thread.name,
                            timeout_s)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=timeout_s)
        if not self._thread.is_alive():
            self._loop.close()
