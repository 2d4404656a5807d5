"""The default run learns: RL adds at least ten points over its own warm start (slow: the
default ``mas-train`` run, ~19 CPU minutes on a 2-core AMD EPYC without AVX-512; CI runs it as
its ``effect`` step, ``python3 scripts/ci.py effect``, in the background beside the other suites).

``mas-train`` with no arguments (the ``plan-path-tiny`` preset, seed 0, its full budget) against
its own warm start on the preset's 200 held-out test tasks, run by
``experiments/compare_baselines.py`` (rows ``mas`` and ``mas-per-role``). Issue 11's target is +20
points for RL over the warm start; this test fails below half of it (+10). Seed 0 measured +83.5
points (docs/results.md: five seeds, their spread and intervals), so the threshold leaves room for
numerical differences between machines, and a change that removes the effect fails it.

What it does not guard: the team's margin over the single agent. That comparison pits a team that
can run code against an agent that cannot (docs/results.md, "What the tiny models learn, and what
they do not"), so it is measured by ``experiments/compare_baselines.py`` over five seeds, not
asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "compare_baselines.py"


def test_rl_adds_at_least_ten_points_over_the_warm_start(tmp_path):
    cmd = [sys.executable, str(SCRIPT), "--seed", "0", "--out-dir", str(tmp_path)]
    rows = ["--rows", "mas", "mas-per-role", "--out", str(tmp_path / "rows.md")]
    subprocess.run([*cmd, *rows], check=True, timeout=3600)
    folder = tmp_path / "plan-path-tiny" / "seed-0" / "rows"
    res = {k: json.loads((folder / f"{k}.json").read_text()) for k in ("mas", "mas-per-role")}
    team = res["mas-per-role"]["success_final"]
    assert res["mas-per-role"]["config"]["eval_episodes"] >= 200
    rl_gain = team - res["mas"]["success_final"]
    assert rl_gain >= 0.10, f"RL's gain over the warm start fell to {100 * rl_gain:+.1f} points"
