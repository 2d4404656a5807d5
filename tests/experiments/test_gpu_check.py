"""``benchmarks/gpu_check.py --dry-run``: every GPU step of the check (learner, checkpoint save and
load, transformers engine, FSDP2 over a group of one) end to end on the CPU at tiny shapes, with
the report the GPU run prints, so the script cannot rot before a GPU is lent."""

from __future__ import annotations

import json

import pytest
from benchmark_scripts import load

pytest.importorskip("transformers")


def test_gpu_check_dry_run_runs_every_section_on_cpu(tmp_path, capsys):
    figures = load("gpu_check").run(
        ["--dry-run", "--repeats", "1", "--json", str(tmp_path / "f.json")]
    )
    out = capsys.readouterr().out
    assert figures["dry_run"] and figures["device"] == "cpu" and not figures["skipped"]
    learner, fsdp = figures["learner"], figures["fsdp"]
    for section in (learner, fsdp):
        assert section["tokens_per_s"] > 0 and section["flops_per_update"] > 0
        assert 0 < section["mfu"] < 1
        assert section["plan_peak_gib"] > 0  # --plan's prediction sits beside the measurement
    assert fsdp["backend"] == "gloo" and fsdp["layers"] == 2
    ckpt = figures["checkpoint"]
    # The state on disk holds fp32 weights and two AdamW moments: what --plan budgets.
    assert ckpt["disk_gb"] == pytest.approx(ckpt["plan_disk_gb"], rel=0.05)
    assert figures["engine"]["tokens_per_s"] > 0
    for line in ("measured vs", "--plan", "checkpoint: save", "transformers engine", "FSDP2 (gloo"):
        assert line in out
    assert json.loads((tmp_path / "f.json").read_text())["learner"]["params"] > 0


def test_gpu_check_skips_sections_past_its_time_budget(capsys):
    """On a lent machine the check must end within its budget: a section that would pass it is
    skipped and named, and the learner section (the one the budget is sized around) still runs."""
    figures = load("gpu_check").run(["--dry-run", "--repeats", "1", "--budget-s", "0"])
    out = capsys.readouterr().out
    assert figures["skipped"] == ["checkpoint", "engine", "fsdp"]
    assert figures["learner"]["tokens_per_s"] > 0
    assert "checkpoint" not in figures and "fsdp" not in figures
    assert "skipped (time budget 0 s): checkpoint, engine, fsdp" in out
