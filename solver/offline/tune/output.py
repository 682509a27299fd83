"""A tuning search written out: tune.md (frontier tables, the pick, the calibration check), settings.csv (every
setting searched), chosen.yaml (the config), the plots, and report.html (all of it in one self-contained page)."""

from __future__ import annotations

import math
from pathlib import Path

from solver.files import atomic_write
from solver.offline.tune.frontier import AXIS_LABELS, Axis, cost, frontier
from solver.offline.tune.html_report import Image, Page, Preformatted, Section, Table, render
from solver.runlog import markdown_table
from solver.offline.sim import (DIFFERENCE_NOTE, Summary, calibration_lines, data_flag, difference_rows,
                                difference_table, jitter_text, summary_rows, timing_text)
from solver.offline.tune.search import TuneReport, config_text, stoppers_label, write_config

PLOTS = ("frontier.png", "accuracy_vs_reps.png", "scores.png")
HISTOGRAMS_MAX = 10  # settings in the score histograms: the frontier's, the references and the chosen one


def accuracy(s: Summary) -> float:
    return 100 * s.mean / s.problems


def band(s: Summary) -> str:
    """
    >>> import numpy as np
    >>> from solver.offline.sim import Setting
    >>> band(Summary(Setting(1, "majority", (), 1), 50, 3, 30.0, 1.0, {0.05: 29.0, 0.95: 31.0}, {}, 1, 1, 0, 0, 0,
    ...              {}, np.zeros(3), np.zeros(0)))
    '58.0–62.0'
    """
    k = s.problems
    return f"{100 * s.quantiles[0.05] / k:.1f}–{100 * s.quantiles[0.95] / k:.1f}"


def frontier_rows(report: TuneReport, axis: Axis) -> tuple[list[str], list[list[object]]]:
    """The frontier of ``axis`` as a table, cheapest first, with the chosen setting marked."""
    head = ["#", "N", "voter", "stop", "W, budget, time policy", AXIS_LABELS[axis], "accuracy %", "5–95 %",
            f"P(≥{report.simulation.request.line:g})", "vs every repetition (points)", "vs the best (score, 95 %)",
            "data", "chosen"]
    best_full = max((accuracy(s) for s in report.full), default=math.nan)
    number = {id(s): i for i, s in enumerate(report.summaries, 1)}
    rows: list[list[object]] = []
    for s in report.frontiers[axis]:
        rows.append([number[id(s)], s.setting.reps, s.setting.voter, stoppers_label(s), time_policy(s),
                     _cost(s, axis), f"{accuracy(s):.2f}", band(s), f"{s.p_line:.2f}",
                     f"{accuracy(s) - best_full:+.2f}" if not math.isnan(best_full) else "-", versus_best(s),
                     data_flag(s), "★" if s is report.choice else ""])
    return head, rows


def versus_best(s: Summary) -> str:
    """A frontier cell: the setting minus the best, its interval, and whether the data separates them.

    >>> from types import SimpleNamespace
    >>> from solver.offline.sim import Difference
    >>> versus_best(SimpleNamespace(vs_best=None)), versus_best(SimpleNamespace(vs_best=Difference(1, 0, -0.5,
    ...     (-2.0, 1.0), 0.75, 30.2)))
    ('best', '-0.50 [-1.25, +0.25] not separable (~31 attempts/problem at 80 % power)')
    """
    d = s.vs_best
    if d is None:
        return "best"
    if d.separable:
        return f"{d.text()} separable"
    if math.isinf(d.attempts or 0.0):
        return f"{d.text()} " + ("same draws" if d.half == 0 else "not separable")
    if d.attempts is None:
        return f"{d.text()} not separable (more trials would tell)"
    return f"{d.text()} not separable (~{math.ceil(d.attempts)} attempts/problem at 80 % power)"


def time_policy(s: Summary) -> str:
    """Workers, the budget and the time policy, as a table cell.

    >>> from solver.offline.sim import Setting
    >>> from types import SimpleNamespace
    >>> time_policy(SimpleNamespace(setting=Setting(8, "majority", (), 8, 18000.0, 4, None, True)))
    'W=8, 18000 s, retry=4 banking'
    """
    t = s.setting
    budget = "no budget" if t.budget_s is None else f"{t.budget_s:g} s"
    return f"W={t.workers}, {budget}" + (f", {t.policy_label.strip()}" if t.policy_label else "")


