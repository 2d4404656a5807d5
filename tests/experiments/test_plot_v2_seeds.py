"""experiments/plot_v2_seeds.py: the bars are the shipped seeds' paired test counts."""

from __future__ import annotations

import json

import pytest
from benchmark_scripts import ROOT, load

RESULTS = ROOT / "experiments" / "results" / "v2-7x7"


def _seeds() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(RESULTS.glob("seed-*.json"))]


def test_each_seed_is_its_test_comparisons_and_the_last_group_pools_them():
    script = load("plot_v2_seeds")
    groups = script.groups(_seeds())
    # seed 0: L 160 of 200, the tool alone + GRPO 148, the single agent's warm start 155
    assert groups[0] == ("seed 0", 200, {"team": 160, "tool alone": 148, "single agent": 155})
    label, levels, pooled = groups[-1]
    assert label == f"pooled ({len(groups) - 1} seeds)" and levels == 200 * (len(groups) - 1)
    for player in script.PLAYERS:
        assert pooled[player] == sum(got[player] for _, _, got in groups[:-1])


def test_a_seed_whose_test_split_was_not_played_is_named():
    script = load("plot_v2_seeds")
    seed = _seeds()[0]
    seed["test_split_once"] = {}
    with pytest.raises(ValueError, match="seed 0: no test line for l7 against t7b_rl"):
        script.groups([seed])


def test_the_bars_wilson_interval_holds_the_rate_and_stays_in_zero_one():
    script = load("plot_v2_seeds")
    low, high = script.wilson_interval(160, 200)
    assert low == pytest.approx(0.7391, abs=1e-4) and high == pytest.approx(0.8496, abs=1e-4)
    assert script.wilson_interval(0, 200)[0] == pytest.approx(0.0, abs=1e-12)
    assert script.wilson_interval(200, 200)[1] == pytest.approx(1.0, abs=1e-12)
