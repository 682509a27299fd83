"""A leaderboard simulation written out: summary.csv, scores.csv, report.md and the plots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from solver.files import atomic_write
from solver.offline.sim.separation import Difference
from solver.offline.sim.summary import QUANTILES, Summary
from solver.offline.sim.simulate import SimulationReport
from solver.runlog import markdown_table


def summary_rows(report: SimulationReport) -> list[dict[str, object]]:
    rows = []
    rule = report.rule
    for number, s in enumerate(report.summaries, 1):
        row: dict[str, object] = {
            "row": number, "setting": s.setting.label, "reps": s.setting.reps, "voter": s.setting.voter,
            "stoppers": ",".join(s.setting.stoppers), "workers": s.setting.workers,
            "budget_s": s.setting.budget_s, "problems": s.problems, "trials": s.trials, "scoring": rule.name,
            "mean": round(s.mean, 4), "std": round(s.std, 4), "accuracy": round(s.mean / s.problems, 4),
        }
        row.update({f"q{int(q * 100):02d}": s.quantiles[q] for q in QUANTILES})
        row.update({"line": s.line, "p_line": round(s.p_line, 4)})
        if rule.runs > 1:
            row.update({"first_run_mean": round(float(s.first_scores.mean()), 4),
                        "first_run_q05": float(np.quantile(s.first_scores, 0.05)),
                        "first_run_q95": float(np.quantile(s.first_scores, 0.95)),
                        "first_run_p_line": round(s.first_p_line, 4)})
            for r in s.seed_rows:
                key = r.policy.replace("-", "_")
                row.update({f"{key}_mean": round(r.mean, 4), f"{key}_std": round(r.std, 4), f"{key}_q05": r.low,
                            f"{key}_q95": r.high, f"{key}_p_line": round(r.p_line, 4)})
        row.update({f"p_ge_{x}": round(p, 4) for x, p in s.at_least.items()})
        row.update({"reps_per_problem": round(s.finished, 3), "launched_per_problem": round(s.launched, 3),
                    "tokens_per_problem": round(s.tokens, 1), "seconds_per_problem": round(s.seconds, 3),
                    "run_seconds": round(s.total_seconds, 1), "run_seconds_std": round(s.total_std, 1),
                    "deadline_share": round(s.stops.get("deadline", 0.0), 4), "cut_per_run": round(s.cut, 3),
                    "retried_per_run": round(s.retried, 3), "bootstrapped_per_run": round(s.bootstrapped, 3),
                    "bootstrap_bias": None if s.bootstrap_bias is None else round(s.bootstrap_bias, 3),
                    "beyond_data": s.beyond_data,
                    "retry": s.setting.retry, "clamp": "" if s.setting.clamp is None else
                    f"{s.setting.clamp[0]:g}-{s.setting.clamp[1]:g}", "banking": s.setting.banking})
        d = s.vs_best
        row.update({"vs_best": None if d is None else round(d.mean, 4),
                    "vs_best_low": None if d is None else round(d.low, 4),
                    "vs_best_high": None if d is None else round(d.high, 4),
                    "vs_best_day_q05": None if d is None else d.day[0],
                    "vs_best_day_q95": None if d is None else d.day[1],
                    "separable": None if d is None else d.separable,
                    "attempts_to_separate": None if d is None or d.attempts is None or math.isinf(d.attempts)
                    else math.ceil(d.attempts),
                    "attempts_low": None if d is None or d.attempts_range is None else math.ceil(d.attempts_range[0]),
                    "attempts_high": None if d is None or d.attempts_range is None
                    or math.isinf(d.attempts_range[1]) else math.ceil(d.attempts_range[1]),
                    "vs_best_family": None if d is None else d.family,
                    "vs_best_conservative": None if d is None else d.conservative})
        j = s.jitter
        if j is not None:
            row.update({"fast_right": round(j.fast.right, 3), "fast_cut": round(j.fast.cut, 3),
                        "fast_run_seconds": round(j.fast.seconds, 1), "slow_right": round(j.slow.right, 3),
                        "slow_cut": round(j.slow.cut, 3), "slow_run_seconds": round(j.slow.seconds, 1)})
        rows.append(row)
    return rows


def markdown(report: SimulationReport) -> str:
    req = report.request
    k = report.summaries[0].problems
    rule = report.rule
    lines = [
        "# Leaderboard simulation", "",
        f"Runs: {', '.join(str(p) for p in req.run_dirs)}  ",
        f"Recorded problems: {report.pools}; finished repetitions per problem: {report.recorded[0]}–"
        f"{report.recorded[1]}  ",
        f"K = {k} problems per leaderboard run, {req.trials} trials per setting, seed {req.seed}, "
        f"draw = {req.draw}, timing = " + timing_text(report) + "  ",
        f"Scoring: {rule.name} ({rule.text}); {report.line_text}; order {req.order}"
        f"{' (stress setting)' if req.order != 'random' else ''}; seed policy {report.config.sampling.seed_policy}; "
        f"{jitter_text(req.machine_speed)}", "",
    ]
    if report.config.solve.workers == 0 and not req.workers:
        lines += ["The runs were made with `--workers auto` (solve.workers = 0): modelled as W = the engine's batch "
                  "(engine.args.max_num_seqs), at most N.", ""]
    if report.zero_time:
        lines += ["**Recorded durations are all zero**: seconds and budgets are meaningless; pass --time-model NAME "
                  "(an engine time model, e.g. h100-gptoss) or --tokens-per-s.", ""]
    at_least = list(report.summaries[0].at_least)
    line = f"P(≥{req.line:g})"
    head = ["#", "setting", "mean", "std", "5%", "50%", "95%", line, *[f"P(≥{x})" for x in at_least],
            "launched/problem", "finished/problem", "tokens/problem", "s/problem", "run s", "cut/run",
            "bootstrapped/run (bias)", "data"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for number, s in enumerate(report.summaries, 1):
        cells = [str(number), s.setting.label, f"{s.mean:.2f}", f"{s.std:.2f}", f"{s.quantiles[0.05]:g}",
                 f"{s.quantiles[0.5]:g}", f"{s.quantiles[0.95]:g}", f"{s.p_line:.2f}",
                 *[f"{p:.2f}" for p in s.at_least.values()], f"{s.launched:.2f}", f"{s.finished:.2f}",
                 f"{s.tokens:.0f}", f"{s.seconds:.1f}", f"{s.total_seconds:.0f}", f"{s.cut:.2f}", bootstrap_text(s),
                 data_flag(s)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"mean/std/quantiles: the {rule.name} score of K per day; {line}: the share of days at or above "
              "the line; cut/run: problems stopped at their budget's deadline (they vote what had finished); "
              "bootstrapped/run: problems that launched more repetitions than were recorded (the recorded ones topped "
              "up by drawing again), and the score that is estimated to add (solver/offline/sim/bias.py); data: "
              "⚑ where most problems are topped up, so the row says more about the method than the model."]
    if req.line > k:
        lines.append(f"The line {req.line:g} is above the K = {k} problems of a day: no day reaches it.")
    if rule.runs > 1:
        lines += ["", *two_boards(report), "", *seed_lines(report)]
    lines += ["", "## What the data can tell", "", *separation_lines(report)]
    if req.machine_speed > 0 and not report.zero_time:
        lines += ["", "## Machine speed (stress test)", "", *jitter_lines(report)]
    if any(s.setting.budget_s is not None for s in report.summaries):
        b = report.budget
        lines += ["", "Budgeted settings use the budget manager (solver/core/budget.py) on a simulated clock with "
                  f"total_s = --budget, problems = K and the config's min_s = {b.min_s:g}, max_s = {b.max_s:g}, "
                  f"reserve_s = {b.reserve_s:g}, cutoff_s = {b.cutoff_s} (change them with --set budget.KEY=V)."]
        starved = [s.setting.budget_s for s in report.summaries
                   if s.setting.budget_s is not None and s.setting.budget_s <= b.reserve_s]
        if starved:
            lines.append(f"**Budget {starved[0]:g} s is not above budget.reserve_s = {b.reserve_s:g} s: no "
                         "problem gets any time.**")
    lines += ["", "## Calibration", "", *calibration_lines(report)]
    if report.time_model is None:
        lines += ["", "Not modelled: the DeepConf online confidence filter (stop.confidence_warmup) and engine "
                  "slow-down when more repetitions run at once (each repetition keeps its recorded time)."]
    else:
        lines += ["", "Not modelled: the DeepConf online confidence filter (stop.confidence_warmup), and the "
                  "solver's own time per request beyond the engine's (the model is the engine's; with "
                  "stop.first_answer an attempt ends at its first answer, so each streamed answer is a finish)."]
    return "\n".join(lines) + "\n"


def jitter_text(jitter: float) -> str:
    """
    >>> jitter_text(0.1), jitter_text(0.0)
    ("machine-speed stress test: each run's seconds × a factor in 1 ± 0.1", 'every run at the modelled speed')
    """
    if jitter <= 0:
        return "every run at the modelled speed"
    return f"machine-speed stress test: each run's seconds × a factor in 1 ± {jitter:g}"


def data_flag(s: Summary) -> str:
    """The mark beside a row whose setting needs more repetitions than most problems recorded.

    >>> from types import SimpleNamespace
    >>> data_flag(SimpleNamespace(beyond_data=True, bootstrapped=45.0, problems=50)), data_flag(
    ...     SimpleNamespace(beyond_data=False))
    ('⚑ beyond the data: 45.0 of 50 topped up', '')
    """
    return f"⚑ beyond the data: {s.bootstrapped:.1f} of {s.problems} topped up" if s.beyond_data else ""


def two_boards(report: SimulationReport) -> list[str]:
    """Under a rule of two runs: each setting's first run alone (AIMO3's public leaderboard scores one run) beside
    the rule's score, and the chance of clearing the line on both (the public and private sets are different
    problems: independent days)."""
    rule, line = report.rule, report.request.line
    head = ["#", "setting", f"{rule.first_run_name}: mean", "5–95 %", f"P(≥{line:g})", f"{rule.name}: mean",
            "5–95 %", f"P(≥{line:g})", "P(both ≥ line)"]
    rows = []
    for number, s in enumerate(report.summaries, 1):
        first = s.first_scores
        rows.append([number, s.setting.label, f"{first.mean():.2f}",
                     f"{np.quantile(first, 0.05):g}–{np.quantile(first, 0.95):g}", f"{s.first_p_line:.2f}",
                     f"{s.mean:.2f}", f"{s.quantiles[0.05]:g}–{s.quantiles[0.95]:g}", f"{s.p_line:.2f}",
                     f"{s.first_p_line * s.p_line:.2f}"])
    return ["## Two leaderboards", "", markdown_table(head, rows), "",
            f"The first run alone is scored as a public-leaderboard run; {rule.name} plays the same problems twice "
            "(in the rule's order, with the draws the seed policy gives). P(both ≥ line): the two sets are different problems, "
            "so the days are independent: the product."]


def seed_lines(report: SimulationReport) -> list[str]:
    """Under a rule of two runs: each setting's score under either seed policy, the one the runs' config names
    marked (it is the score the other tables show)."""
    rule, line, chosen = report.rule, report.request.line, report.config.sampling.seed_policy
    head = ["#", "setting", "seed policy", "mean", "std", "5–95 %", f"P(≥{line:g})"]
    rows = [[number, s.setting.label, f"{r.policy}{' (the config’s)' if r.policy == chosen else ''}",
             f"{r.mean:.2f}", f"{r.std:.2f}", f"{r.low:g}–{r.high:g}", f"{r.p_line:.2f}"]
            for number, s in enumerate(report.summaries, 1) for r in s.seed_rows]
    return ["## Seeds: the two runs alike or apart", "", markdown_table(head, rows), "",
            f"sampling.seed_policy (set with --set sampling.seed_policy=fixed|per-run): fixed sends both {rule.name} "
            "runs the same seeds, and the second replays the first run's draws (they differ only where the "
            "machine-speed stress test cuts them differently; the real engine's batch nondeterminism, not modelled, "
            "would part them a little); per-run draws the second run afresh. The mean is the same; the spread and "
            "P(≥ line) are not."]


def separation_lines(report: SimulationReport) -> list[str]:
    """Each setting against the best by mean, and the ``--compare`` pairs, with what the recordings can tell."""
    summaries = report.summaries
    best = next(i for i, s in enumerate(summaries) if s.vs_best is None)
    pairs = [s.vs_best for s in summaries if s.vs_best is not None] + list(report.comparisons)
    out = [f"The best by mean: #{best + 1} ({summaries[best].setting.label})."]
    return out + (["", *difference_table(pairs)] if pairs else [])


def difference_rows(pairs: Sequence[Difference]) -> tuple[list[str], list[list[object]]]:
    """Differences between settings (numbered from 1 as the tables number them) as a table's head and rows.

    >>> difference_rows([Difference(1, 0, -0.5, (-2.0, 1.0), 0.75, 30.2)])[1][0][:4]
    ['#2 − #1', '-0.50', '-1.25 … +0.25', '-2 … +1']
    """
    head = ["a − b", "difference", "95 % (from the recordings)", "one day: 5–95 %", "verdict"]
    return head, [[f"#{d.a + 1} − #{d.b + 1}", f"{d.mean:+.2f}", f"{d.low:+.2f} … {d.high:+.2f}"
                   + (f" (1 of {d.family} together)" if d.family > 1 else ""),
                   f"{d.day[0]:+g} … {d.day[1]:+g}", d.verdict] for d in pairs]


def difference_table(pairs: Sequence[Difference]) -> list[str]:
    """:func:`difference_rows` as a markdown table, and its note."""
    return [markdown_table(*difference_rows(pairs)), "", DIFFERENCE_NOTE]


DIFFERENCE_NOTE = ("Paired on the common draws. The interval is the data's: another recording of these problems would "
                   "move the estimate by this much (each problem's variance over recordings, unbiased from the pairs "
                   "of trials whose draws share no recorded repetition where a draw takes at most half the recording; "
                   "elsewhere an upper bound, the jackknife or one day's variance, and the verdict says how many "
                   "problems are so bounded: solver/offline/sim/separation.py). Set against the best, the S − 1 "
                   "intervals hold together at 95 % (Bonferroni: the best was chosen on the same trials). A zero "
                   "variance is never read as separable. One day's band is what a single leaderboard day can show, "
                   "which no recording narrows. The attempts per problem that would separate a difference are at 80 % "
                   "power, with the figure at the ends of the difference's interval beside it; they assume each "
                   "problem's spread stays as measured.")


def jitter_lines(report: SimulationReport) -> list[str]:
    """Each setting's runs on the fastest and the slowest third of the speed factors' range."""
    jitter = report.request.machine_speed
    low, high = 1 - jitter, 1 + jitter
    head = ["#", "setting", f"fast (×{low:.2f}–{1 - jitter / 3:.2f}): right", "cut/run", "run s",
            f"slow (×{1 + jitter / 3:.2f}–{high:.2f}): right", "cut/run", "run s"]
    rows = []
    for number, s in enumerate(report.summaries, 1):
        j = s.jitter
        if j is None:
            continue
        rows.append([number, s.setting.label, f"{j.fast.right:.2f}", f"{j.fast.cut:.2f}", f"{j.fast.seconds:.0f}",
                     f"{j.slow.right:.2f}", f"{j.slow.cut:.2f}", f"{j.slow.seconds:.0f}"])
    budgeted = any(s.setting.budget_s is not None for s in report.summaries)
    return [markdown_table(head, rows), "",
            "A stress test, not a rule of AIMO3: a run's seconds (the engine's and the tools') are multiplied by its "
            "factor, as on a slower or faster machine; right: problems right per run. " + ("The budget stays as it is: on a slow machine its deadlines cut more." if budgeted else
                       "Without a budget the factor moves the seconds only.")]


def timing_text(report: SimulationReport) -> str:
    """How the repetitions were timed, in words."""
    model, req = report.time_model, report.request
    if model is not None:
        return (f"the engine time model {model.name} (solver/timing: attempts share the engine; engine start "
                f"{model.start_s:g} s counted once)")
    return f"{req.tokens_per_s:g} tokens/s + recorded code time" if req.tokens_per_s else "recorded durations"


def bootstrap_text(s: Summary) -> str:
    """
    >>> from types import SimpleNamespace
    >>> bootstrap_text(SimpleNamespace(bootstrapped=0.0, bootstrap_bias=0.0)), bootstrap_text(
    ...     SimpleNamespace(bootstrapped=12.5, bootstrap_bias=-0.41))
    ('0', '12.50 (-0.41)')
    """
    if not s.bootstrapped:
        return "0"
    bias = "n/a" if s.bootstrap_bias is None else f"{s.bootstrap_bias:+.2f}"
    return f"{s.bootstrapped:.2f} ({bias})"


def calibration_lines(report: SimulationReport) -> list[str]:
    """The calibration check in markdown: what it compared, the numbers and the verdict."""
    cal = report.calibration
    if cal is None:
        return [f"Not run ({report.calibration_note or 'disabled'})."]
    gaps = ", ".join(f"{int(q * 100)}%: {g:+.2f}" for q, g in cal.quantile_gaps.items())
    return [
        f"Setting {cal.setting.label}, {cal.splits} random half splits of each problem's repetitions: "
        f"{len(cal.simulated)} simulated runs drawn from one half against {len(cal.held_out)} real "
        f"{cal.setting.reps}-repetition runs made of the other half.", "",
        f"- mean score: simulated {cal.simulated.mean():.2f}, held-out {cal.held_out.mean():.2f} "
        f"(gap {cal.mean_gap:+.2f} problems)",
        f"- std: simulated {cal.simulated.std():.2f}, held-out {cal.held_out.std():.2f}",
        f"- quantile gaps (simulated − held-out): {gaps}",
        f"- Kolmogorov–Smirnov statistic {cal.ks:.3f} (p = {cal.ks_pvalue:.2f}, indicative: held-out runs of "
        f"different splits share repetitions) → **{cal.verdict}** (agree = KS < 0.2 and |mean gap| < 1)",
    ]


def write_outputs(report: SimulationReport, out_dir: Path) -> list[Path]:
    """summary.csv, scores.csv, report.md and the plots, written into ``out_dir`` (files replaced whole)."""
    import pandas as pd

    from solver.offline.sim.plots import plot_accuracy_vs_reps, plot_score_distributions

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    summary = out_dir / "summary.csv"
    atomic_write(summary, pd.DataFrame(summary_rows(report)).to_csv(index=False))
    scores = pd.DataFrame([{"setting": s.setting.label, "trial": t, "score": float(v), "first_run": float(f)}
                           for s in report.summaries for t, (v, f) in enumerate(zip(s.scores, s.first_scores))])
    atomic_write(out_dir / "scores.csv", scores.to_csv(index=False))
    atomic_write(out_dir / "report.md", markdown(report))
    written += [summary, out_dir / "scores.csv", out_dir / "report.md"]
    written.append(plot_score_distributions(report.summaries, out_dir / "scores.png", report.rule))
    written.append(plot_accuracy_vs_reps(report.summaries, out_dir / "accuracy_vs_reps.png"))
    return written

