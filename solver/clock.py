"""Clocks. Deadlines throughout the solver are absolute times on a ``Clock``'s monotonic scale (seconds)."""

from __future__ import annotations

import time
from dataclasses import dataclass


class SystemClock:
    def now(self) -> float:
        return time.monotonic()


@dataclass
class FakeClock:
    """A clock that moves only when told to, for budget and deadline tests without sleeping.

    >>> c = FakeClock(100.0)
    >>> c.advance(2.5)
    >>> c.now()
    102.5
    """

    t: float = 0.0

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def remaining(clock: SystemClock | FakeClock, deadline: float | None) -> float | None:
    """Seconds left before ``deadline`` (never negative), or None when there is no deadline.

    >>> remaining(FakeClock(10.0), 12.0), remaining(FakeClock(10.0), 5.0), remaining(FakeClock(), None)
    (2.0, 0.0, None)
    """
    if deadline is None:
        return None
    return max(0.0, deadline - clock.now())
