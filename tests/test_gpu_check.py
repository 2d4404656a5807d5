"""The python part of ``benchmarks/gpu_check.sh`` on a CPU with a tiny shape (so it cannot rot)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("transformers")


def _load():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_runs_on_cpu_with_a_tiny_shape(tmp_path, capsys):
    figures = _load().run(
        [
            "--preset", "tiny", "--device", "cpu", "--dtype", "float32",
            "--engine", "transformers", "--prompt-len", "16", "--gen-len", "8",
            "--learner-batch", "4", "--micro-batch", "4", "--gen-batch", "4",
            "--tasks", "2", "--k", "2", "--turns", "1", "--step-new-tokens", "8",
            "--repeats", "1", "--json", str(tmp_path / "f.json"),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    for key in ("learner_tokens_per_s", "gen_transformers_tokens_per_s", "step_seconds"):
        assert figures[key] > 0, key
    assert 0 < figures["learner_mfu"] < 1 and 0 < figures["gen_transformers_bandwidth_use"] < 1
    # Every generated row ran to max_tokens or a stop token; the step trained K per (root, agent).
    assert figures["step_samples"] >= 2 * 2
    assert figures["vllm"].startswith("skipped")
    assert "vLLM: skipped" in out and "MFU" in out and "AT-GRPO step" in out
    assert (tmp_path / "f.json").is_file()
