"""The tuning search's plot, as a PNG file: cost against expected accuracy with the frontier and the pick
(matplotlib's Agg backend chosen inside, as ``solver.offline.sim.plots`` does)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from solver.offline.sim import Summary, pyplot, save_figure, zoom_accuracy
from solver.offline.tune.frontier import AXIS_LABELS, Axis, cost, frontier


def plot_frontier(summaries: Sequence[Summary], frontiers: dict[Axis, list[Summary]], full: Sequence[Summary],
                  adaptive: Sequence[Summary], chosen: Summary, path: Path) -> Path:
    """Cost against expected accuracy, one panel per cost axis: every setting as a grey dot, the frontier as a
    line with 5–95 % bars, running every repetition (full N) and Adaptive-Consistency (``beta``) as references,
    the chosen setting as a star."""
    plt = pyplot()
    axes_used = list(frontiers)
    fig, axes = plt.subplots(1, len(axes_used), figsize=(7.5 * len(axes_used), 5.2), squeeze=False)
    k = summaries[0].problems

    def acc(s: Summary) -> float:
        return 100 * s.mean / k

    for ax, axis in zip(axes[0], axes_used):
        ax.scatter([cost(s, axis) for s in summaries], [acc(s) for s in summaries], s=12, color="0.7",
                   label="every setting searched", zorder=1)
        front = frontiers[axis]
        x = [cost(s, axis) for s in front]
        y = np.array([acc(s) for s in front])
        lo = np.array([100 * s.quantiles[0.05] / k for s in front])
        hi = np.array([100 * s.quantiles[0.95] / k for s in front])
        ax.errorbar(x, y, yerr=[y - lo, hi - y], marker="o", color="tab:blue", capsize=3, zorder=3,
                    label="frontier (5–95 % bars)")
        if full:
            ordered = sorted(full, key=lambda s: cost(s, axis))
            ax.plot([cost(s, axis) for s in ordered], [acc(s) for s in ordered], marker="s", linestyle="--",
                    color="black", zorder=2, label="every repetition (no stop)")
        if adaptive:
            ac = frontier(adaptive, axis)
            ax.plot([cost(s, axis) for s in ac], [acc(s) for s in ac], marker="^", linestyle=":",
                    color="tab:orange", zorder=2, label="Adaptive-Consistency (beta) frontier")
        ax.scatter([cost(chosen, axis)], [acc(chosen)], marker="*", s=260, color="tab:red", zorder=4,
                   label=f"chosen: {chosen.setting.label}")
        labelled: set[int] = set()
        for s in front:  # the cheapest frontier point of each repetition cap, so labels do not pile up
            if s.setting.reps not in labelled:
                labelled.add(s.setting.reps)
                ax.annotate(_short(s), (cost(s, axis), acc(s)), fontsize=7, textcoords="offset points",
                            xytext=(5, -11))
        zoom_accuracy(ax, summaries)
        ax.set_xlabel(AXIS_LABELS[axis])
        ax.set_ylabel("expected accuracy %")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Cost against expected accuracy ({k} problems per leaderboard run, "
                 f"{summaries[0].trials} trials per setting)", fontsize=10)
    return save_figure(plt, fig, path)


def _short(s: Summary) -> str:
    """
    >>> from solver.offline.sim import Setting
    >>> from types import SimpleNamespace
    >>> _short(SimpleNamespace(setting=Setting(16, "majority", ("margin:3", "lossless"), 1)))
    'N16 margin:3,lossless'
    """
    return f"N{s.setting.reps} {s.setting.stop_label}"
