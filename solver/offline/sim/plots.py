"""Plots of a leaderboard simulation, as PNG files (a tuning search's frontier: ``solver.offline.tune.plots``). matplotlib's file-only Agg backend is
chosen inside each function (never at import), so importing this module has no effect on an interactive session.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from solver.offline.sim.scoring import Scoring
    from solver.offline.sim.summary import Summary


def pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _policy(s: Summary) -> str:
    """A setting's label without its repetition count: the policy a line of settings follows."""
    return s.setting.label.replace(f"reps={s.setting.reps} ", "")


def plot_score_distributions(summaries: Sequence[Summary], path: Path, rule: Scoring | None = None) -> Path:
    """One histogram of P(score = x) per setting, stacked vertically, the x axis zoomed to the scores that
    occur (a 0…K axis makes every distribution a sliver), the line drawn where it falls in view. Under a rule of
    two runs (AIMO3's private leaderboard) each setting's first run alone (the public leaderboard's one run) on
    the left, the rule's score on the right."""
    plt = pyplot()
    k = summaries[0].problems
    two = rule is not None and rule.runs > 1
    panels = [(s.first_scores, s.first_p_line, rule.first_run_name if rule else "one run") for s in summaries]
    if two:
        assert rule is not None
        ruled = [(s.scores, s.p_line, rule.name) for s in summaries]
    low = min(float(s.first_scores.min()) for s in summaries)
    high = max(float(s.first_scores.max()) for s in summaries)
    if two:
        low, high = min(low, min(float(s.scores.min()) for s in summaries)), max(high, max(float(s.scores.max())
                                                                                         for s in summaries))
    line = summaries[0].line
    if line <= k:  # the view takes the line in: where the scores fall short of it is the point
        low, high = min(low, line), max(high, line)
    pad = max(1.0, 0.05 * (high - low))
    columns = 2 if two else 1
    fig, axes = plt.subplots(len(summaries), columns, figsize=(8 * columns, 1.3 * len(summaries) + 0.9),
                             sharex=True, squeeze=False)
    for row, s in enumerate(summaries):
        cells = [panels[row]] + ([ruled[row]] if two else [])
        for column, (scores, p_line, name) in enumerate(cells):
            step = 0.5 if two and column == 1 else 1.0
            bins = np.arange(np.floor(low) - step / 2, np.ceil(high) + 1.5 * step, step)
            ax = axes[row, column]
            ax.hist(scores, bins=bins, density=True, color="tab:blue" if column == 0 else "tab:purple", alpha=0.8)
            ax.axvline(float(np.mean(scores)), color="black", linewidth=1)
            q05, q95 = np.quantile(scores, [0.05, 0.95])
            ax.axvspan(float(q05), float(q95), color="tab:orange", alpha=0.12, linewidth=0)
            if line <= k:
                ax.axvline(line, color="tab:red", linestyle="--", linewidth=1.2)
            title = (f"{s.setting.label}  (mean {float(np.mean(scores)):.2f}, 5–95 %: {q05:g}–{q95:g}, "
                     f"P(≥{line:g}) {p_line:.2f})")
            ax.set_title(f"{name}: {title}" if two else title, fontsize=8)
            ax.set_yticks([])
    for column in range(columns):
        axes[-1, column].set_xlim(low - pad, high + pad)
        axes[-1, column].set_xlabel(f"score out of {k} (black: mean; shaded: 5–95 % of days; red dashes: the line "
                                    f"{line:g})", fontsize=8)
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
