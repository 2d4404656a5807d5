"""experiments/plot_v2_frontier.py: the bars are the shipped 7x7 results file's figures."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark_scripts import load

RESULTS = Path(__file__).parents[2] / "experiments" / "results" / "v2-7x7" / "seed-0.json"


def test_each_bar_is_a_runs_warm_start_and_its_last_rl_evaluation():
    script = load("plot_v2_frontier")
    values = {label: (warm, last) for label, warm, last in script.bar_values(
        json.loads(RESULTS.read_text())["runs"]
    )}  # fmt: skip
    assert values["L"] == (0.83, 0.78)
    assert values["tool alone\n3,000"] == (0.72, 0.73)
    assert values["M"] == (0.81, 0.81)  # no RL run
    assert values["H"] == (0.51, 0.59)  # H's RL goes on in h7_rl2
    assert len(values) == len(script.BARS)
