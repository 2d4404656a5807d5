"""Benchmark suites, result files and leaderboards: what a submitter and a maintainer rely on.

A result file must validate when honest and be rejected, with the problem named, when a score,
an episode, a task id or an env version was changed, even by someone who recomputed the hashes
(replay catches what hashes cannot). The committed seed entries must validate and the generated
tables must be up to date.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jsonschema")

import mas_envs
from mas_envs.registry import GAME_SPLITS
from mas_trainer.eval import leaderboard as lb
from mas_trainer.eval.suite import (
    BOARDS,
    SUITES,
    aggregate,
    board_task_ids,
    episode_hash,
    episodes_hash,
    load_result,
    play_board,
    run_suite,
    save_result,
)

ROOT = Path(__file__).resolve().parents[2] / "leaderboards"
SEED_FILES = sorted([*ROOT.glob("results/*/*.json"), *ROOT.glob("results/*/*.json.gz")])
FAST_BOARDS = ("mas/Sokoban-v0", "mas/PlanPath-v0", "mas/Sudoku-v0")


@pytest.fixture(scope="module")
def planpath_random() -> dict[str, Any]:
    return run_suite(["mas/PlanPath-v0"], "random", command=["test"])


def rehash(result: dict[str, Any]) -> dict[str, Any]:
    """What a careful cheater does after editing: recompute every hash and aggregate."""
    for res in result["results"]:
        for ep in res["episodes"]:
            ep["returns"] = {
                r: sum(s["reward"] for s in ep["steps"] if s["agent"] == r) for r in res["roles"]
            }
            ep["sha256"] = episode_hash(ep)
        res["task_ids"] = [ep["task_id"] for ep in res["episodes"]]
        res["episodes_sha256"] = episodes_hash(res["episodes"])
        res["aggregate"] = aggregate(res["episodes"], res["roles"])
    return result


# ---------------------------------------------------------------------------------- boards


def test_boards_are_registered_versioned_test_split_ids():
    unboarded = sorted(set(mas_envs.list_envs()) - set(BOARDS))
    assert not unboarded, (
        f"env ids without a leaderboard: {unboarded}; add a BoardSpec to mas_trainer/eval/suite.py "
        "BOARDS, a row to leaderboards/README.md, and run `mas-leaderboard seed <id>`"
    )
    for key, board in BOARDS.items():
        assert board.env_id in mas_envs.list_envs()
        if board.data:  # a data board plays prepared files (tests/eval/test_data_boards.py)
            assert board.name == key and board.episodes is None
            continue
        # a board with its own settings (the default run's 5x5 grid) has its own name
        assert key == (board.name if board.kwargs else board.env_id)
        ids = board_task_ids(board)
        assert len(ids) == board.episodes and len(set(ids)) == len(ids)
        assert list(ids) == list(board.make_env().task_ids("test")[: board.episodes])
        train = set(board.make_env().task_ids("train")[:100_000])
        assert not set(ids) & train
    for board in FAST_BOARDS:
        assert all(t in GAME_SPLITS["test"] for t in board_task_ids(BOARDS[board]))
    for boards in SUITES.values():
        assert set(boards) <= set(BOARDS)


def test_readme_defines_every_board():
    readme = (ROOT / "README.md").read_text()
    for key, board in BOARDS.items():
        row = next((line for line in readme.splitlines() if f"`{key}`" in line), None)
        assert row is not None, f"leaderboards/README.md has no row for {key}"
        assert f"| {board.episodes or 'all'} |" in row
        assert board.data in row and board.env_id in row


# ---------------------------------------------------------------------------------- files


def test_result_file_layout_and_reproducible_hashes(planpath_random, tmp_path):
    res = planpath_random["results"][0]
    assert res["env_version"] == 0 and res["split"] == "test"
    assert [ep["task_id"] for ep in res["episodes"]] == board_task_ids(BOARDS["mas/PlanPath-v0"])
    agg = res["aggregate"]
    assert agg["successes"] == sum(ep["success"] for ep in res["episodes"])
    assert agg["ci95"][0] <= agg["success"] <= agg["ci95"][1]
    step = res["episodes"][0]["steps"][0]
    assert set(step) == {"turn", "agent", "prompt_hash", "action", "reward", "parsed"}
    meta = planpath_random["meta"]
    assert meta["packages"]["pettingzoo"] and meta["command"] == "test"
    # Same policy, same seed: the same episodes, byte for byte (what `verify` relies on).
    again = run_suite(["mas/PlanPath-v0"], "random", command=["test"])
    assert again["results"][0]["episodes_sha256"] == res["episodes_sha256"]
    for name in ("r.json", "r.json.gz"):
        path = save_result(planpath_random, tmp_path / name)
        assert load_result(path) == planpath_random
    full = play_board(
        BOARDS["mas/PlanPath-v0"], lambda items: ["#### U"] * len(items), episodes=2, prompts="full"
    )
    assert full["episodes"][0]["steps"][0]["prompt"].strip()


def test_honest_result_validates(planpath_random):
    assert lb.validate(planpath_random, root=ROOT) == []


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lambda r: r["results"][0]["aggregate"].update(success=0.97), "aggregate success is 0.97"),
        (lambda r: r["results"][0]["episodes"].pop(7), "missing episode"),
        (
            lambda r: r["results"][0]["episodes"][3]["steps"][0].update(action="#### R"),
            "episode hash mismatch",
        ),
        (lambda r: r["results"][0].update(env_id="mas/PlanPath-v1"), "env version mismatch"),
        (lambda r: r["results"][0].update(env_id="mas/PlanPath-v7"), "env version mismatch"),
        (lambda r: r["results"][0].update(env_version=1), "env_version 1 does not match"),
        (lambda r: r["results"][0].update(env_kwargs={"rows": 5}), "env_kwargs"),
        (lambda r: r["results"][0]["episodes"][0].pop("steps"), "schema"),
        (lambda r: r.update(format="mas-rl/result-v9"), "schema"),
    ],
)
def test_tampering_is_rejected_by_name(planpath_random, tamper, message):
    bad = copy.deepcopy(planpath_random)
    tamper(bad)
    problems = lb.validate(bad, root=ROOT, replay=False)
    assert any(message in p for p in problems), problems


def test_rehashed_forgeries_are_caught(planpath_random):
    # A success flag the actions did not earn, with every hash and aggregate recomputed.
    bad = copy.deepcopy(planpath_random)
    ep = next(e for e in bad["results"][0]["episodes"] if not e["success"])
    ep["success"] = True
    problems = lb.validate(rehash(bad), root=ROOT)
    assert any("replaying its actions gives success=False" in p for p in problems), problems
    # A task from the train split in place of a test task.
    bad = copy.deepcopy(planpath_random)
    bad["results"][0]["episodes"][0]["task_id"] = 12345
    problems = lb.validate(rehash(bad), root=ROOT, replay=False)
    assert any("task id 12345 is not one of the board's test tasks" in p for p in problems)
    assert any("missing episode" in p for p in problems)
    # A reward the env never gave.
    bad = copy.deepcopy(planpath_random)
    bad["results"][0]["episodes"][2]["steps"][0]["reward"] = 5.0
    problems = lb.validate(rehash(bad), root=ROOT)
    assert any("replaying the action gives reward" in p for p in problems), problems
    # An episode cut short (its last steps dropped).
    bad = copy.deepcopy(planpath_random)
    long_ep = next(e for e in bad["results"][0]["episodes"] if len(e["steps"]) > 2)
    del long_ep["steps"][-1]
    problems = lb.validate(rehash(bad), root=ROOT)
    assert any("missing steps" in p for p in problems), problems
    # A prompt from another env version.
    bad = copy.deepcopy(planpath_random)
    bad["results"][0]["episodes"][1]["steps"][1]["prompt_hash"] = "0" * 16
    problems = lb.validate(rehash(bad), root=ROOT)
    assert any("not the env's prompt" in p for p in problems), problems


def test_verify_reproduces_reference_policies_and_names_a_departure(planpath_random):
    assert lb.verify(planpath_random) == []
    bad = copy.deepcopy(planpath_random)
    bad["results"][0]["episodes"][4]["steps"][0]["action"] = "#### L L"
    problems = lb.verify(rehash(bad))
    assert problems and "departs at step 0" in problems[0] and "action" in problems[0]


def test_verify_reproduces_a_local_model_and_checks_its_weights():
    pytest.importorskip("torch")
    result = run_suite(
        ["mas/PlanPath-v0"], "tiny:tiny", episodes=3, max_new_tokens=8, command=["test"]
    )
    model = result["model"]
    assert len(model["weights_sha256"]["shared"]) == 64 and model["chat_template_sha256"]
    assert result["sampling"]["greedy"] and result["sampling"]["max_tokens"] == 8
    assert lb.verify(result) == []
    other = copy.deepcopy(result)
    other["policy"]["seed"] = 1  # tiny:<preset> initialises from the seed: other weights
    assert "weights" in lb.verify(other)[0]


# ---------------------------------------------------------------------------------- committed


def test_seed_entries_exist_for_every_board():
    # The data boards' seeds need the real data sets, which the repository does not hold.
    for board in (b for b in BOARDS.values() if not b.data):
        names = {p.name for p in (ROOT / "results" / board.slug).iterdir()}
        assert {"random.json.gz", "oracle.json.gz"} <= names, board.env_id
    assert sum(p.stat().st_size for p in SEED_FILES) < 600_000  # the repo stays small


@pytest.mark.parametrize("path", SEED_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_results_validate(path):
    result = load_result(path)
    replay = result["results"][0]["env_id"] in FAST_BOARDS  # sandbox boards: the slow test
    assert lb.validate(result, root=ROOT, replay=replay) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [p for p in SEED_FILES if p.parent.name not in {b.split("/")[1] for b in FAST_BOARDS}],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_committed_sandbox_board_results_replay(path):
    assert lb.validate(load_result(path), root=ROOT) == []


def test_generated_tables_are_up_to_date():
    stale = lb.check_rendered(ROOT)
    assert not stale, f"stale generated files {stale}: run `mas-leaderboard render`"


def test_oracle_tops_and_random_floors_each_board():
    for env_id, entries in lb.load_entries(ROOT).items():
        if BOARDS[env_id].data and not entries:
            continue  # not seeded: the repository holds no real data set
        by_name = {e.result["name"]: e for e in entries}
        assert by_name["oracle"].agg["success"] == 1.0, env_id
        assert by_name["oracle"].verified, env_id
        assert by_name["random"].agg["success"] < 0.5, env_id


# ---------------------------------------------------------------------------------- submit, CLI


@pytest.fixture
def board_root(tmp_path) -> Path:
    root = tmp_path / "leaderboards"
    root.mkdir()
    shutil.copy(ROOT / "schema.json", root / "schema.json")
    return root


def test_submit_places_renders_and_refuses_duplicates(
    planpath_random, board_root, tmp_path, capsys
):
    src = save_result({**planpath_random, "name": "My Team/Model 1"}, tmp_path / "mine.json")
    assert lb.main(["--root", str(board_root), "submit", str(src)]) == 0
    placed = board_root / "results" / "PlanPath-v0" / "my-team-model-1.json.gz"
    assert placed.is_file()
    pct = f"{100 * planpath_random['results'][0]['aggregate']['success']:.1f}"
    assert f"| mas/PlanPath-v0 | {pct} |" in capsys.readouterr().out
    assert (
        load_result(placed)["results"][0]["episodes_sha256"]
        == (planpath_random["results"][0]["episodes_sha256"])
    )
    table = (board_root / "LEADERBOARD.md").read_text()
    assert "My Team/Model 1" in table and "<svg" in (board_root / "index.html").read_text()
    assert lb.check_rendered(board_root) == []
    assert lb.main(["--root", str(board_root), "submit", str(src)]) == 2  # exists
    assert "exists" in capsys.readouterr().err
    # An invalid file is rejected with its problem named, and nothing is placed.
    bad = copy.deepcopy(planpath_random)
    bad["name"] = "cheater"
    bad["results"][0]["aggregate"]["success"] = 0.9
    bad_path = save_result(bad, tmp_path / "bad.json")
    assert lb.main(["--root", str(board_root), "submit", str(bad_path)]) == 1
    assert "aggregate success is 0.9" in capsys.readouterr().err
    assert not (board_root / "results" / "PlanPath-v0" / "cheater.json.gz").exists()


def test_verified_mark_follows_the_file(planpath_random, board_root, tmp_path):
    src = save_result({**planpath_random, "name": "entry"}, tmp_path / "e.json")
    (placed,) = lb.submit(src, board_root)
    assert lb.main(["--root", str(board_root), "verify", "--record", str(placed)]) == 0
    (entry,) = lb.load_entries(board_root)["mas/PlanPath-v0"]
    assert entry.verified and "| yes |" in (board_root / "LEADERBOARD.md").read_text()
    # Editing the file after verification drops the mark, and render output goes stale.
    data = load_result(placed)
    data["name"] = "entry (edited)"
    save_result(data, placed)
    (entry,) = lb.load_entries(board_root)["mas/PlanPath-v0"]
    assert not entry.verified
    assert lb.main(["--root", str(board_root), "render", "--check"]) == 1
    assert lb.main(["--root", str(board_root), "render"]) == 0
    assert lb.main(["--root", str(board_root), "render", "--check"]) == 0


def test_board_folder_must_hold_its_own_env(planpath_random, board_root):
    folder = board_root / "results" / "Sokoban-v0"
    save_result(planpath_random, folder / "wrong.json")
    with pytest.raises(lb.ValidationError, match="exactly one result, for board mas/Sokoban"):
        lb.load_entries(board_root)


def test_mas_eval_suite_writes_a_result_file(tmp_path, capsys):
    from mas_trainer.eval.cli import main as eval_main

    out = tmp_path / "r.json"
    code = eval_main(
        ["--suite", "games-v0", "--policy", "oracle", "--episodes", "5", "--output", str(out)]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert [r["env_id"] for r in result["results"]] == list(SUITES["games-v0"])
    assert all(r["aggregate"]["episodes"] == 5 for r in result["results"])
    assert "mas/Sudoku-v0: success 100.0%" in capsys.readouterr().out
    assert result["meta"]["command"].startswith("mas-eval --suite games-v0")
    assert eval_main(["--suite", "games-v9", "--policy", "oracle", "--output", str(out)]) == 2
    assert "did you mean 'games-v0'" in capsys.readouterr().err


def test_validate_cli_exit_codes(planpath_random, tmp_path, capsys):
    good = save_result(planpath_random, tmp_path / "good.json")
    assert lb.main(["validate", "--no-replay", str(good)]) == 0
    pct = f"{100 * planpath_random['results'][0]['aggregate']['success']:.1f}"
    assert f"valid (mas/PlanPath-v0 {pct}%)" in capsys.readouterr().out
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert lb.main(["validate", str(broken)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
