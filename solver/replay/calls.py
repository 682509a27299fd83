"""The one sandbox that answers calls from a recording: ``RecordedCalls``. The replay engine's recorded outputs
(``engine.replay_outputs``), the trace import's tool messages (``solver.recordings``) and a real engine's replayed
attempts (``solver.measure``'s workload: the day and the benchmarks) all run their calls in it.

Two things vary, each given when the sandbox is made:

- what the recording says for a call: a lookup from the call's code to the recorded execution (``Lookup``; its
  ``duration_s`` is the seconds the call takes), None for a call the recording does not hold. ``of_turns`` finds
  it by the turn this task was served last (``served()``: an engine serving recordings marks each request it
  serves in the consuming task, and the repetition runs its code in that same task right after the turn);
  ``in_sandbox`` takes any lookup (the workload's reads a key its scripted call names);
- how long the call takes: without an inner sandbox the call waits its recorded seconds times ``time_scale`` on the
  running loop (0: at once) and answers the recorded execution as it is, and a call the recording does not hold
  gets an error execution; with one (``in_sandbox``) it sleeps those seconds in the real sandbox, cut at
  ``limit_s``, and answers with the seconds the sandbox took, and a call the recording does not hold (a warm-up)
  runs there as it is.

Its sessions: with an inner sandbox, one of the inner sandbox's sessions per session asked for (a repetition's,
where the loop asks for one); without, itself (a recording has no state).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from solver.types import Execution

Key = tuple[str, int, int]  # (problem_id, repetition, turn)
Lookup = Callable[[str], Execution | None]  # a call's code -> the recorded execution (duration_s: its seconds)
_SERVED: contextvars.ContextVar[Key | None] = contextvars.ContextVar("replay_served", default=None)


def served() -> Key | None:
    """The recorded request this task was served last: ``(problem_id, repetition, turn)``, or None."""
    return _SERVED.get()


def mark_served(key: Key) -> None:
    """Called by an engine serving recordings as it serves ``key`` (in the consuming task, see ``served``)."""
    _SERVED.set(key)


def call_seconds(recorded_s: float, time_scale: float, limit_s: float | None = None) -> float:
    """Seconds a recorded call takes in a replay: its recorded seconds times ``time_scale``, at most ``limit_s``
    (a call that reached the sandbox's timeout when recorded takes just under it: its time, without the kill).

    >>> call_seconds(2.0, 0.5), call_seconds(2.0, 0.0), call_seconds(9.0, 1.0, limit_s=5.9), call_seconds(-1, 1)
    (1.0, 0.0, 5.9, 0.0)
    """
    seconds = max(0.0, recorded_s) * time_scale
    return seconds if limit_s is None else min(seconds, max(0.0, limit_s))


class RecordedCalls:
    """A ``Sandbox`` answering each call with what the recording says for it (module docstring).

    >>> import asyncio
    >>> four = Execution("print(2 + 2)", "ok", "4\\n", "", 1.5)
    >>> calls = RecordedCalls(lambda code: four if code == four.code else None, time_scale=0)  # at once
    >>> asyncio.run(calls.run("print(2 + 2)")) == four
    True
    >>> asyncio.run(calls.run("print(3)")).stderr
    'no recorded output for this call (turn None)'
    """

    def __init__(self, lookup: Lookup, inner: Any = None, time_scale: float = 1.0,
                 limit_s: float | None = None) -> None:
        if not time_scale >= 0:
            raise ValueError("a recorded call's time scale must be >= 0")
        self.lookup = lookup
        self.inner = inner  # the real sandbox (or one of its sessions) the calls sleep in; None: on the loop
        self.time_scale = time_scale
        self.limit_s = limit_s

    @classmethod
    def of_turns(cls, lookup: Callable[[Key, str], Execution | None], time_scale: float = 0.0) -> RecordedCalls:
        """Each call answered by ``lookup(served(), code)``: the execution recorded after the turn this task was
        served last (the replay engine's ``recorded_execution``), after its seconds times ``time_scale``."""

        def by_turn(code: str) -> Execution | None:
            key = served()
            return lookup(key, code) if key is not None else None

        return cls(by_turn, time_scale=time_scale)

    @classmethod
    def in_sandbox(cls, inner: Any, lookup: Lookup, timeout_s: float) -> RecordedCalls:
        """Each call held by ``lookup`` sleeps its seconds in ``inner`` (a real sandbox), cut just under the
        sandbox's ``timeout_s``, then answers as recorded; any other call runs in ``inner`` as it is."""
        return cls(lookup, inner=inner, limit_s=max(0.0, timeout_s - 0.1))

    async def run(self, code: str, *, timeout_s: float | None = None) -> Execution:
        found = self.lookup(code)
        inner = self.inner
        if inner is None:
            if found is None:
                return Execution(code, "error", "", f"no recorded output for this call (turn {served()})", 0.0)
            seconds = call_seconds(found.duration_s, self.time_scale, self.limit_s)
            if seconds > 0:
                await asyncio.sleep(seconds)
            return found
        if found is None:  # not a recorded call (a warm-up): run it as it is
            return await inner.run(code, timeout_s=timeout_s)
        seconds = call_seconds(found.duration_s, self.time_scale, self.limit_s)
        done = await inner.run(f"import time\ntime.sleep({seconds:.3f})", timeout_s=timeout_s)
        return replace(found, duration_s=done.duration_s)

    async def session(self) -> RecordedCalls:
        if self.inner is None:
            return self
        return RecordedCalls(self.lookup, await self.inner.session(), self.time_scale, self.limit_s)

    async def close(self) -> None:
        if self.inner is not None:
            await self.inner.close()
