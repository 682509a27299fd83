"""The winners' configuration on one H200 (Triton, no warm-up), as a stand-in model: no run fitted it, so it is
``h200-gptoss`` (Triton with the warm-up, no holds) with its step and context times divided by 1 - the share of
the cold run ``h200_day-a-cold.json`` the engine held (its compiles), and that run's start without the warm-up.
Run from the repository root: ``python evaluation/levers/cold_model.py`` writes
``evaluation/results/levers-h200/h200-gptoss-cold.yaml``."""

import json
from dataclasses import replace
from pathlib import Path

from solver.timing.fit import day_fit
from solver.timing.model import dump, load_time_model

HERE = Path(__file__).resolve().parents[1] / "results" / "levers-h200"  # where its result goes
RUN = "h200_day-a-cold.json"

m = load_time_model("h200-gptoss")
day = json.loads(Path("benchmarks/results", RUN).read_text())
share = day_fit(day, m.prefill_tokens_per_s).hold_share
keep = 1 - share
why = f"h200-gptoss's, divided by 1 - {share:.3f}: the share of {RUN} the engine held (Triton's compiles, no warm-up)"
cold = replace(m, name="h200-gptoss-cold",
               description="the winners' configuration (the h100-gptoss preset with Triton and no warm-up) on one "
                           "H200: h200-gptoss slowed by the cold run's holds (a stand-in, not fitted)",
               step_s=tuple((b, round(s / keep, 7)) for b, s in m.step_s),
               context_s=float(f"{m.context_s / keep:.4g}"), start_s=124.5,
               sources={**m.sources, **{f"step_s.{b}": why for b, _ in m.step_s}, "context_s": why,
                        "start_s": f"{RUN}: the engine's open without the warm-up, 124.5 s"})
(HERE / "h200-gptoss-cold.yaml").write_text(dump(cold))
print(f"hold share {share:.4f}; step_s {cold.step_s}; context_s {cold.context_s}")