def reference_rows(report: TuneReport) -> tuple[list[str], list[list[object]]]:
    """Every repetition run (no stop) at each cap, and the Adaptive-Consistency settings on their frontier."""
    head = ["reference", "N", "stop", "repetitions launched", "accuracy %", "5–95 %"]
    rows: list[list[object]] = []
    for s in sorted(report.full, key=lambda s: s.setting.reps):
        rows.append(["every repetition", s.setting.reps, "none", f"{s.launched:.2f}", f"{accuracy(s):.2f}",
                     band(s)])
    for s in frontier(report.adaptive, "reps") if report.adaptive else []:
        rows.append(["Adaptive-Consistency", s.setting.reps, stoppers_label(s), f"{s.launched:.2f}",
                     f"{accuracy(s):.2f}", band(s)])
    return head, rows


def _cost(s: Summary, axis: Axis) -> str:
    value = cost(s, axis)
    return f"{value:.2f}" if axis == "reps" else f"{value:.0f}" if axis == "tokens" else f"{value:.1f}"


def wrong_problems(report: TuneReport, limit: int = 40) -> tuple[list[str], list[list[object]]]:
    """Problems the chosen setting gets right in under half of its trials, worst first: the reference, how often
    the chosen setting and running every repetition answer right, and the recorded votes."""
    sim = report.simulation
    chosen = report.choice
    full = next((s for s in sorted(report.full, key=lambda s: -s.setting.reps)
                 if s.setting.voter == chosen.setting.voter), None)
    head = ["problem", "reference", "P(right) chosen", "P(right) every repetition", "recorded votes"]
    order = sorted(range(len(sim.prepared)), key=lambda i: (_nan_last(chosen.right_share[i]), sim.prepared[i].problem.id))
    rows: list[list[object]] = []
    for i in order:
        share = chosen.right_share[i]
        if math.isnan(share) or share >= 0.5:
            continue
        prep = sim.prepared[i]
        ballots = prep.ballots[chosen.setting.voter]
        counts: dict[str, int] = {}
        for b in ballots:
            if b is not None:
                counts[b.answer] = counts.get(b.answer, 0) + 1
        top = sorted(counts.items(), key=lambda kv: -kv[1])[:4]
        votes = ", ".join(f"{a} ×{n}" for a, n in top)
        missing = sum(b is None for b in ballots)
        if missing:
            votes = f"{votes}, no answer ×{missing}" if votes else f"no answer ×{missing}"
        rows.append([prep.problem.id, prep.problem.answer, f"{share:.2f}",
                     "-" if full is None else f"{full.right_share[i]:.2f}", votes])
        if len(rows) >= limit:
            break
    return head, rows


def _nan_last(value: float) -> float:
    return 2.0 if math.isnan(value) else float(value)


def markdown(report: TuneReport) -> str:
    sim = report.simulation
    req = sim.request
    c = report.choice
    k = c.problems
    lines = [
        "# Tuning: stopping rule × parameters × voter × repetitions", "",
        f"Runs: {', '.join(str(p) for p in req.run_dirs)}; {sim.pools} problems recorded, "
        f"{sim.recorded[0]}–{sim.recorded[1]} finished repetitions each; K = {k} problems per leaderboard run; "
        f"{len(report.summaries)} settings × {req.trials} trials on common draws (seed {req.seed}, draw "
        f"{req.draw}); timing: {timing_text(sim)}.",
        "",
        f"**Chosen** by the rule “{report.rule.text}”: **{c.setting.label}** — expected accuracy "
        f"{accuracy(c):.2f} % ({c.mean:.2f} ± {c.std:.2f} of {k}; 5–95 % of leaderboard runs: {band(c)}), "
        f"{c.launched:.2f} repetitions launched per problem"
        + (f", {c.tokens:.0f} tokens, {c.seconds:.1f} s per problem, {c.total_seconds:.0f} s per run, "
           f"{c.cut:.2f} problems cut by the budget per run" if not sim.zero_time else "") + ".",
        "",
    ]
    lines += [*scoring_lines(report), ""]
    if report.full:
        widest = max(report.full, key=lambda s: s.setting.reps)
        lines += [f"Against every repetition at N = {widest.setting.reps}: {accuracy(c) - accuracy(widest):+.2f} "
                  f"points at {widest.launched / c.launched:.2f}× fewer repetitions.", ""]
    for axis in report.frontiers:
        head, rows = frontier_rows(report, axis)
        lines += [f"## Frontier: {AXIS_LABELS[axis]}", "", markdown_table(head, rows), ""]
        gap = report.adaptive_gap.get(axis)
        if gap is not None:
            verdict = "dominates" if gap >= 0 else "does not dominate"
            lines += [f"The other rules' frontier {verdict} Adaptive-Consistency's: at Adaptive-Consistency's "
                      f"frontier costs, the best other setting costing no more is {gap:+.2f} points from it at "
                      "worst.", ""]
    head, rows = reference_rows(report)
    lines += ["## References", "", markdown_table(head, rows) if rows else
              "None searched (add --stopper none, or a beta rule, to have them).", ""]
    lines += ["## What the data can tell", "", *data_lines(report), ""]
    if sim.zero_time:
        lines += ["Recorded durations and token counts are zero (imported samples): only repetitions are a "
                  "cost here.", ""]
    lines += ["## Calibration", "", *calibration_lines(sim), ""]
    head, rows = wrong_problems(report)
    lines += ["## Problems the chosen setting gets wrong", "",
              markdown_table(head, rows) if rows else "None: every problem is right in at least half the trials.",
              ""]
    return "\n".join(lines)


