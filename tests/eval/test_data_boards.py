"""The data boards (the paper's code and math benchmarks) on prepared fixture data.

``mas-eval --suite paper-math-v0 --data DIR`` plays every problem of the prepared test files; the
result records the data it was made on, and ``mas-leaderboard validate``/``verify`` check it
against the data here, replaying every episode.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("jsonschema")

from test_openai_engine import FakeServer

from mas_envs.datasets import Options, prepare
from mas_trainer.eval import leaderboard as lb
from mas_trainer.eval.cli import main as eval_main
from mas_trainer.eval.suite import BOARDS, SUITES, load_result, run_suite

FIX = Path(__file__).parents[1] / "fixtures" / "datasets"
ROOT = Path(__file__).resolve().parents[2] / "leaderboards"
DATA_BOARDS = [k for k, b in BOARDS.items() if b.data]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data")
    for name in ("apps", "codecontests", "livecodebench", "aime24", "aime25", "olympiadbench"):
        prepare(name, FIX / name, out)
    return out


def test_paper_suites_name_the_six_benchmarks():
    assert SUITES["paper-code-v0"] == ("livecodebench-v6", "apps", "codecontests")
    assert SUITES["paper-math-v0"] == ("aime24", "aime25", "olympiadbench")
    assert sorted(DATA_BOARDS) == sorted(SUITES["paper-code-v0"] + SUITES["paper-math-v0"])


def test_math_suite_oracle_scores_everything_and_validates_with_replay(data):
    result = run_suite(SUITES["paper-math-v0"], "oracle", data_dir=data)
    for res in result["results"]:
        assert res["aggregate"]["success"] == 1.0, res["board"]
        assert res["data"]["test_sha256"] and res["data"]["problems"] == 3
        assert res["env_kwargs"] == {}  # the data is not an env argument
        assert res["episodes"][0]["task_id"].startswith(res["board"] + "/")
    assert lb.validate(result, root=ROOT, data_dir=data) == []
    assert lb.verify(result, data_dir=data) == []


def test_code_boards_play_every_test_problem_and_validate(data):
    result = run_suite(["apps", "codecontests"], "oracle", data_dir=data)
    assert [r["aggregate"]["episodes"] for r in result["results"]] == [7, 2]
    assert all(r["aggregate"]["success"] == 1.0 for r in result["results"])
    assert lb.validate(result, root=ROOT, data_dir=data) == []
    # LiveCodeBench publishes no reference solutions: a random entry, validated by replay.
    lcb = run_suite(["livecodebench-v6"], "random", data_dir=data)
    assert lcb["results"][0]["aggregate"]["success"] == 0.0
    assert lb.validate(lcb, root=ROOT, data_dir=data) == []


def test_a_served_model_is_scored_through_its_api(data):
    """``openai:<model>`` on a data board: the fake server answers AIME questions it knows."""
    answers = {
        json.loads(line)["question"]: json.loads(line)["answer"]
        for line in (data / "aime24" / "test.jsonl").read_text().splitlines()
    }
    server = FakeServer()

    def reply(body):
        if body is None:  # GET /models
            return 200, {"data": [{"id": "tiny", "root": "/srv/tiny"}]}, 0.0
        prompt = body["messages"][-1]["content"]
        known = next((a for q, a in answers.items() if q in prompt), None)
        if "reasoner" in json.dumps(body) or known is None:
            text = f"\\boxed{{{known}}}" if known else "```python\nprint(1)\n```"
        else:
            text = f"```python\nprint({known})\n```"
        return 200, {"choices": [{"message": {"content": text}}]}, 0.0

    server.default = reply
    try:
        result = run_suite(
            ["aime24"], "openai:tiny", base_url=server.url, data_dir=data, max_new_tokens=64
        )
    finally:
        server.close()
    res = result["results"][0]
    assert res["aggregate"]["success"] == 1.0 and result["policy"]["kind"] == "openai"
    assert lb.validate(result, root=ROOT, data_dir=data) == []


def test_validation_needs_the_same_data(data, tmp_path):
    result = run_suite(["aime24"], "oracle", data_dir=data)
    # No data here: the message says how to prepare it.
    [problem] = lb.validate(result, root=ROOT, data_dir=tmp_path / "none")
    assert "mas-data prepare aime24 --from <download>" in problem
    # Other downloads of AIME 2024 (HuggingFaceH4's layout): another test file.
    other = tmp_path / "other"
    prepare("aime24", FIX / "aime24-h4", other)
    [problem] = lb.validate(result, root=ROOT, data_dir=other)
    assert re.search(r"aime24: the result was made on a aime24 test file with SHA-256", problem)
    # A forged data record is caught the same way.
    forged = json.loads(json.dumps(result))
    forged["results"][0]["data"]["test_sha256"] = "0" * 64
    assert "the result was made on" in lb.validate(forged, root=ROOT, data_dir=data)[0]
    # A result that claims another board of the same env id is replayed against that board.
    moved = json.loads(json.dumps(result))
    moved["results"][0]["board"] = "aime25"
    assert lb.validate(moved, root=ROOT, data_dir=data)


def test_data_prepared_with_other_options_is_refused(tmp_path):
    prepare("livecodebench", FIX / "livecodebench", tmp_path, Options(release="v5_v6"))
    with pytest.raises(ValueError, match=r"needs livecodebench prepared with \{'release': 'v6'\}"):
        run_suite(["livecodebench-v6"], "random", data_dir=tmp_path)


def test_mas_eval_suite_and_leaderboard_cli_take_the_data_folder(data, tmp_path, capsys):
    out = tmp_path / "r.json"
    args = ["--suite", "aime25", "--policy", "oracle", "--output", str(out)]
    assert eval_main([*args, "--data", str(data)]) == 0
    assert "aime25: success 100.0%" in capsys.readouterr().out
    assert eval_main([*args, "--data", str(tmp_path / "none")]) == 2
    assert "mas-data prepare aime25" in capsys.readouterr().err
    root = tmp_path / "leaderboards"
    root.mkdir()
    shutil.copy(ROOT / "schema.json", root / "schema.json")
    assert lb.main(["--root", str(root), "--data", str(data), "validate", str(out)]) == 0
    assert "valid (aime25 100.0%)" in capsys.readouterr().out
    assert lb.main(["--root", str(root), "--data", str(data), "submit", str(out)]) == 0
    placed = root / "results" / "aime25" / "oracle.json.gz"
    assert load_result(placed)["results"][0]["board"] == "aime25"
    entries = lb.load_entries(root)
    assert [e.result["name"] for e in entries["aime25"]] == ["oracle"]
    board_md = (root / "LEADERBOARD.md").read_text()
    assert "## aime25 (mas/Math-v1)" in board_md
    assert "every problem of the prepared aime25 test set" in board_md
