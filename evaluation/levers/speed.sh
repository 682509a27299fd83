# What speed buys: each engine's best policy at the fixed 5 hours, on the H100 and on the H200.
# From the repository root, after `solver import-samples ATTEMPTS --out runs/gptoss-dev` (ATTEMPTS: the recorded
# gpt-oss-120b attempts, not shipped; evaluation/README.md, "Real attempts"; imported without --measure-tools, so tool
# calls take no time). Every run: 50 of the 53 problems a day, AIMO3's private scoring, the preset's budget (18,000 s,
# reserve 300 s, clamp 300-900 s), no second round, the same seeds, so each day draws the same attempts under every
# model. Results are copied here under the model's name; evaluation/README.md, "What speed buys", reads them.
# About 55 minutes on 2 shared cores beside other work.
set -e
PY=${PY:-python}
OUT=evaluation/results/levers-speed
COLD=evaluation/results/levers-h200/h200-gptoss-cold.yaml
$PY evaluation/levers/cold_model.py   # the winners' configuration on one H200 (a stand-in)
$PY evaluation/levers/kv_cache_models.py                           # Marlin's KV cache on an H100, two stand-ins (not measured)
COMMON="--retry 0 --clamp 300:900 --scoring aimo3-private --jobs 2"

# 1. Each engine's best policy: solver tune over 36 settings (caps 8/12/16; 8 in flight or all at once; agree:3/4/5/6
#    with lossless, agree:4 alone, none = every attempt runs; banking on), 200 days each, picked by the tune's rule:
#    the cheapest in seconds a problem whose expected score is within 0 points of the best.
for m in h100-gptoss h100-gptoss-marlin $COLD h200-gptoss h200-gptoss-marlin; do
  n=$(basename $m .yaml)
  $PY -m solver tune runs/gptoss-dev --out runs/levers-speed/tune-$n --trials 200 --reps 8,12,16 --workers 8,16 \
      --stopper agree:3,lossless --stopper agree:4 --stopper agree:4,lossless --stopper agree:5,lossless \
      --stopper agree:6,lossless --stopper none --banking on --tolerance 0 --axis seconds --time-model $m $COMMON
  for f in tune.md settings.csv chosen.yaml; do cp runs/levers-speed/tune-$n/$f $OUT/$n.$f; done
done

# 2. The winners' policy (8 at once, agree:4, no banking) and the picks (agree:4 + lossless, banking) on every model,
#    200 days: the baseline of "minutes saved" (the winners' engine of each GPU: h100-gptoss, h200-gptoss-cold) and
#    the H100 Marlin's pick on its two KV-cache stand-ins (not tuned).
for m in h100-gptoss h100-gptoss-marlin $OUT/h100-gptoss-marlin-kv-share.yaml $OUT/h100-gptoss-marlin-kv-bytes.yaml \
         $COLD h200-gptoss h200-gptoss-marlin; do
  n=$(basename $m .yaml)
  $PY -m solver simulate runs/gptoss-dev --out runs/levers-speed/winners-$n --trials 200 --reps 8 --stopper agree:4 \
      --stopper agree:4,lossless --set solve.workers=0 --banking off --banking on --time-model $m \
      --calibration-reps 0 $COMMON
  cp runs/levers-speed/winners-$n/summary.csv $OUT/$n.winners.summary.csv
done

# 3. The most attempts a day affords: every attempt runs to its end (stopper none), all at once, banking on, caps 6
#    to 12, 100 days each (cuts and seconds only; the scores are not read); the largest cap whose day cuts under 0.05
#    problems on average.
for m in h100-gptoss h100-gptoss-marlin $OUT/h100-gptoss-marlin-kv-share.yaml $OUT/h100-gptoss-marlin-kv-bytes.yaml \
         $COLD h200-gptoss h200-gptoss-marlin; do
  n=$(basename $m .yaml)
  $PY -m solver simulate runs/gptoss-dev --out runs/levers-speed/afford-$n --trials 100 --reps 6,7,8,9,10,11,12 \
      --stopper none --set solve.workers=0 --banking on --time-model $m --calibration-reps 0 $COMMON
  cp runs/levers-speed/afford-$n/summary.csv $OUT/$n.afford.summary.csv
done

$PY evaluation/levers/speed_table.py > $OUT/table.md   # the README's table, from the files above
