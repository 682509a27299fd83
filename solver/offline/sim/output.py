"""A leaderboard simulation written out: summary.csv, scores.csv, report.md and the plots."""

from __future__ import annotations

from pathlib import Path

from solver.files import atomic_write
from solver.offline.sim.summary import QUANTILES, Summary
from solver.offline.sim.simulate import SimulationReport


def summary_rows(report: SimulationReport) -> list[dict[str, object]]:
    rows = []
    for s in report.summaries:
        row: dict[str, object] = {
            "setting": s.setting.label, "reps": s.setting.reps, "voter": s.setting.voter,
            "stoppers": ",".join(s.setting.stoppers), "workers": s.setting.workers,
            "budget_s": s.setting.budget_s, "problems": s.problems, "trials": s.trials,
            "mean": round(s.mean, 4), "std": round(s.std, 4), "accuracy": round(s.mean / s.problems, 4),
        }
        row.update({f"q{int(q * 100):02d}": s.quantiles[q] for q in QUANTILES})
        row.update({f"p_ge_{x}": round(p, 4) for x, p in s.at_least.items()})
        row.update({"reps_per_problem": round(s.finished, 3), "launched_per_problem": round(s.launched, 3),
                    "tokens_per_problem": round(s.tokens, 1), "seconds_per_problem": round(s.seconds, 3),
                    "run_seconds": round(s.total_seconds, 1), "run_seconds_std": round(s.total_std, 1),
                    "deadline_share": round(s.stops.get("deadline", 0.0), 4), "cut_per_run": round(s.cut, 3),
                    "retried_per_run": round(s.retried, 3), "bootstrapped_per_run": round(s.bootstrapped, 3),
                    "bootstrap_bias": None if s.bootstrap_bias is None else round(s.bootstrap_bias, 3),
                    "retry": s.setting.retry, "clamp": "" if s.setting.clamp is None else
                    f"{s.setting.clamp[0]:g}-{s.setting.clamp[1]:g}", "banking": s.setting.banking})
        rows.append(row)
    return rows


def markdown(report: SimulationReport) -> str:
    req = report.request
    k = report.summaries[0].problems
    lines = [
        "# Leaderboard simulation", "",
        f"Runs: {', '.join(str(p) for p in req.run_dirs)}  ",
        f"Recorded problems: {report.pools}; finished repetitions per problem: {report.recorded[0]}–"
        f"{report.recorded[1]}  ",
        f"K = {k} problems per leaderboard run, {req.trials} trials per setting, seed {req.seed}, "
        f"draw = {req.draw}, timing = " + timing_text(report), "",
    ]
    if report.config.solve.workers == 0 and not req.workers:
        lines += ["The runs were made with `--workers auto` (solve.workers = 0): modelled as W = the engine's batch "
                  "(engine.args.max_num_seqs), at most N.", ""]
    if report.zero_time:
        lines += ["**Recorded durations are all zero**: seconds and budgets are meaningless; pass --time-model NAME "
                  "(an engine time model, e.g. h100-gptoss) or --tokens-per-s.", ""]
    at_least = list(report.summaries[0].at_least)
    head = ["setting", "mean", "std", "5%", "50%", "95%", *[f"P(≥{x})" for x in at_least], "launched/problem",
            "finished/problem", "tokens/problem", "s/problem", "run s", "cut/run", "bootstrapped/run (bias)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in report.summaries:
        cells = [s.setting.label, f"{s.mean:.2f}", f"{s.std:.2f}", f"{s.quantiles[0.05]:g}",
                 f"{s.quantiles[0.5]:g}", f"{s.quantiles[0.95]:g}", *[f"{p:.2f}" for p in s.at_least.values()],
                 f"{s.launched:.2f}", f"{s.finished:.2f}", f"{s.tokens:.0f}", f"{s.seconds:.1f}",
                 f"{s.total_seconds:.0f}", f"{s.cut:.2f}", bootstrap_text(s)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "mean/std/quantiles: problems right of K per run; cut/run: problems stopped at their budget's "
              "deadline (they vote what had finished); bootstrapped/run: problems that launched more repetitions "
              "than were recorded (the recorded ones topped up by drawing again), and the score that is estimated "
              "to add (solver/offline/sim/bias.py)."]
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
    scores = pd.DataFrame([{"setting": s.setting.label, "trial": t, "score": float(v)}
                           for s in report.summaries for t, v in enumerate(s.scores)])
    atomic_write(out_dir / "scores.csv", scores.to_csv(index=False))
    atomic_write(out_dir / "report.md", markdown(report))
    written += [summary, out_dir / "scores.csv", out_dir / "report.md"]
    written.append(plot_score_distributions(report.summaries, out_dir / "scores.png"))
    written.append(plot_accuracy_vs_reps(report.summaries, out_dir / "accuracy_vs_reps.png"))
    return written

