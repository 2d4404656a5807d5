"""``mas_trainer.baselines``: mas-train finds the shipped measured figures for its own config."""

from __future__ import annotations

import json

from mas_trainer import baselines
from mas_trainer.config import build_config


def test_the_default_run_finds_the_shipped_measurement():
    found = baselines.lookup(build_config("plan-path-tiny", overrides=["--run.seed", "7"]))
    assert found is not None and "single-grpo" in found["rows"]


def test_settings_added_after_a_measurement_count_at_their_default(tmp_path):
    cfg = build_config("plan-path-tiny")
    measured = baselines.fingerprint(cfg)
    del measured["algo"]["drop_low_mean"]  # as if the field did not exist when it was measured
    path = tmp_path / "baselines.json"
    path.write_text(json.dumps({"plan-path-tiny": {"config": measured, "rows": {}}}))
    assert baselines.lookup(cfg, path) is not None
    moved = build_config("plan-path-tiny", overrides=["--algo.drop_low_mean", "0.3"])
    assert baselines.lookup(moved, path) is None  # set away from its default: another config
    other = build_config("plan-path-tiny", overrides=["--optim.steps", "5"])
    assert baselines.lookup(other, path) is None
