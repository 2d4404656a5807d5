"""The default run shows the paper's effect (slow: two processes side by side; 324 and 257 CPU
seconds, ~5.5 minutes on 2 idle cores of the machine the figures below come from; on a 2-core AMD
EPYC without AVX-512, 1,139 and ~920 CPU seconds, ~18-20 minutes, ~26 beside other tests; CI
runs it as its ``effect`` step, ``python3 scripts/ci.py effect``, in the background after the
quick suite, beside the other suites).

``mas-train`` with no arguments (the ``plan-path-tiny`` preset, seed 0, its full budget) against its
own warm start and against the single agent + GRPO at the same budget, all on the preset's 200
held-out test tasks, run by ``experiments/compare_baselines.py`` (rows ``mas``, ``mas-per-role``,
``single``, ``single-grpo``; the team's rows and the single agent's in two processes side by
side). Issue 11's targets are +20 points for RL over the warm start and +20 for the team over the
single agent; this test fails below half of each (+10). Seed 0 measured +83.5 and +30.0 points
(docs/results.md: five seeds, their spread and intervals), so the thresholds leave room for
numerical differences between machines, and a change that removes either effect fails it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "compare_baselines.py"


def test_rl_and_the_team_each_add_at_least_ten_points(tmp_path):
    common = [sys.executable, str(SCRIPT), "--seed", "0", "--out-dir", str(tmp_path)]
    procs = [
        subprocess.Popen([*common, "--rows", *rows, "--out", str(tmp_path / f"{i}.md")])
        for i, rows in enumerate((["mas", "mas-per-role"], ["single", "single-grpo"]))
    ]
    assert [p.wait(timeout=3600) for p in procs] == [0, 0]
    folder = tmp_path / "plan-path-tiny" / "seed-0" / "rows"
    res = {k: json.loads((folder / f"{k}.json").read_text()) for k in
           ("mas", "mas-per-role", "single", "single-grpo")}  # fmt: skip
    team = res["mas-per-role"]["success_final"]
    assert res["mas-per-role"]["config"]["eval_episodes"] >= 200
    rl_gain = team - res["mas"]["success_final"]
    team_gain = team - res["single-grpo"]["success_final"]
    assert rl_gain >= 0.10, f"RL's gain over the warm start fell to {100 * rl_gain:+.1f} points"
    assert team_gain >= 0.10, (
        f"the team's gain over single agent + GRPO fell to {100 * team_gain:+.1f} points"
    )
    # The RL row is the default mas-train run (the test_compare_baselines test checks it step
    # for step) and the single agent had twice the tasks per RL step (the same samples).
    assert (
        res["single-grpo"]["config"]["tasks_per_step"]
        == 2 * res["mas-per-role"]["config"]["tasks_per_step"]
    )
