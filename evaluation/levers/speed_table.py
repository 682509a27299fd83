"""The table of evaluation/README.md, "What speed buys", from the result files beside this script (run.sh writes them):
each engine's best policy (``NAME.settings.csv``, the tune's pick), the winners' policy on it
(``NAME.winners.summary.csv``) and every attempt run at caps 6 to 12 (``NAME.afford.summary.csv``). Run from the
repository root after speed.sh: ``python evaluation/levers/speed_table.py [RUN_DIR]`` (RUN_DIR, the imported
recordings, default runs/gptoss-dev, for how many problems hold N recorded attempts; their counts are kept in
``recorded.json`` beside it, which the table is read from where the recordings are not here)."""

import csv
import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "results" / "levers-speed"  # the result files it reads
CUT = 0.05   # "without cuts": under this many problems cut a day on average
ROWS = (  # GPU, model file stem, what it is, the winners' engine of that GPU
    ("H100", "h100-gptoss", "Triton, no warm-up: the winners' (`h100-gptoss`)", "h100-gptoss"),
    ("H100", "h100-gptoss-marlin", "Marlin, no warm-up (`h100-gptoss-marlin`, inferred)", "h100-gptoss"),
    ("H100", "h100-gptoss-marlin-kv-share", "… its KV cache 7.2 % smaller, 537k (`-kv-share`, a stand-in)",
     "h100-gptoss"),
    ("H100", "h100-gptoss-marlin-kv-bytes", "… its KV cache 257k tokens smaller, 321k (`-kv-bytes`, a stand-in)",
     "h100-gptoss"),
    ("H200", "h200-gptoss-cold", "Triton, no warm-up: the winners' (`h200-gptoss-cold`, a stand-in)",
     "h200-gptoss-cold"),
    ("H200", "h200-gptoss", "Triton + `engine.warmup` (`h200-gptoss`)", "h200-gptoss-cold"),
    ("H200", "h200-gptoss-marlin", "Marlin, no warm-up (`h200-gptoss-marlin`)", "h200-gptoss-cold"),
)


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def recorded(run: Path) -> list[int]:
    """Recorded attempts per problem, sorted: from the run where it is here (and kept in recorded.json), else from
    recorded.json."""
    kept = HERE / "recorded.json"
    if not (run / "log.jsonl").exists():
        return json.loads(kept.read_text())["attempts_per_problem"]
    count: Counter[str] = Counter()
    with (run / "log.jsonl").open() as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "repetition" and r.get("status") == "done":
                count[r["problem_id"]] += 1
    sizes = sorted(count.values())
    kept.write_text(json.dumps({"run": str(run), "attempts_per_problem": sizes}) + "\n")
    return sizes


def winners(summary: list[dict[str, str]]) -> dict[str, str]:
    """The winners' policy's row: 8 at once, agree:4, no banking."""
    return next(r for r in summary if (r["stoppers"], r["banking"]) == ("agree:4", "False"))


def policy(r: dict[str, str]) -> str:
    n, w = int(r["reps"]), int(r["workers"])
    inflight = "all at once" if w >= n else f"{w} in flight"
    stop = r["stoppers"] or "none (every attempt runs)"
    return f"{n}, {inflight}, {stop}{', banking' if r['banking'] == 'True' else ''}"


def minus(x: float, digits: int) -> str:
    """``x`` with the README's minus sign."""
    return f"{x:.{digits}f}".replace("-", "−")


def table(run: Path) -> str:
    """The markdown table."""
    sizes = recorded(run)
    out = ["| GPU | engine (time model) | best policy (the rule's pick) | score of 50 | 5–95 % | s / problem | s / day "
           "| minutes saved a day (at the winners' policy) | cut / day (at the winners' policy) | topped up / day (bias) "
           "| most attempts a problem, every one run, no cuts: cap (s / day) | priced by the recordings? |",
           "|---|---|---|---:|---|---:|---:|---:|---:|---|---|---|"]
    for gpu, name, what, base in ROWS:
        fixed = rows(HERE / f"{name}.winners.summary.csv")
        win = winners(fixed)
        base_day = float(winners(rows(HERE / f"{base}.winners.summary.csv"))["run_seconds"])
        tuned = HERE / f"{name}.settings.csv"
        if tuned.exists():
            best = next(r for r in rows(tuned) if r["chosen"] == "True")
            label = policy(best)
        else:   # a stand-in of the H100 Marlin's KV cache: that model's pick, played on it, not tuned
            pick = next(r for r in rows(HERE / "h100-gptoss-marlin.settings.csv") if r["chosen"] == "True")
            best = next(r for r in fixed if (r["stoppers"], r["banking"]) == (pick["stoppers"], pick["banking"]))
            label = f"{policy(best)} (`h100-gptoss-marlin`'s pick, not tuned)"
        afford = rows(HERE / f"{name}.afford.summary.csv")
        fits = [r for r in afford if float(r["cut_per_run"]) < CUT]
        if fits:
            top = max(fits, key=lambda r: int(r["reps"]))
            n = int(top["reps"])
            bound = "≥ " if n == max(int(r["reps"]) for r in afford) else ""
            cap = f"{bound}{n} ({float(top['run_seconds']):,.0f})"
            nxt = next((r for r in afford if int(r["reps"]) == n + 1), None)
            if nxt:
                cap += f"; {n + 1}: {float(nxt['cut_per_run']):.2f} cut"
            held = sum(s >= n for s in sizes)
            priced = (f"no: {held} of {len(sizes)} problems hold {n} recorded attempts, "
                      f"{float(top['bootstrapped_per_run']):.1f} of 50 a day topped up; not scored")
        else:
            low = min(afford, key=lambda r: int(r["reps"]))
            cap = f"< {low['reps']} ({low['reps']}: {float(low['cut_per_run']):.2f} cut)"
            priced = "—"
        saved = (base_day - float(best["run_seconds"])) / 60
        saved_win = (base_day - float(win["run_seconds"])) / 60
        out.append(f"| {gpu} | {what} | {label} | {float(best['mean']):.2f} ± {float(best['std']):.2f} "
                   f"| {float(best['q05']):g}–{float(best['q95']):g} | {float(best['seconds_per_problem']):.1f} "
                   f"| {float(best['run_seconds']):,.0f} | {minus(saved, 1)} ({minus(saved_win, 1)}) "
                   f"| {float(best['cut_per_run']):.2f} ({float(win['cut_per_run']):.2f}) "
                   f"| ⚑ {float(best['bootstrapped_per_run']):.1f} ({minus(float(best['bootstrap_bias']), 2)}) | {cap} "
                   f"| {priced} |")
    return "\n".join(out) + "\n"


def main() -> None:
    sys.stdout.write(table(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/gptoss-dev")))


if __name__ == "__main__":
    main()
