"""``benchmarks/gpu_check.py`` on a CPU with a tiny shape (so it cannot rot): the same shrunk paper
preset, end to end, and the same report the GPU run prints."""

from __future__ import annotations

import pytest
from benchmark_scripts import load

pytest.importorskip("transformers")


def test_gpu_check_runs_a_shrunk_paper_preset_on_cpu(tmp_path, capsys):
    figures = load("gpu_check").run(
        [
            "--shape", "tiny-bpe", "--device", "cpu", "--engine", "transformers",
            "--tasks", "1", "--new-tokens", "8", "--steps", "2", "--eval-episodes", "1",
            "--prompt-len", "16", "--gen-len", "8", "--learner-batch", "4", "--repeats", "1",
            "--json", str(tmp_path / "f.json"),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert figures["preset"] == "plan-path-qwen3-1.7b" and figures["run_steps"] == 2
    for key in ("learner_tokens_per_s", "gen_tokens_per_s", "step_seconds"):
        assert figures[key] > 0, key
    for key in ("learner_mfu", "gen_mfu", "gen_bandwidth_use", "step_mfu"):
        assert 0 < figures[key] < 1, key
    # Two per-role policies, K=4 candidates for each of the root's agents at least once.
    assert figures["step_samples"] >= 4 * 2
    assert "float32 masters, bfloat16 compute, transformers engine in bfloat16" in out
    assert "MFU" in out and "AT-GRPO step" in out and "of memory bandwidth" in out
    assert (tmp_path / "f.json").is_file()
