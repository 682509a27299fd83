"""The solver's clocks. Deadlines throughout the solver are absolute times on a ``Clock``'s monotonic scale
(seconds): the machine's (``SystemClock``) when problems are solved, a simulated day's (``SimulatedClock``) when the
simulator and the replay check play one. (The engine time model counts decode steps, not seconds of a day:
``solver.timing.steps.StepCounter``.)"""

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


def remaining(clock: Clock, deadline: float | None) -> float | None:
    """Seconds left before ``deadline`` (never negative), or None when there is no deadline.

    >>> remaining(SimulatedClock(10.0), 12.0), remaining(SimulatedClock(10.0), 5.0), remaining(SimulatedClock(), None)
    (2.0, 0.0, None)
    """
    if deadline is None:
        return None
    return max(0.0, deadline - clock.now())
