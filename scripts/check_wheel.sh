#!/usr/bin/env bash
# Build mas-rl's wheel, install it into a fresh venv outside the repository and run what a user
# runs first: `mas-train --help`, `mas-eval` on the default run's board (the oracle, and a tiny
# model whose tokenizer is built from the packaged task texts) and README.md's PettingZoo loop.
# Proves that the package data (task files, tokenizer corpora, every env package) ships in the
# wheel: nothing runs from the clone. CI: `scripts/check_wheel.sh` (11 minutes on a loaded 2-core
# machine, most of it installing torch and transformers).
#
#   scripts/check_wheel.sh [WORK_DIR]        # default: a temporary folder, removed at the end
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
[ -n "${1:-}" ] || trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1
python="${PYTHON:-python3}"

echo "== building the wheel"
"$python" -m pip wheel -q --no-deps -w "$work/dist" "$repo"
wheel="$(ls "$work"/dist/mas_rl-*.whl)"
echo "   $wheel"

echo "== installing it into a fresh venv ($work/venv): torch==2.13.0 first"
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q torch==2.13.0 ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
"$work/venv/bin/pip" install -q "$wheel[train]"

cd "$work"  # nothing below may import from the clone
unset PYTHONPATH
run() { echo "\$ $*"; "$@"; }
installed="$("$work/venv/bin/python" -c 'import mas_envs; print(mas_envs.__file__)')"
case "$installed" in
    "$work"/venv/*) echo "   mas_envs imports from $installed" ;;
    *) echo "FAIL: mas_envs imports from $installed, not the venv" >&2; exit 1 ;;
esac

echo "== mas-train --help"
run "$work/venv/bin/mas-train" --help > train-help.txt
grep -q "plan-path-tiny" train-help.txt

echo "== mas-eval on the default run's board (suite default-run-v0)"
run "$work/venv/bin/mas-eval" --suite default-run-v0 --policy oracle --episodes 10 --output oracle.json
run "$work/venv/bin/mas-eval" --suite default-run-v0 --policy tiny:tiny-bpe --episodes 2 \
    --output tiny.json
run "$work/venv/bin/mas-eval" --env mas/Code-v0 --policy oracle --episodes 2
run "$work/venv/bin/mas-eval" --env mas/Math-v1 --policy oracle --episodes 2

echo "== README.md's PettingZoo loop"
"$work/venv/bin/python" - "$repo/README.md" > readme_loop.py <<'PY'
import re, sys
text = open(sys.argv[1]).read()
print(re.search(r"## A PettingZoo loop\n\n```python\n(.*?)^```", text, re.M | re.S).group(1))
PY
run "$work/venv/bin/python" readme_loop.py

echo "OK: the wheel installs and runs outside the repository"
