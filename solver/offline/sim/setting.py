"""A point of the simulator's grid (:class:`Setting`: the voter, the stoppers, both rounds' repetitions, the workers
and the time policy, laid over the runs' config) and what a chunk of trials plays (:class:`Plan`): the settings, the
prepared problems, how repetitions are drawn (``Draw``), the first run's order (``Order``) and the scoring rule with
its seed policy (``SeedPolicy``). The draws are ``solver.offline.sim.draws``'; the trials
``solver.offline.sim.trials``'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, get_args

from solver.config import Config
from solver.offline.sim.pools import Prepared
from solver.offline.sim.scoring import DEFAULT_SCORING, SCORINGS, Scoring
from solver.timing.model import EngineTimeModel

Draw = Literal["auto", "bootstrap", "subset"]
Order = Literal["random", "hard-first", "hard-last", "hard-middle"]
ORDERS: tuple[str, ...] = get_args(Order)
SeedPolicy = Literal["fixed", "per-run"]
SEED_POLICIES: tuple[str, ...] = get_args(SeedPolicy)


@dataclass(frozen=True)
class Setting:
    """One point of the grid. ``stoppers`` empty = run every repetition; ``budget_s`` None = no time budget;
    ``retry``: a second round of that many (``solve.retry_reps``); ``clamp``: the budget's (min_s, max_s), None =
    the config's; ``banking``: time banking (``budget.banking``)."""

    reps: int
    voter: str
    stoppers: tuple[str, ...]
    workers: int
    budget_s: float | None = None
    retry: int = 0
    clamp: tuple[float, float] | None = None
    banking: bool = False

    @property
    def draws(self) -> int:
        """Repetitions a trial draws for one problem: both rounds."""
        return self.reps + self.retry

    @property
    def label(self) -> str:
        """
        >>> Setting(16, "majority", ("beta", "esc:5"), 8, 3600.0).label
        'reps=16 voter=majority stop=beta,esc:5 workers=8 budget=3600s'
        >>> Setting(8, "majority", ("agree:4",), 8, 18000.0, 8, (300.0, 900.0), True).label
        'reps=8 voter=majority stop=agree:4 workers=8 budget=18000s retry=8 clamp=300-900 banking'
        """
        budget = "-" if self.budget_s is None else f"{self.budget_s:g}s"
        text = (f"reps={self.reps} voter={self.voter} stop={self.stop_label} workers={self.workers} "
                f"budget={budget}")
        return text + self.policy_label

    @property
    def policy_label(self) -> str:
        """The time policy beyond the budget (a second round, the clamp, banking), as the label ends."""
        parts = [f" retry={self.retry}" if self.retry else "",
                 f" clamp={self.clamp[0]:g}-{self.clamp[1]:g}" if self.clamp else "",
                 " banking" if self.banking else ""]
        return "".join(parts)

    def config(self, base: Config, problems: int | None = None) -> Config:
        """``base`` with what this setting decides laid over it: the voter, the stoppers, the repetitions of both
        rounds, the workers and the budget (its total, the clamp, banking and, given, the ``problems`` it is shared
        among; none at all when ``budget_s`` is None). That is the config a run of the setting would have: its rules
        are ``Rules.of`` it and its budget is its ``budget`` section, as in the running loop.

        >>> c = Setting(6, "majority", ("agree:3",), 2, 600.0, 4, (60.0, 300.0)).config(Config(), 10)
        >>> c.solve.reps, c.solve.retry_reps, c.stop.stoppers, c.budget.total_s, c.budget.problems, c.budget.max_s
        (6, 4, ('agree:3',), 600.0, 10, 300.0)
        >>> Setting(6, "majority", (), 2).config(Config().replace({"budget.cutoff_s": 60})).budget.cutoff_s is None
        True
        """
        # Section by section (each validates itself): Config.replace would parse the whole config again, ~2 ms.
        if self.budget_s is None:
            budget = replace(base.budget, total_s=None, cutoff_s=None)
        else:
            budget = replace(base.budget, total_s=self.budget_s, banking=self.banking,
                             problems=base.budget.problems if problems is None else problems)
            if self.clamp is not None:
                budget = replace(budget, min_s=self.clamp[0], max_s=self.clamp[1])
        return replace(base, vote=replace(base.vote, voter=self.voter), stop=replace(base.stop, stoppers=self.stoppers),
                       solve=replace(base.solve, reps=self.reps, retry_reps=self.retry, workers=self.workers),
                       budget=budget)

    @property
    def rules_key(self) -> tuple[str, tuple[str, ...], int, int]:
        """What of the setting its rules depend on (settings that differ only in workers or budget share rules,
        and so one stop table)."""
        return self.voter, self.stoppers, self.reps, self.retry

    @property
    def stop_label(self) -> str:
        """The stoppers as every table and plot names them.

        >>> Setting(8, "majority", (), 1).stop_label, Setting(8, "majority", ("margin:3", "lossless"), 1).stop_label
        ('none', 'margin:3,lossless')
        """
        return ",".join(self.stoppers) or "none"


def grid(reps: Sequence[int], voters: Sequence[str], stoppers: Sequence[tuple[str, ...]],
         workers: Sequence[int], budgets: Sequence[float | None], retries: Sequence[int] = (0,),
         clamps: Sequence[tuple[float, float] | None] = (None,), banking: Sequence[bool] = (False,)) -> list[Setting]:
    """Every combination, repetitions varying fastest (the order plots use).

    >>> [s.reps for s in grid([8, 16], ["majority"], [(), ("beta",)], [4], [None])]
    [8, 16, 8, 16]
    """
    return [Setting(n, v, s, w, b, r, c, k) for v in voters for s in stoppers for w in workers for b in budgets
            for r in retries for c in clamps for k in banking for n in reps]


@dataclass(frozen=True)
class Plan:
    """Everything a chunk of trials needs; plain data so it pickles to a worker process."""

    prepared: list[Prepared]
    settings: list[Setting]
    config: Config  # the runs' config: each setting is laid over it (``Setting.config``)
    problems: int  # K
    draw: Draw
    model: EngineTimeModel | None = None  # None: each repetition's recorded seconds
    scoring: Scoring = SCORINGS[DEFAULT_SCORING]
    machine_speed: float = 0.0  # a run's seconds are multiplied by a factor drawn uniformly in 1 ± this
    order: Order = "random"  # the first run's order: the gateway's shuffle, or the hard problems placed (stress)

    @property
    def seed_policy(self) -> SeedPolicy:
        """How a rule's second run draws (``sampling.seed_policy`` of the runs' config, as the predictor reads it)."""
        return self.config.sampling.seed_policy


def distinct_runs(plan: Plan) -> int:
    """The runs of a day that draw apart: the rule's runs under per-run seeds; one under fixed seeds, whose second
    run replays the first's draws (so a day draws a problem's repetitions once, not twice)."""
    return plan.scoring.runs if plan.seed_policy == "per-run" else 1
