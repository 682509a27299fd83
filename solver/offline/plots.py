"""Plots of a leaderboard simulation and of a tuning search, as PNG files. matplotlib's file-only Agg backend is
chosen inside each function (never at import), so importing this module has no effect on an interactive session.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from solver.offline.frontier import Axis
    from solver.offline.summary import Summary


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _policy(s: Summary) -> str:
    """A setting's label without its repetition count: the policy a line of settings follows."""
    return s.setting.label.replace(f"reps={s.setting.reps} ", "")


def plot_score_distributions(summaries: Sequence[Summary], path: Path) -> Path:
    """One histogram of P(score = x) per setting, stacked vertically, the x axis zoomed to the scores that
    occur (a 0…K axis makes every distribution a sliver)."""
    plt = _pyplot()
    k = summaries[0].problems
    low = min(float(s.scores.min()) for s in summaries)
    high = max(float(s.scores.max()) for s in summaries)
    pad = max(1.0, 0.05 * (high - low))
    fig, axes = plt.subplots(len(summaries), 1, figsize=(8, 1.3 * len(summaries) + 0.9), sharex=True,
                             squeeze=False)
    bins = np.arange(np.floor(low) - 0.5, np.ceil(high) + 1.5, 1.0)
    for ax, s in zip(axes[:, 0], summaries):
        ax.hist(s.scores, bins=bins, density=True, color="tab:blue", alpha=0.8)
        ax.axvline(s.mean, color="black", linewidth=1)
        ax.axvspan(s.quantiles[0.05], s.quantiles[0.95], color="tab:orange", alpha=0.12, linewidth=0)
        ax.set_title(f"{s.setting.label}  (mean {s.mean:.2f}, 5–95 %: {s.quantiles[0.05]:g}–"
                     f"{s.quantiles[0.95]:g})", fontsize=8)
        ax.set_yticks([])
    axes[-1, 0].set_xlim(low - pad, high + pad)
    axes[-1, 0].set_xlabel(f"problems right out of {k} (line: mean; shaded: 5–95 % of leaderboard runs)")
    return _save(plt, fig, path)


def _save(plt, fig, path: Path) -> Path:  # type: ignore[no-untyped-def]
    """Every plot is laid out, written at one resolution and closed (pyplot keeps open figures alive)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_accuracy_vs_reps(summaries: Sequence[Summary], path: Path) -> Path:
    """Mean accuracy against the repetitions each setting actually launched per problem, one line per policy
    (settings differing only in their repetition cap), with error bars and a shaded 5–95 % band. Stopping
    policies at one cap still spread out along x, so one ``--reps`` value is not a single dot."""
    plt = _pyplot()
    lines: dict[str, list[Summary]] = {}
    for s in summaries:
        lines.setdefault(_policy(s), []).append(s)
    fig, ax = plt.subplots(figsize=(8.5, 5))
    for number, (key, group) in enumerate(lines.items()):
        group = sorted(group, key=lambda s: s.launched)
        colour = f"C{number % 10}"
        x = np.array([s.launched for s in group])
        k = group[0].problems
        mean = np.array([100 * s.mean / k for s in group])
        lo = np.array([100 * s.quantiles[0.05] / k for s in group])
        hi = np.array([100 * s.quantiles[0.95] / k for s in group])
        ax.errorbar(x, mean, yerr=[mean - lo, hi - mean], marker="o", color=colour, capsize=3, label=key)
        if len(group) > 1:
            ax.fill_between(x, lo, hi, color=colour, alpha=0.12, linewidth=0)
    _zoom_accuracy(ax, summaries)
    ax.set_xlabel("repetitions launched per problem (mean)")
    ax.set_ylabel("accuracy % (bars and shading: 5–95 % of leaderboard runs)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def _zoom_accuracy(ax, summaries: Sequence[Summary]) -> None:  # type: ignore[no-untyped-def]
    k = summaries[0].problems
    low = min(100 * s.quantiles[0.05] / k for s in summaries)
    high = max(100 * s.quantiles[0.95] / k for s in summaries)
    pad = max(0.5, 0.05 * (high - low))
    ax.set_ylim(low - pad, high + pad)


def plot_frontier(summaries: Sequence[Summary], frontiers: dict[Axis, list[Summary]], full: Sequence[Summary],
                  adaptive: Sequence[Summary], chosen: Summary, path: Path) -> Path:
    """Cost against expected accuracy, one panel per cost axis: every setting as a grey dot, the frontier as a
    line with 5–95 % bars, running every repetition (full N) and Adaptive-Consistency (``beta``) as references,
    the chosen setting as a star."""
    from solver.offline.frontier import AXIS_LABELS, cost, frontier

    plt = _pyplot()
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
        _zoom_accuracy(ax, summaries)
        ax.set_xlabel(AXIS_LABELS[axis])
        ax.set_ylabel("expected accuracy %")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Cost against expected accuracy ({k} problems per leaderboard run, "
                 f"{summaries[0].trials} trials per setting)", fontsize=10)
    return _save(plt, fig, path)


def _short(s: Summary) -> str:
    """
    >>> from solver.offline.trials import Setting
    >>> from types import SimpleNamespace
    >>> _short(SimpleNamespace(setting=Setting(16, "majority", ("margin:3", "lossless"), 1)))
    'N16 margin:3,lossless'
    """
    return f"N{s.setting.reps} {s.setting.stop_label}"
