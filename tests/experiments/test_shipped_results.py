"""The per-seed result files shipped in ``experiments/results/`` are the figures ``mas-train``
prints from ``mas_trainer/baselines.json`` (issue 29: every stored figure traces to a file)."""

from __future__ import annotations

import json
from pathlib import Path

from mas_trainer import baselines

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results"


def test_the_stored_rows_are_the_shipped_result_files():
    stored = json.loads(baselines.PATH.read_text())
    files = sorted(RESULTS.glob("*/seed-*/rows/*.json"))
    shipped = {(p.parts[-4], p.stem) for p in files}
    assert {("plan-path-tiny", "tool"), ("plan-path-tiny", "tool-grpo")} <= shipped
    for preset, key in shipped:  # every seed of a shipped row has its file
        seeds = stored[preset]["rows"][key]["seeds"]
        assert [p for p in files if p.parts[-4] == preset and p.stem == key] == [
            RESULTS / preset / f"seed-{s}" / "rows" / f"{key}.json" for s in sorted(seeds)
        ]
    for path in files:
        preset, seed, key = path.parts[-4], int(path.parts[-3].removeprefix("seed-")), path.stem
        result = json.loads(path.read_text())
        row = stored[preset]["rows"][key]
        assert row["per_seed"][row["seeds"].index(seed)] == result["success_final"], path
        assert result["commit"] in row["measured"]["commits"], path
        assert result["config"]["eval_episodes"] == row["episodes_per_seed"], path
        assert result["config"]["seed"] == seed and result["key"] == key, path
