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


def test_the_v2_paired_test_plays_are_the_printed_lines_and_on_the_page():
    """Each stored paired play (``paired_test``: a team against another, level by level) holds
    the counts its ``v2_overlap.py`` line printed, and the exploration page shows those counts."""
    page = (RESULTS.parents[1] / "docs" / "v2-exploration.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    plays = [
        play
        for path in sorted(RESULTS.glob("v2-7x7/*.json"))
        for play in json.loads(path.read_text()).get("paired_test", {}).values()
    ]
    assert plays, "no v2 results file stores a paired test play"
    for play in plays:
        n = play["first"], play["second"], play["first_only"], play["second_only"]
        printed = f"team 1 {n[0]}, team 2 {n[1]}, "
        assert printed in play["line"], (printed, play["line"])
        assert f"team 1 only {n[2]}, team 2 only {n[3]}: " in play["line"], play["line"]
        assert play["line"].endswith(f"p = {play['p']:g}"), play["line"]
        cells = f"| {n[0]} | {n[1]} | {n[2]} | {n[3]} | p = {play['p']:g} |"
        assert any(r.endswith(cells) for r in rows), f"no row of the page ends with {cells}"
