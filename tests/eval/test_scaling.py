"""``mas-eval --reasoner-scaling``: one command plays a math board per team size, writes the figure.

A fake served model answers each reasoner prompt right with probability ~0.45 (by a hash of the
prompt, so the run is reproducible) and wrong answers are spread out: the team's answer (the
largest group of agreeing reasoners) is then right more often with more reasoners, as in the
paper's scaling figure.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from test_openai_engine import FakeServer

from mas_envs.math.loaders import problem_to_record
from mas_envs.math.problem import Problem
from mas_trainer.eval.cli import main as eval_main
from mas_trainer.eval.scaling import reasoner_scaling
from mas_trainer.eval.suite import load_result


def _aime_like(data: Path, n: int = 40) -> None:
    """A prepared aime24 test file of ``n`` problems (the board reads any prepared file)."""
    folder = data / "aime24"
    folder.mkdir(parents=True)
    rows = [
        problem_to_record(
            Problem(
                f"aime24/{i}",
                f"Problem {i}: compute {i} + 100.",
                str(i + 100),
                "aime24",
                split="test",
            )
        )
        for i in range(n)
    ]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = {
        "format": "mas-rl/data-manifest-v1",
        "name": "aime24",
        "family": "math",
        "options": {},
        "inputs": [],
        "splits": {"test": {"problems": n}},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _noisy_reasoner(body):
    if body is None:  # GET /models
        return 200, {"data": [{"id": "noisy", "root": "/srv/noisy"}]}, 0.0
    prompt = body["messages"][-1]["content"]
    if "The tool agent's program this turn" not in prompt and "reasoner" not in str(body):
        return 200, {"choices": [{"message": {"content": "```python\nprint(0)\n```"}}]}, 0.0
    i = int(re.search(r"Problem (\d+):", prompt).group(1))
    h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    answer = i + 100 if h % 100 < 45 else 1000 + h % 997
    return 200, {"choices": [{"message": {"content": f"\\boxed{{{answer}}}"}}]}, 0.0


def test_more_reasoners_raise_accuracy_and_the_figure_is_written(tmp_path):
    data = tmp_path / "data"
    _aime_like(data)
    server = FakeServer()
    server.default = _noisy_reasoner
    try:
        summary = reasoner_scaling(
            "aime24",
            "openai:noisy",
            [1, 3, 5],
            tmp_path / "out",
            data_dir=data,
            base_url=server.url,
            max_new_tokens=64,
        )
    finally:
        server.close()
    acc = {p["reasoners"]: p["success"] for p in summary["points"]}
    assert acc[1] < acc[3] <= acc[5], acc
    out = tmp_path / "out"
    png = (out / "scaling.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert json.loads((out / "scaling.json").read_text())["points"][2]["reasoners"] == 5
    res = load_result(out / "reasoners-3.json.gz")["results"][0]
    assert res["env_kwargs"] == {"n_reasoners": 3}  # an experiment, not a leaderboard entry
    assert res["roles"] == ["tool", "reasoner_0", "reasoner_1", "reasoner_2"]


def test_one_command_from_the_cli(tmp_path, capsys):
    data = tmp_path / "data"
    _aime_like(data, 4)
    rc = eval_main(
        [
            "--reasoner-scaling",
            "aime24",
            "--policy",
            "oracle",
            "--data",
            str(data),
            "--reasoners",
            "1",
            "2",
            "--output",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "aime24, 2 reasoners: success 100.0%" in out and "scaling.png" in out
    assert (
        eval_main(
            [
                "--reasoner-scaling",
                "apps",
                "--policy",
                "oracle",
                "--output",
                str(tmp_path / "p"),
            ]
        )
        == 2
    )
    assert "needs a math board" in capsys.readouterr().err
