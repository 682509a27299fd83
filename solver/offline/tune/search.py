"""``solver tune``: search stopping rule x parameters x voter x repetitions (x workers, x budget) on recorded runs,
report the Pareto frontier of expected score against repetitions, tokens and seconds per problem, pick one
setting by a stated rule, and write it as a config file ``solver solve --config`` takes.

Every setting is played on the same draws (common random numbers: the leaderboard simulator's trials, chunked
over joblib processes), so the frontier's differences are not noise between settings. The search is the
simulator's, so what it does not model (see ``solver/offline/sim/simulate.py``) the search does not see either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from solver.config import Config
from solver.files import atomic_write
from solver.offline.tune.frontier import AXES, Axis, PickRule, cost, dominance_gap, frontier, pick
from solver.offline.sim import (ProblemPool, SimulationError, SimulationReport, SimulationRequest, Summary, load,
                                simulate_pools, validate)

# The default grid is built from the stopping registry (``solver.core.stopping.STOPPERS``), so a rule registered
# there is searched unless it is named in NOT_TUNED, with the reason: each rule at the parameters below, a few
# around its published value (a rule with a parameter not listed here is searched at its default, one without
# one as it is), plus the empty setting (every repetition runs).
GRID_PARAMETERS: dict[str, tuple[str, ...]] = {
    "beta": ("0.8", "0.9", "0.95", "0.99"), "margin": ("2", "3", "4", "5"), "agree": ("3", "4", "5"),
    "ztest": ("0.05", "0.1"), "esc": ("3", "5"), "hold": ("0.8", "0.9", "0.95", "0.99"), "futile": ("5", "10"),
}
NOT_TUNED: dict[str, str] = {
    # make_stopper adds it to every setting: the empty setting () is this rule alone
    "max_reps": "always on",
}


def default_stoppers() -> tuple[tuple[str, ...], ...]:
    """The default grid (comment above), in the registry's order.

    >>> grid = default_stoppers()
    >>> grid[0], ("lossless",) in grid, ("futile:10",) in grid, any(s[0].startswith("max_reps") for s in grid[1:])
    ((), True, True, False)
    """
    from solver.core.stopping import STOPPERS

    grid: list[tuple[str, ...]] = [()]
    for name in STOPPERS.names():
        if name in NOT_TUNED:
            continue
        points = GRID_PARAMETERS.get(name)
        grid += [(f"{name}:{point}",) for point in points] if points else [(name,)]
    return tuple(grid)


DEFAULT_STOPPERS = default_stoppers()
DEFAULT_TRIALS = 200
ADAPTIVE_CONSISTENCY = "beta"  # the registry name of the Adaptive-Consistency rule, the published reference


def default_reps(sizes: Sequence[int], configured: int | None = None) -> tuple[int, ...]:
    """Repetition caps to search: a quarter, a third, half, two thirds and all of the median problem's recorded
    repetitions (so the largest cap is drawn exactly for half the problems, whatever the sparsest one has), and the
    config's own ``solve.reps`` (the policy being tuned; the problems with fewer recorded are topped up and the
    report says what that costs).

    >>> default_reps([30] * 88), default_reps([4, 4, 5, 6]), default_reps([1] * 8 + [5] * 30 + [9] * 15, 8)
    ((7, 10, 15, 20, 30), (1, 2, 3, 5), (1, 2, 3, 5, 8))
    """
    ordered = sorted(sizes)
    cap = max(1, ordered[len(ordered) // 2]) if ordered else 1
    caps = {max(1, cap * a // b) for a, b in ((1, 4), (1, 3), (1, 2), (2, 3), (1, 1))}
    return tuple(sorted(caps | ({configured} if configured else set())))


@dataclass(frozen=True)
class TuneReport:
    simulation: SimulationReport
    rule: PickRule
    choice: Summary
    frontiers: dict[Axis, list[Summary]]  # the axes whose costs were recorded (tokens and seconds may be zero)
    full: list[Summary]  # settings that run every repetition: the reference line
    adaptive: list[Summary]  # Adaptive-Consistency settings (beta:p)
    adaptive_gap: dict[Axis, float | None]  # the other rules' frontier above Adaptive-Consistency's, in points
    workers_given: bool  # whether --workers was searched (else the chosen config leaves workers to the preset)

    @property
    def summaries(self) -> list[Summary]:
        return self.simulation.summaries


def tune(req: SimulationRequest, rule: PickRule,
         loaded: tuple[list[ProblemPool], Config] | None = None) -> TuneReport:
    """Search ``req``'s grid (empty reps / stoppers: :func:`default_reps` / :data:`DEFAULT_STOPPERS`) and pick
    by ``rule``; ``loaded`` is :func:`~solver.offline.sim.simulate.load`'s result when the caller read the runs
    already. Errors are one-line ``SimulationError``s or ``PickError``s, raised before anything is written."""
    validate(req)
    pools, config = load(req) if loaded is None else loaded
    sizes = [len(p.repetitions) for p in pools]
    if not sizes or max(sizes) == 0:
        raise SimulationError("the runs hold no finished repetitions")
    full_req = replace(req, reps=req.reps or default_reps(sizes, config.solve.reps),
                       stoppers=req.stoppers or DEFAULT_STOPPERS)
    starved = [b for b in (req.budgets or (config.budget.total_s,)) if b is not None and b <= config.budget.reserve_s]
    if starved:
        raise SimulationError(f"--budget {starved[0]:g} s is not above budget.reserve_s = "
                              f"{config.budget.reserve_s:g} s: no problem would get any time (lower it with --set "
                              "budget.reserve_s=SECONDS)")
    report = simulate_pools(full_req, pools, config)
    summaries = report.summaries
    axes = [a for a in AXES if any(cost(s, a) > 0 for s in summaries)]
    if rule.axis not in axes:
        raise SimulationError(f"the runs recorded no {rule.axis} (imported samples have none): pick on "
                              f"--axis {' or '.join(axes)}")
    choice = pick(summaries, rule)
    full = [s for s in summaries if not s.setting.stoppers]
    adaptive = [s for s in summaries if s.setting.stoppers
                and all(x.split(":")[0] == ADAPTIVE_CONSISTENCY for x in s.setting.stoppers)]
    return TuneReport(report, rule, choice, {a: frontier(summaries, a) for a in axes}, full, adaptive,
                      {a: dominance_gap(summaries, adaptive, a) for a in axes}, bool(req.workers))


BUDGET_KEYS = ("total_s", "problems", "min_s", "max_s", "reserve_s", "cutoff_s", "banking")


def chosen_config(report: TuneReport) -> dict[str, object]:
    """The chosen setting as the config keys it decides (a file ``solver solve --config`` and the Kaggle predictor
    layer on a preset), read from the config it was simulated with (``Setting.config``: the one place a setting is
    laid over a config), so the file runs what was simulated. Workers are written only when the search varied them,
    or searched auto workers: otherwise they are the hardware's, not the policy's. Under a budget the time policy is
    written whole (the clamp, banking), so the file does not depend on the preset's budget section; a setting
    simulated without one leaves the budget to the preset (writing none would take a competition's budget away)."""
    s = report.choice.setting
    config = s.config(report.simulation.config, report.choice.problems)
    solve: dict[str, object] = {"reps": config.solve.reps, "retry_reps": config.solve.retry_reps}
    if report.workers_given:
        solve["workers"] = config.solve.workers
    elif report.simulation.config.solve.workers == 0:
        solve["workers"] = 0  # searched with auto workers (--set solve.workers=0): run with them
    data: dict[str, object] = {"vote": {"voter": config.vote.voter}, "stop": {"stoppers": list(config.stop.stoppers)},
                               "solve": solve}
    if s.budget_s is not None:
        data["budget"] = {key: getattr(config.budget, key) for key in BUDGET_KEYS}
    return data


def config_text(report: TuneReport) -> str:
    """:func:`chosen_config` as YAML, headed by comments saying how it was chosen and what it is expected to do."""
    c = report.choice
    k = c.problems
    head = [
        f"# Chosen by solver tune from {', '.join(str(p) for p in report.simulation.request.run_dirs)}",
        f"# rule: {report.rule.text}",
        f"# expected accuracy {100 * c.mean / k:.2f} % (5-95 %: {100 * c.quantiles[0.05] / k:.1f}-"
        f"{100 * c.quantiles[0.95] / k:.1f} %) on {k} problems; {c.launched:.2f} repetitions launched per problem",
        f"# scoring {report.simulation.rule.name}: P(score >= {c.line:g}) = {c.p_line:.2f}",
        f"# {report.simulation.line_text}",
        "# use: solver solve DATA --config THIS_FILE, solver kaggle-local ... --config THIS_FILE, or the Kaggle",
        "# notebook's CONFIG (layered on the preset; the notebook's OVERRIDES over it)",
    ]
    return "\n".join(head) + "\n" + yaml.safe_dump(chosen_config(report), sort_keys=False)


def write_config(report: TuneReport, path: Path) -> Path:
    """The chosen config, replaced whole (atomically)."""
    atomic_write(path, config_text(report))
    return path


def stoppers_label(s: Summary) -> str:
    """
    >>> from solver.offline.sim import Setting
    >>> from types import SimpleNamespace
    >>> stoppers_label(SimpleNamespace(setting=Setting(8, "majority", (), 1)))
    'none'
    """
    return s.setting.stop_label
