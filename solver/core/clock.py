"""The solver's clocks. Deadlines throughout the solver are absolute times on a ``Clock``'s monotonic scale
(seconds): the machine's (``SystemClock``) when problems are solved, a simulated day's (``SimulatedClock``) when the
simulator and the replay check play one, a rehearsed Kaggle day's over several device calls (``DayClock``). (The
engine time model counts decode steps, not seconds of a day: ``solver.timing.steps.StepCounter``.)"""

from __future__ import annotations

import time
from dataclasses import dataclass

from solver.types import Clock


class SystemClock:
    def now(self) -> float:
        return time.monotonic()


@dataclass
class SimulatedClock:
    """A simulated day's clock: it moves only when the simulation says time has passed (a problem took its
    simulated seconds), so the budget manager hands out deadlines on simulated time.

    >>> c = SimulatedClock(100.0)
    >>> c.advance(2.5)
    >>> c.now()
    102.5
    """

    t: float = 0.0

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class DayClock:
    """The day's seconds (``solver.types.Clock``): one Kaggle day split over device calls. It starts at ``at`` (the
    seconds earlier calls spent) and stands still while paused: a resumed call keeps it paused until its engine is
    up (its imports and the engine's start are the device's doing: the day started one engine, in its first call).

    >>> c = DayClock(100.0, paused=True); a = c.now(); time.sleep(0.01); c.now() == a and abs(a - 100.0) < 1e-6
    True
    >>> c.resume(); c.now() - a < 0.5
    True
    """

    def __init__(self, at: float = 0.0, *, paused: bool = False) -> None:
        now = time.monotonic()
        self._offset = now - at
        self._paused_at: float | None = now if paused else None

    def now(self) -> float:
        return (self._paused_at if self._paused_at is not None else time.monotonic()) - self._offset

    def resume(self) -> None:
        if self._paused_at is not None:
            self._offset += time.monotonic() - self._paused_at
            self._paused_at = None


def remaining(clock: Clock, deadline: float | None) -> float | None:
    """Seconds left before ``deadline`` (never negative), or None when there is no deadline.

    >>> remaining(SimulatedClock(10.0), 12.0), remaining(SimulatedClock(10.0), 5.0), remaining(SimulatedClock(), None)
    (2.0, 0.0, None)
    """
    if deadline is None:
        return None
    return max(0.0, deadline - clock.now())
