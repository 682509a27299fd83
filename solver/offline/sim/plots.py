"""Plots of a leaderboard simulation, as PNG files (a tuning search's frontier: ``solver.offline.tune.plots``). matplotlib's file-only Agg backend is
chosen inside each function (never at import), so importing this module has no effect on an interactive session.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from solver.offline.sim.summary import Summary


def pyplot():  # type: ignore[no-untyped-def]
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
    plt = pyplot()
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
    return save_figure(plt, fig, path)


def save_figure(plt, fig, path: Path) -> Path:  # type: ignore[no-untyped-def]
    """Every plot is laid out, written at one resolution and closed (pyplot keeps open figures alive)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_accuracy_vs_reps(summaries: Sequence[Summary], path: Path) -> Path:
    """Mean accuracy against the repetitions each setting actually launched per problem, one line per policy
    (settings differing only in their repetition cap), with error bars and a shaded 5–95 % band. Stopping
    policies at one cap still spread out along x, so one ``--reps`` value is not a single dot."""
    plt = pyplot()
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
    zoom_accuracy(ax, summaries)
    ax.set_xlabel("repetitions launched per problem (mean)")
    ax.set_ylabel("accuracy % (bars and shading: 5–95 % of leaderboard runs)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return save_figure(plt, fig, path)


def zoom_accuracy(ax, summaries: Sequence[Summary]) -> None:  # type: ignore[no-untyped-def]
    k = summaries[0].problems
    low = min(100 * s.quantiles[0.05] / k for s in summaries)
    high = max(100 * s.quantiles[0.95] / k for s in summaries)
    pad = max(0.5, 0.05 * (high - low))
    ax.set_ylim(low - pad, high + pad)
