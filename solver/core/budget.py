"""Time budget for a set of problems that arrive one at a time (the Kaggle gateway): no look-ahead, no going back.

The formula, with every quantity in seconds and measured on one ``Clock``::

    usable_end  = start + total_s − reserve_s            # the reserve is never planned for
    time_left   = usable_end − now
    n           = max(1, problems − finished)            # problems left, this one included
    seconds     = clamp(time_left − min_s × (n − 1), min_s, max_s)
    deadline    = min(now + seconds, cutoff)             # cutoff = start + cutoff_s (else usable_end)

Each problem still to come keeps a floor of ``min_s``; the current one gets whatever is above those floors, at
least ``min_s`` and at most ``max_s``. Time a problem does not use (its vote stopped early) flows to the next
ones, because the next budget is computed from the clock, not from a plan. After the hard cutoff a problem gets
no time at all and the caller answers the default at once.

Time banking (``banking``, AIMO3 prize notebooks): the cap is ``max_s + bank``, where the bank is what earlier
problems left of the allotment the formula gave them without it (each problem adds its unbanked allotment minus
what it used; one that went past it draws the bank down). An easy problem's unused minutes then go to a hard one,
not only to problems that hit the floors.

This is the AIMO3 public lineage's ``clamp(time_left − 300 s × (problems_left − 1), 300 s, 900 s)`` with its
three constants named (``min_s`` doubles as the per-problem floor, as there) plus a reserve and a hard cutoff
(AIMO2 2nd place stopped everything at 4 h 57 min of 5 h). AIMO2 2nd place instead picked a sample count from
tiers of remaining time with 11 min per problem; here the count follows from the deadline and the stopping
rule, so one formula covers both a fast machine and a slow one.

Every caller takes a problem's share the same way, through :func:`problem_slot`: the one-at-a-time runner of
``solver solve``, the Kaggle predictor (bounded by the gateway's per-call limit), and the simulator's day
(``solver.offline.sim.play.simulated_day``, which the trials and the replay check play).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from solver.config import BudgetConfig, Config
from solver.types import Clock


def problem_seconds(time_left_s: float, problems_left: int, min_s: float, max_s: float) -> float:
    """Seconds for the problem now starting: what is left above a floor of ``min_s`` per later problem.

    >>> problem_seconds(17700, 50, 300, 900)   # first of 50 in 5 h: 17700 − 49 × 300 = 3000, capped
    900.0
    >>> problem_seconds(1000, 2, 300, 900)     # the last but one: 1000 − 300
    700.0
    >>> problem_seconds(2000, 10, 300, 900)    # behind schedule: still the minimum
    300.0
    >>> problem_seconds(-50, 1, 300, 900)      # over time: the minimum (the cutoff bounds it further)
    300.0
    """
    later = max(0, problems_left - 1)
    return float(min(max_s, max(min_s, time_left_s - min_s * later)))


@dataclass(frozen=True)
class Allotment:
    """The budget of the problem now starting. Times are absolute on the manager's clock, durations seconds."""

    deadline: float | None  # None: no budget at all
    seconds: float | None  # deadline − now (0 after the cutoff)
    problems_left: int  # this one included
    time_left_s: float | None  # usable time before the reserve; negative when over time
    past_cutoff: bool
    unbanked_s: float | None = None  # the seconds the formula gives without the bank (banking only adds to them)


@dataclass(frozen=True)
class Slot:
    """One problem's share of the day, handed out as it starts: its absolute deadline on the budget's clock (None:
    nothing but its own stop ends it), the seconds from its start to that deadline (None without a budget), and
    whether the global cutoff had passed (the caller then answers the default at once)."""

    deadline: float | None
    allotted_s: float | None
    past_cutoff: bool = False


@dataclass(frozen=True)
class Spend:
    """One finished problem: what it was given and what it took (seconds)."""

    index: int
    allotted_s: float | None
    used_s: float