def scoring_lines(report: TuneReport) -> list[str]:
    """How the days were scored, the chosen setting against the line (and, under a rule of two runs, its first run
    alone: the public leaderboard's), and how the machine-speed stress test moves it."""
    sim = report.simulation
    rule, req, c = sim.rule, sim.request, report.choice
    text = (f"Scoring: {rule.name} ({rule.text}); {sim.line_text}; the chosen setting clears it on "
            f"{100 * c.p_line:.0f} % of days")
    if rule.runs > 1:
        text += (f"; one run alone (a {rule.first_run_name.split(' ')[0]} leaderboard day) scores "
                 f"{float(c.first_scores.mean()):.2f}, at or above the line on {100 * c.first_p_line:.0f} % of days; "
                 f"both: {100 * c.p_line * c.first_p_line:.0f} %")
    jitter = jitter_text(req.machine_speed)
    out = [f"{text}. {jitter[0].upper()}{jitter[1:]}."]
    j = c.jitter
    if j is not None:
        out.append(f"On the fastest third of runs it gets {j.fast.right:.2f} right with {j.fast.cut:.2f} problems cut "
                   f"({j.fast.seconds:.0f} s a run), on the slowest third {j.slow.right:.2f} with {j.slow.cut:.2f} "
                   f"cut ({j.slow.seconds:.0f} s).")
    return out


def data_lines(report: TuneReport) -> list[str]:
    """The chosen setting against the best, and the ``--compare`` pairs (numbered as settings.csv's ``row``)."""
    summaries = report.summaries
    best = next(s for s in summaries if s.vs_best is None)
    number = {id(s): i for i, s in enumerate(summaries, 1)}
    chosen = report.choice
    if chosen is best:
        out = [f"The chosen setting (#{number[id(chosen)]}) is the best by mean."]
    else:
        assert chosen.vs_best is not None
        out = [f"The chosen setting (#{number[id(chosen)]}) minus the best by mean (#{number[id(best)]}, "
               f"{best.setting.label}): {chosen.vs_best.text()} — {chosen.vs_best.verdict}."]
    flagged = sum(s.beyond_data for s in summaries)
    if flagged:
        out.append(f"{flagged} of {len(summaries)} settings launch more repetitions than most problems recorded "
                   "(⚑ in the tables and `beyond_data` in settings.csv).")
    if report.simulation.comparisons:
        out += ["", *difference_table(list(report.simulation.comparisons))]
    else:
        out += ["", DIFFERENCE_NOTE]
    return out


def write_outputs(report: TuneReport, out: Path) -> list[Path]:
    """Everything into ``out`` (each file replaced whole): tune.md, settings.csv, chosen.yaml, the plots and
    report.html, which embeds the plots and tables in one file."""
    import pandas as pd

    from solver.offline.sim import plot_accuracy_vs_reps, plot_score_distributions
    from solver.offline.tune.plots import plot_frontier

    out.mkdir(parents=True, exist_ok=True)
    rows = summary_rows(report.simulation)
    for row, s in zip(rows, report.summaries):
        for axis, front in report.frontiers.items():
            row[f"frontier_{axis}"] = any(f is s for f in front)
        row["chosen"] = s is report.choice
    written = [_replace(out / "settings.csv", pd.DataFrame(rows).to_csv(index=False)),
               _replace(out / "tune.md", markdown(report)),
               write_config(report, out / "chosen.yaml")]
    summaries = report.summaries
    plot_frontier(summaries, report.frontiers, report.full, report.adaptive, report.choice, out / PLOTS[0])
    plot_accuracy_vs_reps(_line_settings(report), out / PLOTS[1])
    plot_score_distributions(_histogram_settings(report), out / PLOTS[2], report.simulation.rule)
    written += [out / name for name in PLOTS]
    written.append(_replace(out / "report.html", render(page(report, out))))
    return written


