# From the repository root, after `solver import-samples ATTEMPTS --out runs/gptoss-dev` (ATTEMPTS: the recorded
# gpt-oss-120b attempts, not shipped; evaluation/README.md, "Real attempts"):
# the dev recordings under AIMO3's private rules (evaluation/README.md, sim-aimo3's command), 8 and 12 at once, agree:4,
# one time model a run. Each report.md, summary.csv and scores.csv (day by day) is copied here under the model's name.
python evaluation/levers/cold_model.py   # writes h200-gptoss-cold.yaml (the winners' configuration, a stand-in)
for m in evaluation/results/levers-h200/h200-gptoss-cold.yaml h200-gptoss h200-gptoss-marlin; do
  n=$(basename $m .yaml)
  python -m solver simulate runs/gptoss-dev --out runs/levers-h200/$n --trials 300 --reps 8,12 --stopper agree:4 \
      --set solve.workers=0 --scoring aimo3-private --time-model $m --jobs 2 --calibration-reps 0
  cp runs/levers-h200/$n/report.md evaluation/results/levers-h200/$n.report.md
  cp runs/levers-h200/$n/summary.csv evaluation/results/levers-h200/$n.summary.csv
  cp runs/levers-h200/$n/scores.csv evaluation/results/levers-h200/$n.scores.csv
done
