"""The per-seed result files shipped in ``experiments/results/`` are the figures ``mas-train``
prints from ``mas_trainer/baselines.json`` (issue 29: every stored figure traces to a file)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark_scripts import load

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


def test_the_v2_exploration_tables_show_the_shipped_run_files():
    """Every evaluation of a run in ``experiments/results/v2-7x7`` is in the exploration page's
    table row that names the run (the page's figures trace to the file)."""
    page = (RESULTS.parents[1] / "docs" / "v2-exploration.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    for path in sorted(RESULTS.glob("v2-7x7/*.json")):
        for name, run in json.loads(path.read_text())["runs"].items():
            if not run.get("in_table", True):
                continue
            curve = [f"{round(v * 100)}%" for v in run["validation_success_by_rl_step"].values()]
            named = [r for r in rows if f"`{name}`" in r]
            assert named, f"{path.name}: no table row names run {name}"
            assert any(all(v in r for v in curve) for r in named), (name, curve, named)


def test_the_v2_exploration_tables_show_the_paired_test_plays_of_r7():
    """Each test play stored beside R's runs (``test_split_once``: a ``v2_overlap.py`` command ->
    the line it printed, a team against another, level by level) is a row of the exploration
    page with the counts that line holds, read as ``v2_chain`` reads the seed files' plays."""
    counts = load("v2_chain")._COUNTS
    page = (RESULTS.parents[1] / "docs" / "v2-exploration.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    plays = json.loads((RESULTS / "v2-7x7" / "r7.json").read_text())["test_split_once"]
    assert plays, "r7.json stores no test play"
    for line in plays.values():
        match = counts.match(line)
        assert match, line
        _, first, second, first_only, second_only, p = match.groups()
        cells = f"| {first} | {second} | {first_only} | {second_only} | p = {p} |"
        assert any(r.endswith(cells) for r in rows), f"no row of the page ends with {cells}"
