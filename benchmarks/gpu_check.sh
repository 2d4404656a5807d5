#!/usr/bin/env bash
# GPU readiness check (< 5 minutes on one H200, nothing downloaded): one paper preset
# (plan-path-qwen3-1.7b: fp32 masters, bf16 compute, vLLM in bf16, per-role policies) shrunk to a
# few RL steps on random weights of Qwen3-1.7B's shape, end to end through mas-train's loop; prints
# learner MFU, generation tokens/s (vLLM when installed, else the transformers engine) and step
# time, as ratios of the card's bf16 peak and HBM bandwidth (H200: 989 TFLOP/s, 4.8 TB/s; pass
# --peak-tflops/--hbm-tbps for another card).
# Usage: benchmarks/gpu_check.sh [extra args of benchmarks/gpu_check.py, e.g. --preset sokoban-qwen3-1.7b]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_check: torch sees no CUDA device')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if ! "$PY" -c "import vllm" >/dev/null 2>&1; then
    echo "vLLM is not installed: generation is measured on the transformers engine"
fi
exec timeout 600 "$PY" benchmarks/gpu_check.py --json gpu_check.json "$@"
