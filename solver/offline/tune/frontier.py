"""The Pareto frontier of simulated settings and the rule that picks one (pure).

A setting is on the frontier of a cost axis (repetitions launched, tokens or seconds per problem) when no other
setting costs at most as much and scores at least as well, one of them strictly. Costs and scores are the
trials' means; the 5-95 % band of each score is carried for the plots and tables, not used to rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from solver.errors import BadInput
from solver.offline.sim import Summary

Axis = Literal["reps", "tokens", "seconds"]
AXES: tuple[Axis, ...] = ("reps", "tokens", "seconds")
AXIS_LABELS: dict[Axis, str] = {"reps": "repetitions launched per problem", "tokens": "tokens per problem",
                                "seconds": "seconds per problem"}


def cost(summary: Summary, axis: Axis) -> float:
    """What one problem costs under ``summary``'s setting on ``axis`` (means over trials). Repetitions count
    every launched one, a cancelled one whole: compute was spent on it."""
    return {"reps": summary.launched, "tokens": summary.tokens, "seconds": summary.seconds}[axis]


def pareto(costs: Sequence[float], scores: Sequence[float]) -> list[bool]:
    """Which points no other point dominates (cost <= and score >=, one strictly). Equal points both stay.

    >>> pareto([1, 2, 3, 2, 4], [0.5, 0.7, 0.7, 0.6, 0.9])
    [True, True, False, False, True]
    """
    out = []
    for i, (c, s) in enumerate(zip(costs, scores)):
        dominated = any(c2 <= c and s2 >= s and (c2 < c or s2 > s)
                        for j, (c2, s2) in enumerate(zip(costs, scores)) if j != i)
        out.append(not dominated)
    return out


def frontier(summaries: Sequence[Summary], axis: Axis) -> list[Summary]:
    """The frontier's settings on ``axis``, cheapest first."""
    flags = pareto([cost(s, axis) for s in summaries], [s.mean for s in summaries])
    return sorted((s for s, f in zip(summaries, flags) if f), key=lambda s: (cost(s, axis), -s.mean))


def best_at(summaries: Sequence[Summary], axis: Axis, budget: float) -> Summary | None:
    """The highest expected score among settings costing at most ``budget`` on ``axis`` (cheaper on ties)."""
    inside = [s for s in summaries if cost(s, axis) <= budget + 1e-9]
    return max(inside, key=lambda s: (s.mean, -cost(s, axis)), default=None)


@dataclass(frozen=True)
class PickRule:
    """How ``solver tune`` chooses one setting.

    - ``tolerance``: the cheapest on ``axis`` whose expected accuracy is within ``value`` points (percent of
      the problems) of the best expected accuracy of all settings;
    - ``budget``: the best expected score costing at most ``value`` on ``axis``;
    - ``at_least``: the highest P(score >= ``value``), cheaper on ``axis`` among equals.
    """

    kind: Literal["tolerance", "budget", "at_least"] = "tolerance"
    value: float = 0.5
    axis: Axis = "reps"

    @property
    def text(self) -> str:
        """
        >>> PickRule().text
        'the cheapest setting (repetitions launched per problem) whose expected accuracy is within 0.5 points of the best'
        """
        where = AXIS_LABELS[self.axis]
        if self.kind == "tolerance":
            return (f"the cheapest setting ({where}) whose expected accuracy is within {self.value:g} points of "
                    "the best")
        if self.kind == "budget":
            return f"the best expected score at most {self.value:g} {where}"
        return f"the highest P(score >= {self.value:g}), the cheapest ({where}) among equals"


class PickError(BadInput, ValueError):
    """No setting satisfies the rule; the message is one line meant for the user."""


def pick(summaries: Sequence[Summary], rule: PickRule) -> Summary:
    """The setting ``rule`` chooses.

    >>> import numpy as np
    >>> from solver.offline.sim import Setting
    >>> def s(reps, mean, launched):
    ...     return Summary(Setting(reps, "majority", (), 1), 100, 10, mean, 1.0, {}, {}, launched, launched, 0, 0,
    ...                    0, {}, np.full(10, mean), np.zeros(0))
    >>> grid = [s(30, 62.0, 30.0), s(30, 61.7, 12.0), s(30, 61.0, 8.0)]
    >>> pick(grid, PickRule()).launched, pick(grid, PickRule("budget", 10)).launched
    (12.0, 8.0)
    """
    if not summaries:
        raise PickError("no settings to pick from")
    if rule.kind == "tolerance":
        best = max(s.mean / s.problems for s in summaries)
        near = [s for s in summaries if 100 * (best - s.mean / s.problems) <= rule.value + 1e-9]
        return min(near, key=lambda s: (cost(s, rule.axis), -s.mean))
    if rule.kind == "budget":
        chosen = best_at(summaries, rule.axis, rule.value)
        if chosen is None:
            cheapest = min(cost(s, rule.axis) for s in summaries)
            raise PickError(f"no setting costs at most {rule.value:g} {AXIS_LABELS[rule.axis]} (the cheapest "
                            f"costs {cheapest:.3g})")
        return chosen
    x = rule.value
    return max(summaries, key=lambda s: (float((s.scores >= x).mean()), -cost(s, rule.axis)))


def dominance_gap(summaries: Sequence[Summary], reference: Sequence[Summary], axis: Axis) -> float | None:
    """How far the other settings' frontier lies above the ``reference`` settings' frontier, in accuracy
    points, at the reference's own costs: min over reference frontier points (cost c, accuracy a) of the best
    other accuracy at cost <= c, minus a. >= 0 means the others dominate the reference (e.g. Adaptive-Consistency
    as the ``beta`` settings). Reference points cheaper than every other setting are left out (nothing to compare
    with there); None when no point is left."""
    ref_ids = {id(s) for s in reference}
    others = [s for s in summaries if id(s) not in ref_ids]
    gaps = []
    for r in frontier(reference, axis):
        best = best_at(others, axis, cost(r, axis))
        if best is not None:
            gaps.append(100 * (best.mean - r.mean) / r.problems)
    return min(gaps) if gaps else None
