#!/usr/bin/env bash
# GPU check for a lent machine (at most 8 minutes on one H100; torch and transformers installed,
# no network): random-init Qwen3 models of the paper's shapes; the learner at paper lengths
# (1.7B), FSDP2 over NCCL with world size 1 (8B cut to 4 layers), a checkpoint save and load, the
# transformers engine, and vLLM when it imports. Prints MFU, tokens/s and peak memory beside
# `mas-train --plan`'s prediction (benchmarks/gpu_check.py has the details).
# pettingzoo and gymnasium (mas_trainer imports mas_envs) come as wheels in wheels/ when the
# machine has no index: `pip download --only-binary=:all: -d wheels pettingzoo==1.27.0
# gymnasium==1.4.0` on a machine with network (< 5 MB).
# Usage: benchmarks/gpu_check.sh [extra args of benchmarks/gpu_check.py]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_check: torch sees no CUDA device')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if ! "$PY" -c "import pettingzoo, gymnasium" >/dev/null 2>&1; then
    "$PY" -m pip install --quiet --no-index --find-links wheels pettingzoo gymnasium
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec timeout 480 "$PY" benchmarks/gpu_check.py --json gpu_check.json "$@"
