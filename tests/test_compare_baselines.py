"""``benchmarks/compare_baselines.py`` at a tiny budget: its rows are what they claim to be."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

pytestmark = pytest.mark.slow  # six short trainer runs (~20 s on one CPU thread)

BUDGET = [
    "--warmstart-steps", "3", "--steps", "2", "--episodes", "3",
    "--rollout.tasks_per_step", "2", "--optim.warmstart_episodes", "8",
    "--run.log_transcripts", "0",
]  # fmt: skip


def _load():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "compare_baselines.py"
    spec = importlib.util.spec_from_file_location("compare_baselines", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rl_metrics(run_dir: Path) -> list[dict]:
    keep = ("rollout/success", "rollout/samples", "loss/policy", "eval/success")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: r.get(k) for k in ("step", *keep)} for r in rows if r["phase"] in ("rl", "final")]


def test_rows_share_warm_starts_and_the_shared_row_is_mas_train(tmp_path, monkeypatch):
    module = _load()
    out = tmp_path / "cmp"
    argv = ["compare_baselines.py", *BUDGET, "--out-dir", str(out), "--out", str(out / "t.md")]
    monkeypatch.setattr(sys, "argv", argv)
    module.main()

    root = out / "plan-path-tiny" / "seed-0"
    rows = {k: json.loads((root / "rows" / f"{k}.json").read_text()) for k in module.ROWS}
    # One warm start per mode; every row of a mode reports that warm start's success.
    assert sorted(p.name for p in root.glob("*-warmstart")) == ["mas-warmstart", "single-warmstart"]
    for key, row in rows.items():
        ws = json.loads((root / f"{row['mode']}-warmstart.json").read_text())
        assert row["success_after_ws"] == ws["success_warmstart"], key
        assert row["config"]["eval_episodes"] == 3 and row["config"]["seed"] == 0
        assert row["config"]["warmstart_steps"] == 3
        assert row["rl_steps"] == (0 if module.ROWS[key][2] is None else 2)
    # Unset budget fields keep the preset's values.
    assert rows["mas-shared"]["config"]["temperature"] == 0.7
    assert rows["mas-shared"]["config"]["k"] == 4
    # The per-role row trained one model per role, each starting from the warm start.
    final = Path(rows["mas-per-role"]["checkpoint"])
    assert (final / "planner").is_dir() and (final / "tool").is_dir()
    assert not (final / "shared").exists()

    # The shared MAS row is the run plain mas-train makes with the same settings, step for step.
    from mas_trainer.config import build_config
    from mas_trainer.train import train

    overrides = [
        "--optim.warmstart_steps", "3", "--optim.steps", "2", "--eval.episodes", "3",
        "--rollout.tasks_per_step", "2", "--optim.warmstart_episodes", "8",
        "--run.log_transcripts", "0", "--run.progress", "false",
    ]  # fmt: skip
    summary = train(build_config("plan-path-tiny", overrides=overrides), run_path=tmp_path / "ref")
    assert summary["success_final"] == rows["mas-shared"]["success_final"]
    assert _rl_metrics(tmp_path / "ref") == _rl_metrics(root / "mas-shared")
    assert len(_rl_metrics(tmp_path / "ref")) == 3  # 2 RL steps + the final eval

    table = (out / "t.md").read_text()
    for label, _, _ in module.ROWS.values():
        assert f"| {label} |" in table