class BudgetManager:
    """Hands each problem a deadline from a total budget; see the module docstring for the formula.

    >>> from solver.core.clock import SimulatedClock
    >>> clock = SimulatedClock(0.0)
    >>> budget = BudgetManager(BudgetConfig(total_s=3600, problems=4, min_s=300, max_s=1200, reserve_s=600,
    ...                                     cutoff_s=3300), clock)
    >>> budget.next_deadline()              # 3000 − 3 × 300 = 2100, capped at 1200
    1200.0
    >>> clock.advance(1200); budget.finish_problem().used_s
    1200.0
    >>> budget.next_deadline() - clock.now()  # 1800 − 2 × 300
    1200.0
    >>> clock.advance(2050); budget.finish_problem().used_s
    2050.0
    >>> budget.next_deadline(), budget.past_cutoff()  # the minimum would end at 3550: the cutoff wins
    (3300.0, False)
    >>> clock.advance(60); budget.past_cutoff(), budget.allot().seconds
    (True, 0.0)
    """

    def __init__(self, config: BudgetConfig, clock: Clock, start: float | None = None, *, spent_s: float = 0.0,
                 done: int = 0) -> None:
        """``spent_s`` seconds and ``done`` problems carried over from earlier sessions of the same run (a
        resumed run): the budget's start moves back by ``spent_s`` and ``done`` problems count as finished.

        >>> from solver.core.clock import SimulatedClock
        >>> budget = BudgetManager(BudgetConfig(total_s=1000, problems=3, min_s=100, max_s=900, reserve_s=0),
        ...                        SimulatedClock(50.0), spent_s=600, done=1)
        >>> budget.elapsed(), budget.allot().problems_left, budget.next_deadline()  # 400 left, 2 problems
        (600.0, 2, 350.0)
        """
        # BudgetConfig validated its own fields (problems >= 1, 0 <= min_s <= max_s, ...) when it was built.
        if spent_s < 0 or done < 0:
            raise ValueError("spent_s and done must be >= 0")
        self.config = config
        self.clock = clock
        self.start = (clock.now() if start is None else start) - spent_s
        self.carried = done  # problems finished before this session
        self._finished: list[Spend] = []
        self._problem_start: float | None = None
        self._allotted: float | None = None
        self._unbanked: float | None = None
        self.bank = 0.0  # seconds banked by earlier problems (``banking``)

    # ---- the arithmetic -------------------------------------------------------------------------------

    @property
    def cutoff(self) -> float | None:
        """The absolute time after which every problem answers the default at once, or None."""
        c = self.config
        if c.cutoff_s is not None:
            return self.start + c.cutoff_s
        if c.total_s is not None:
            return self.start + c.total_s - c.reserve_s
        return None

    def elapsed(self) -> float:
        return self.clock.now() - self.start

    def past_cutoff(self) -> bool:
        cutoff = self.cutoff
        return cutoff is not None and self.clock.now() >= cutoff

    def allot(self) -> Allotment:
        """The budget of the problem now starting, computed from the clock and the problems finished."""
        c, now, cutoff = self.config, self.clock.now(), self.cutoff
        left = max(1, c.problems - self.carried - len(self._finished))
        if c.total_s is None:
            # No total: only an explicit cutoff bounds the problem.
            seconds = None if cutoff is None else max(0.0, cutoff - now)
            return Allotment(cutoff, seconds, left, None, self.past_cutoff())
        time_left = self.start + c.total_s - c.reserve_s - now
        unbanked = problem_seconds(time_left, left, c.min_s, c.max_s)
        cap = c.max_s + self.bank if c.banking else c.max_s
        deadline = now + problem_seconds(time_left, left, c.min_s, cap)
        if cutoff is not None:
            deadline = min(deadline, cutoff)
        deadline = max(deadline, now)  # past the cutoff: zero seconds, never a deadline in the past
        return Allotment(deadline, deadline - now, left, time_left, self.past_cutoff(),
                         min(unbanked, deadline - now))

    # ---- the per-problem cycle ------------------------------------------------------------------------

    def start_problem(self, bound: float | None = None) -> Slot:
        """The slot of the problem now starting, its deadline no later than ``bound`` (an absolute time the caller
        must end by, e.g. the gateway's per-call limit); marks the problem started. The budget keeps what its own
        formula allotted (banking counts from that), whatever the bound cut off."""
        allotment, now = self.allot(), self.clock.now()
        self._problem_start = now
        self._allotted = allotment.seconds
        self._unbanked = allotment.unbanked_s
        deadline = allotment.deadline
        if bound is not None:
            deadline = bound if deadline is None else min(deadline, bound)
        return Slot(deadline, None if deadline is None else max(0.0, deadline - now), allotment.past_cutoff)

    def next_deadline(self) -> float | None:
        """The absolute deadline for the problem now starting (None = no budget); marks the problem started."""
        return self.start_problem().deadline

    def finish_problem(self) -> Spend:
        """Counts the current problem as done, so later ones share what is left; returns what it took.

        >>> from solver.core.clock import SimulatedClock
        >>> clock = SimulatedClock(0.0)
        >>> budget = BudgetManager(BudgetConfig(total_s=10_000, problems=10, min_s=300, max_s=900, reserve_s=0,
        ...                                     banking=True), clock)
        >>> budget.next_deadline()
        900.0
        >>> clock.advance(200); budget.finish_problem().used_s, budget.bank
        (200.0, 700.0)
        >>> budget.next_deadline() - clock.now()  # 900 + the 700 banked
        1600.0
        >>> clock.advance(1300); budget.finish_problem().used_s, budget.bank  # drew 400 of the bank
        (1300.0, 300.0)
        """
        now = self.clock.now()
        started = self._problem_start if self._problem_start is not None else now
        spend = Spend(len(self._finished), self._allotted, now - started)
        if self.config.banking and self._unbanked is not None:
            self.bank = max(0.0, self.bank + self._unbanked - spend.used_s)
        self._finished.append(spend)
        self._problem_start, self._allotted, self._unbanked = None, None, None
        return spend

    @property
    def finished(self) -> tuple[Spend, ...]:
        return tuple(self._finished)


