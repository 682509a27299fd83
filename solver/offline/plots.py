"""Plots of a leaderboard simulation, as PNG files. matplotlib's file-only Agg backend is chosen inside each
function (never at import), so importing this module has no effect on an interactive session."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from solver.offline.summary import Summary


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_score_distributions(summaries: Sequence[Summary], path: Path) -> Path:
    """One horizontal bar chart of P(score = x) per setting, stacked vertically."""
    plt = _pyplot()
    k = summaries[0].problems
    fig, axes = plt.subplots(len(summaries), 1, figsize=(8, 1.6 * len(summaries) + 0.8), sharex=True,
                             squeeze=False)
    bins = np.arange(-0.5, k + 1.5, 1.0)
    for ax, s in zip(axes[:, 0], summaries):
        ax.hist(s.scores, bins=bins, density=True, color="tab:blue", alpha=0.8)
        ax.axvline(s.mean, color="black", linewidth=1)
        ax.set_title(f"{s.setting.label}  (mean {s.mean:.2f}, 5–95 %: {s.quantiles[0.05]:g}–"
                     f"{s.quantiles[0.95]:g})", fontsize=8)
        ax.set_yticks([])
    axes[-1, 0].set_xlabel(f"problems right out of {k}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_accuracy_vs_reps(summaries: Sequence[Summary], path: Path) -> Path:
    """Mean accuracy against repetitions, one line per other setting, with the 5–95 % score band shaded."""
    from solver.offline.summary import score_band

    plt = _pyplot()
    lines: dict[str, list[Summary]] = {}
    for s in summaries:
        key = s.setting.label.replace(f"reps={s.setting.reps} ", "")
        lines.setdefault(key, []).append(s)
    fig, ax = plt.subplots(figsize=(8, 5))
    for key, group in lines.items():
        group = sorted(group, key=lambda s: s.setting.reps)
        x = [s.setting.reps for s in group]
        bands = [score_band(s.scores, s.problems) for s in group]
        ax.plot(x, [b[0] for b in bands], marker="o", label=key)
        ax.fill_between(x, [b[1] for b in bands], [b[2] for b in bands], alpha=0.2)
    ax.set_xscale("log", base=2)
    ticks = sorted({s.setting.reps for s in summaries})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("repetitions per problem (at most)")
    ax.set_ylabel("accuracy (shaded: 5–95 % of leaderboard runs)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