def page(report: TuneReport, out: Path) -> Page:
    """The HTML report's content: the pick, the plots (already written in ``out``), the frontier and reference
    tables, the calibration check and the wrong problems' votes."""
    sim = report.simulation
    c = report.choice
    intro = [
        f"{sim.pools} recorded problems, {sim.recorded[0]}–{sim.recorded[1]} finished repetitions each; "
        f"{c.problems} problems per leaderboard run; {len(report.summaries)} settings × {sim.request.trials} "
        "trials on common draws.",
        f"Chosen by the rule “{report.rule.text}”: {c.setting.label}, expected accuracy {accuracy(c):.2f} % "
        f"(5–95 %: {band(c)}), {c.launched:.2f} repetitions launched per problem.",
        *scoring_lines(report),
    ]
    sections = [Section("Choice", intro, [
        Preformatted("chosen.yaml, beside this file: solver solve DATA --config chosen.yaml", config_text(report)),
        Image("Cost against expected accuracy: the frontier, the references and the chosen setting",
              out / PLOTS[0])])]
    for axis in report.frontiers:
        head, rows = frontier_rows(report, axis)
        gap = report.adaptive_gap.get(axis)
        text = [] if gap is None else [f"At Adaptive-Consistency's frontier costs, the best other setting costing "
                                       f"no more is {gap:+.2f} points from it at worst (>= 0: dominates)."]
        sections.append(Section(f"Frontier: {AXIS_LABELS[axis]}", text, [Table("Pareto frontier", head, rows)]))
    head, rows = reference_rows(report)
    sections.append(Section("Accuracy against repetitions", [], [
        Image("Accuracy against repetitions launched, 5–95 % bands", out / PLOTS[1]),
        Table("References", head, rows)]))
    rule = sim.rule
    caption = (f"Left: one run alone, {rule.first_run_name}; right: {rule.name}, two runs over the same problems "
               "at 1 / 0.5 / 0" if rule.runs > 1 else f"{rule.name}: one run counted")
    sections.append(Section("Score distributions", [
        f"Scoring: {rule.text}. The red dashes mark the line {sim.request.line:g}; each title gives P(score ≥ line)."
        + ("" if rule.runs > 1 else " The private rule (two runs, 1 / 0.5 / 0) is drawn with --scoring "
                                     "aimo3-private.")], [
        Image(f"Score per leaderboard day, zoomed to the scores that occur. {caption}", out / PLOTS[2])]))
    sections.append(Section("What the data can tell", [line.replace("`", "") for line in data_lines(report)
                                                        if line and not line.startswith("|")],
                            [Table("Differences between settings", *difference_rows(report.simulation.comparisons))]
                            if report.simulation.comparisons else []))
    sections.append(Section("Calibration", [line.lstrip("- ").replace("**", "")
                                            for line in calibration_lines(sim) if line]))
    head, rows = wrong_problems(report)
    sections.append(Section("Problems the chosen setting gets wrong",
                            [] if rows else ["None: every problem is right in at least half the trials."],
                            [Table("Recorded votes of problems right in under half the trials", head, rows)]
                            if rows else []))
    return Page("Tuning report", sections)


def _line_settings(report: TuneReport) -> list[Summary]:
    """For accuracy vs repetitions: running every repetition, Adaptive-Consistency at 0.95 and the chosen
    setting's policy, each across the caps searched."""
    chosen = report.choice.setting
    keep = [(), ("beta:0.95",), chosen.stoppers]
    return [s for s in report.summaries if s.setting.stoppers in keep and s.setting.voter == chosen.voter
            and s.setting.workers == chosen.workers and s.setting.budget_s == chosen.budget_s]


def _histogram_settings(report: TuneReport) -> list[Summary]:
    picked: list[Summary] = [report.choice]
    widest = max(report.full, key=lambda s: s.setting.reps, default=None)
    if widest is not None and widest is not report.choice:
        picked.append(widest)
    for s in report.frontiers.get("reps", []):
        if len(picked) >= HISTOGRAMS_MAX:
            break
        if all(s is not p for p in picked):
            picked.append(s)
    return sorted(picked, key=lambda s: s.launched)


def _replace(path: Path, text: str) -> Path:
    atomic_write(path, text)
    return path
