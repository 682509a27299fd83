"""The engine's holds in a day slice, lined up with what the engine did then.

A hold is a request sent after a tool call whose first token came more than ``solver.timing.measured.HOLD_S`` seconds
later (``solver.timing.measured.holds``). Given a ``day.py`` JSON and the engine log the same run wrote with
``--log-engine`` (plus the engine arguments ``enable_logging_iteration_details`` and ``jit_monitor_verbose``),
this prints, per hold, the steps the engine logged in it, its longest step, the Triton kernels that compiled in
it and so its cause (``solver.engines.engine_log.explain_holds``); then the holds' share of the slice's time,
their seconds by cause, and every kernel compiled after the first problem started (the target: none).

    python benchmarks/holds.py runs/day/a.json runs/day/a.log.xz --json runs/day/a-holds.json
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from solver.engines.engine_log import EngineLog, explain_holds, parse_engine_log
from solver.timing.measured import holds


def read_text(path: Path) -> str:
    return lzma.open(path, "rt").read() if path.suffix == ".xz" else path.read_text()


def analyse(day: dict[str, Any], log: EngineLog) -> dict[str, Any]:
    """Per problem its holds explained; the slice's totals; the compiles after the first problem started."""
    problems, first_start = [], None
    for p in day["problems"]:
        t0 = p.get("epoch_t0")
        if t0 is None:
            raise ValueError(f"{p['id']}: no epoch_t0 (a day.py JSON from before --log-engine)")
        first_start = t0 if first_start is None else min(first_start, t0)
        windows = [(t0 + a, t0 + b) for a, b in holds(p["timeline"])]
        causes = explain_holds(windows, log)
        problems.append({"id": p["id"], "seconds": p["seconds"], "epoch_t0": t0, "end": t0 + p["seconds"],
                         "holds": [{**asdict(c), "seconds": round(c.seconds, 3)} for c in causes]})
    total = sum(p["seconds"] for p in problems)
    held = [h for p in problems for h in p["holds"]]
    by_cause: dict[str, list[float]] = {}
    for h in held:
        by_cause.setdefault(h["cause"], []).append(h["seconds"])
    in_problems = [c for c in log.compiles
                   if any(p["epoch_t0"] <= c.t <= p["end"] for p in problems)]
    after = [c for c in log.compiles if first_start is not None and c.t >= first_start]
    steps_in = [s for s in log.steps if any(p["epoch_t0"] <= s.t <= p["end"] for p in problems)]
    slow = sorted(steps_in, key=lambda s: -s.ms)[:15]
    return {
        "problems": problems,
        "slice_s": round(total, 3),
        "holds": len(held), "hold_s": round(sum(h["seconds"] for h in held), 3),
        "hold_share": round(sum(h["seconds"] for h in held) / total, 5) if total else None,
        "by_cause": {k: {"holds": len(v), "seconds": round(sum(v), 3)} for k, v in sorted(by_cause.items())},
        "compiles": len(log.compiles), "compiles_after_first_problem": len(after),
        "compiles_in_problems": len(in_problems),
        "kernels_after_first_problem": sorted({c.kernel for c in after}),
        "compile_detail_after": [asdict(c) for c in after],
        "warmups": [list(w) for w in log.warmups],
        "steps": len(steps_in), "slowest_steps": [asdict(s) for s in slow],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("day_json", type=Path)
    parser.add_argument("engine_log", type=Path, help="the run's stderr (plain or .xz)")
    parser.add_argument("--json", type=Path, default=None, help="write the analysis here")
    args = parser.parse_args(argv)
    for path in (args.day_json, args.engine_log):
        if not path.is_file():
            print(f"holds.py: error: {path}: no such file", file=sys.stderr)
            return 2
    try:
        out = analyse(json.loads(args.day_json.read_text()), parse_engine_log(read_text(args.engine_log)))
    except (ValueError, KeyError) as exc:
        print(f"holds.py: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    for p in out["problems"]:
        print(f"{p['id']}: {p['seconds']:.1f} s, {len(p['holds'])} holds")
        for h in p["holds"]:
            print(f"  +{h['start'] - p['epoch_t0']:7.1f} s  held {h['seconds']:.2f} s  {h['steps']:>4} steps, longest "
                  f"{h['longest_ms']:.0f} ms ({h['longest_prefill']} prefill of {h['longest_tokens']} tokens)  "
                  f"{h['cause']}{' ' + ','.join(h['compiles']) if h['compiles'] else ''}")
    share = out["hold_share"]
    print(f"slice: {out['slice_s']:.1f} s; {out['holds']} holds, {out['hold_s']:.1f} s "
          f"({100 * share:.2f} % of it)" if share is not None else "slice: no problems")
    for cause, v in out["by_cause"].items():
        print(f"  {cause}: {v['holds']} holds, {v['seconds']:.1f} s")
    print(f"kernels compiled during inference: {out['compiles']} in all, {out['compiles_after_first_problem']} after "
          f"the first problem started ({', '.join(out['kernels_after_first_problem']) or 'none'})")
    print("slowest steps in the problems: " + ", ".join(
        f"{s['ms']:.0f} ms ({s['prefill_tokens']}+{s['decode_tokens']} tokens)" for s in out["slowest_steps"][:8]))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
