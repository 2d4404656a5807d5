#!/usr/bin/env bash
# Set up mas-rl in ./.venv on a fresh Linux machine: the CPU build of torch first (a bare `torch`
# would pull a multi-GB CUDA build), then mas-rl with the extras given as the first argument
# (default: train), and bubblewrap, the sandbox for model-written code, where it is missing.
#
#   scripts/setup.sh                          # the trainer (mas-train, mas-eval)
#   scripts/setup.sh dev                      # everything the test suite needs
#   scripts/setup.sh dev .venv-extras         # the same in another virtual environment
set -euo pipefail
extras="${1:-train}"
venv="${2:-.venv}"
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing bubblewrap (the sandbox for model-written code)"
        apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
    else
        echo "WARNING: bubblewrap (bwrap) is missing: model-written code would run with rlimits" \
             "only. Install it with: sudo apt-get install bubblewrap" >&2
    fi
fi

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# On a CPU-only machine that reaches download.pytorch.org, TORCH_INDEX=https://download.pytorch.org/whl/cpu
# takes the small CPU build; where a local wheel is configured (as on our CI) the plain pin finds it.
"$venv/bin/python" -c "import torch" 2>/dev/null ||
    "$venv/bin/pip" install -q torch==2.13.0 ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
"$venv/bin/pip" install -q -e ".[$extras]"
echo "mas-rl is installed in $venv with extras [$extras]"