def budget_for(config: BudgetConfig, clock: Clock, start: float | None = None, *, spent_s: float = 0.0,
               done: int = 0) -> BudgetManager | None:
    """The one way a run gets its budget: the budget ``config`` sets (see :class:`BudgetManager` for the
    arguments), or None when it sets none (no total and no cutoff): every problem then runs to its own stop.

    >>> from solver.core.clock import SimulatedClock
    >>> budget_for(BudgetConfig(), SimulatedClock()), budget_for(BudgetConfig(cutoff_s=60), SimulatedClock()).cutoff
    (None, 60.0)
    """
    if config.total_s is None and config.cutoff_s is None:
        return None
    return BudgetManager(config, clock, start, spent_s=spent_s, done=done)


@contextlib.contextmanager
def problem_slot(budget: BudgetManager | None, bound: float | None = None) -> Iterator[Slot]:
    """One problem's turn in the day: its :class:`Slot` of ``budget`` (bounded by ``bound``, an absolute time the
    caller must end by), and the problem counted as finished when the block ends, also when it raised, so later
    problems share what is left. No budget (None): no deadline but ``bound``, and nothing allotted or counted.

    >>> from solver.core.clock import SimulatedClock
    >>> clock = SimulatedClock(0.0)
    >>> budget = BudgetManager(BudgetConfig(total_s=1000, problems=2, min_s=100, max_s=900, reserve_s=0), clock)
    >>> with problem_slot(budget, bound=500.0) as slot:   # the formula gives 900 s; the caller must end by 500
    ...     clock.advance(200)
    >>> slot, budget.finished[-1].used_s
    (Slot(deadline=500.0, allotted_s=500.0, past_cutoff=False), 200.0)
    >>> with problem_slot(budget) as slot:                # the last problem: everything left
    ...     pass
    >>> slot
    Slot(deadline=1000.0, allotted_s=800.0, past_cutoff=False)
    >>> with problem_slot(None) as slot:
    ...     pass
    >>> slot
    Slot(deadline=None, allotted_s=None, past_cutoff=False)
    """
    if budget is None:
        yield Slot(bound, None)
        return
    slot = budget.start_problem(bound)
    try:
        yield slot
    finally:
        budget.finish_problem()


def without_budget(config: Config) -> Config:
    """The config a cluster run uses: the same, with no time budget.

    A time budget spreads one engine's hours over problems that arrive one at a time; on a cluster problems run
    side by side on several engines, so the budget would mean nothing. (The Kaggle presets set one.)

    >>> without_budget(Config().replace({"budget.total_s": 3600, "budget.cutoff_s": 3500})).budget.total_s is None
    True
    >>> without_budget(Config()) == Config()
    True
    """
    if config.budget.total_s is None and config.budget.cutoff_s is None:
        return config
    return config.replace({"budget.total_s": None, "budget.cutoff_s": None})
