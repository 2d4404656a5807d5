"""``mas-eval``: one parser for both forms, every policy kind in both, defaults from the run.

Each test here failed on the code before issue 10: a ``save_pretrained`` folder (a run's own
``checkpoints/step-N/<policy>`` included) was taken for a run folder and failed with
``mas-eval: error: env``; ``--help`` showed one form's options; the two forms summarised with
different keys and played ``random`` with different generators; the token limit defaulted to 64.
"""

from __future__ import annotations

import json

import pytest

from mas_trainer.config import build_config, config_to_dict
from mas_trainer.eval.cli import main as eval_main
from mas_trainer.outputs import RunDir, find_run


def test_help_lists_every_form_and_every_option(capsys):
    with pytest.raises(SystemExit) as exit_:
        eval_main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "mas-eval --env ID --policy POLICY" in out
    assert "mas-eval --suite NAME --policy POLICY --output" in out
    for option in (
        "--role-map",
        "--env-options",
        "--prompts",
        "--name",
        "--base-url",
        "--tokenizer",
    ):
        assert option in out, option
    assert "OPENAI_BASE_URL" in out and "openai:<model>" in out
    # The token limit's default is explained where it is set.
    assert "rollout.max_new_tokens" in out and "presets" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--suite", "games-v0", "--policy", "oracle", "--role-map", "tool=planner"], "--env only"),
        (["--env", "mas/PlanPath-v0", "--policy", "oracle", "--prompts", "full"], "--suite only"),
        (["--suite", "games-v0", "--policy", "oracle"], "needs --output"),
        (["--policy", "oracle"], "name what to evaluate: --env ID, --suite NAME"),
        (["--env", "mas/PlanPath-v0", "--suite", "games-v0", "--policy", "oracle"], "not allowed"),
    ],
)
def test_options_of_the_other_form_are_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        eval_main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_both_forms_share_one_summary_and_one_random_policy(tmp_path):
    """Same board, same tasks: the env form's summary is the suite's aggregate, key for key."""
    env_out, suite_out = tmp_path / "env.json", tmp_path / "suite.json"
    common = ["--policy", "random", "--episodes", "12", "--seed", "3"]
    assert eval_main(["--env", "mas/PlanPath-v0", *common, "--output", str(env_out)]) == 0
    assert eval_main(["--suite", "mas/PlanPath-v0", *common, "--output", str(suite_out)]) == 0
    single = json.loads(env_out.read_text())
    aggregate = json.loads(suite_out.read_text())["results"][0]["aggregate"]
    assert set(aggregate) == {
        "episodes",
        "successes",
        "success",
        "ci95",
        "turns_mean",
        "format_errors_mean",
        "return_mean",
    }
    assert {k: single[k] for k in aggregate} == aggregate


# ------------------------------------------------------------------------------ model folders


@pytest.fixture
def tiny_run(tmp_path):
    """A mas-train run folder with one checkpoint of a shared tiny policy (no training needed)."""
    pytest.importorskip("torch")
    from mas_trainer.models import build_tiny_model

    # A shared tiny:tiny policy on 4x4 mas/PlanPath-v0 (the default preset now plays 5x5
    # PlanPathCode-v1 with one BPE model per role).
    cfg = build_config(
        "plan-path-tiny",
        overrides=[
            "--rollout.max_new_tokens", "5", "--run.out_dir", "x",
            "--env.id", "mas/PlanPath-v0",
            "--env.options", '{"rows": 4, "cols": 4, "wall_prob": 0.1}',
            "--model.name", "tiny:tiny", "--algo.policy_map", "shared",
        ],
    )  # fmt: skip
    run = RunDir(tmp_path / "run", tensorboard=False)
    run.write_json("config.json", config_to_dict(cfg))
    model, tok = build_tiny_model("tiny", seed=0)
    state = {"step": 3, "policy_of": {"tool": "shared", "planner": "shared"}}

    def write(folder):
        model.save_pretrained(folder / "shared")
        tok.save_pretrained(folder / "shared")
        (folder / "trainer_state.json").write_text(json.dumps(state))

    ckpt = run.save_checkpoint(3, write)
    run.close()
    model.save_pretrained(tmp_path / "plain")
    tok.save_pretrained(tmp_path / "plain")
    return tmp_path / "run", ckpt


def test_find_run_tells_run_checkpoint_policy_folder_and_model_folder_apart(tiny_run, tmp_path):
    run, ckpt = tiny_run
    assert find_run(run).checkpoint == ckpt and find_run(run).policy is None
    assert find_run(ckpt).run_dir == run and find_run(ckpt).checkpoint == ckpt
    ref = find_run(ckpt / "shared")
    assert ref.run_dir == run and ref.checkpoint == ckpt and ref.policy == "shared"
    assert ref.config["rollout"]["max_new_tokens"] == 5
    # A save_pretrained folder has a config.json too, but it is a model, not a run.
    assert find_run(tmp_path / "plain") is None
    assert find_run("tiny:tiny") is None and find_run(tmp_path / "nope") is None


def test_find_run_reads_a_run_killed_mid_save_as_its_newest_complete_checkpoint(
    tiny_run, monkeypatch
):
    """A kill while step 3 was re-saved: its folder moved aside to .old-step-000003-<pid>, the new
    copy never arrived, ``latest`` names it. mas-eval gets step 3 back (RunDir.recover); where the
    folder cannot be written, the newest complete checkpoint there."""
    import os

    run, ckpt = tiny_run
    dead = 2**22 + 12345  # above any pid_max: no such process
    os.replace(ckpt, ckpt.parent / f".old-{ckpt.name}-{dead}")
    ref = find_run(run)
    assert ref.checkpoint == ckpt and (ckpt / "shared" / "config.json").is_file()
    # A read-only run folder: recover fails; latest names a missing folder, step 1 is complete.
    step1 = ckpt.parent / "step-000001"
    os.rename(ckpt, step1)

    def read_only(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(RunDir, "recover", staticmethod(read_only))
    assert (ckpt.parent / "latest").read_text().strip() == ckpt.name
    assert find_run(run).checkpoint == step1


@pytest.mark.parametrize("which", ["plain", "policy_folder", "run", "checkpoint"])
def test_env_form_evaluates_model_folders_and_runs(tiny_run, tmp_path, which, capsys):
    run, ckpt = tiny_run
    policy = {
        "plain": tmp_path / "plain",
        "policy_folder": ckpt / "shared",
        "run": run,
        "checkpoint": ckpt,
    }[which]
    out = tmp_path / "out.json"
    argv = ["--env", "mas/PlanPath-v0", "--policy", str(policy), "--episodes", "2"]
    if which == "plain":  # (its default would be a chat model's 2048 tokens: slow here)
        argv += ["--max-new-tokens", "4"]
    assert eval_main([*argv, "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    err = capsys.readouterr().err
    assert result["episodes"] == 2
    assert result["policy_of"] == {"tool": "shared", "planner": "shared"}
    if which == "plain":
        assert result["max_new_tokens"] == 4 and result["env_options"] == {}
    else:  # anything inside a run evaluates with the run's own token limit and env settings
        assert result["max_new_tokens"] == 5 and "the run's config" in err
        assert result["env_options"] == {"rows": 4, "cols": 4, "wall_prob": 0.1}
        assert result["system_message"] is False  # the tiny presets train without it


@pytest.mark.parametrize("which", ["run", "checkpoint", "policy_folder"])
def test_a_run_without_env_evaluates_on_the_env_it_trained_on(tiny_run, tmp_path, which, capsys):
    """Issue 32: the quickstart's `mas-eval --env mas/PlanPath-v0 --policy runs/<name>` scored a
    5x5 PlanPathCode-v1 run on 10x10 PlanPath-v0 without a word. Now a run (or a checkpoint of
    it) names its own env, options, turn limit, mode and token limit."""
    run, ckpt = tiny_run
    policy = {"run": run, "checkpoint": ckpt, "policy_folder": ckpt / "shared"}[which]
    out = tmp_path / "out.json"
    assert eval_main(["--policy", str(policy), "--episodes", "2", "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["env_id"] == "mas/PlanPath-v0" and result["mode"] == "mas"
    assert result["env_options"] == {"rows": 4, "cols": 4, "wall_prob": 0.1}
    assert result["max_turns"] == 3 and result["max_new_tokens"] == 5
    assert "WARNING" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "asked"),
    [
        (["--env", "mas/Sokoban-v0"], "mas/Sokoban-v0 with options {}"),
        (
            ["--env", "mas/PlanPath-v0", "--env-options", '{"rows": 6, "cols": 6}'],
            'mas/PlanPath-v0 with options {"rows": 6, "cols": 6}',
        ),
        (["--suite", "mas/PlanPath-v0"], "mas/PlanPath-v0 with options {}"),
    ],
)
def test_a_run_evaluated_on_another_env_gets_a_loud_warning(tiny_run, argv, asked, capsys):
    run, _ = tiny_run
    from mas_trainer.eval import cli

    with pytest.MonkeyPatch.context() as mp:  # the warning comes before any episode is played
        mp.setattr(cli, "_env_form", lambda args: None)
        mp.setattr(cli, "_suite_form", lambda args, argv: None)
        assert eval_main([*argv, "--policy", str(run), "--output", "x.json"]) == 0
    err = capsys.readouterr().err
    assert "WARNING" in err and "trained on mas/PlanPath-v0" in err
    assert '{"rows": 4, "cols": 4, "wall_prob": 0.1}' in err and asked in err
    assert "leave out --env" in err


def test_the_default_run_has_a_board_and_a_suite():
    """Boards are fixed once published: when the default preset's env changes, add a new board
    (and suite version) for it instead of editing this one."""
    from mas_trainer.config import PRESETS
    from mas_trainer.eval.suite import BOARDS, SUITES
    from mas_trainer.presets import DEFAULT_PRESET

    env = PRESETS[DEFAULT_PRESET].env
    (board,) = SUITES["default-run-v0"]
    assert (BOARDS[board].env_id, dict(BOARDS[board].kwargs)) == (env.id, env.options)
    assert BOARDS[board].make_env().max_turns == env.max_turns


def test_default_token_limit_comes_from_the_run_then_the_presets():
    from mas_trainer.eval.actors import default_max_new_tokens

    assert default_max_new_tokens("tiny:tiny-bpe", ["mas/PlanPathCode-v1"]) == (
        48,
        "preset plan-path-tiny",
    )
    # No tiny preset trains Sokoban: the tiny models' fallback (the chat models' presets do not
    # count for a tiny model).
    assert default_max_new_tokens("tiny:tiny", ["mas/Sokoban-v0"]) == (
        64,
        "the default for tiny models",
    )
    value, source = default_max_new_tokens("Qwen/Qwen3-8B", ["mas/SokobanCode-v0"])
    assert value == 2048 and source.startswith("preset sokoban-qwen3-")
    assert default_max_new_tokens("tiny:tiny", ["mas/Code-v0"])[0] == 64
    assert default_max_new_tokens("openai:gpt", ["mas/Math-v0"])[0] == 2048
    # A save_pretrained folder is not a tiny: model: a chat model's limit, from the GPU presets.
    assert default_max_new_tokens("/models/m", ["mas/PlanPath-v0"])[0] == 2048


def test_default_token_limit_of_a_run_is_the_runs(tiny_run):
    from mas_trainer.eval.actors import default_max_new_tokens

    run, ckpt = tiny_run
    for path in (run, ckpt, ckpt / "shared"):
        value, source = default_max_new_tokens(str(path), ["mas/Sokoban-v0"])
        assert value == 5 and str(run) in source


def test_results_pair_up_episode_by_episode(tmp_path):
    """``episode_success`` lists each task's outcome in ``task_ids`` order, so two evaluations of
    the same tasks can be compared pair by pair (experiments/paired_episodes.py)."""
    from mas_trainer.eval.play import run_eval

    kw = {"episodes": 30, "env_options": {"rows": 4, "cols": 4}}
    oracle = run_eval("mas/PlanPath-v0", "oracle", **kw)
    rand = run_eval("mas/PlanPath-v0", "random", **kw)
    assert oracle["task_ids"] == rand["task_ids"] and len(rand["task_ids"]) == 30
    assert oracle["episode_success"] == [1] * 30
    assert sum(rand["episode_success"]) == rand["successes"] < 30
    assert set(rand["episode_success"]) <= {0, 1}
    out = tmp_path / "r.json"  # the CLI's result file carries them too
    argv = ["--env", "mas/PlanPath-v0", "--policy", "random", "--episodes", "30"]
    assert eval_main([*argv, "--env-options", '{"rows": 4, "cols": 4}', "--output", str(out)]) == 0
    assert json.loads(out.read_text())["episode_success"] == rand["episode_success"]


def test_paired_episodes_counts_the_pairs_and_tests_them(tmp_path, capsys):
    """experiments/paired_episodes.py on two rows (the oracle and the random policy standing in
    for checkpoints): the pair counts, the exact McNemar p-values, and a refusal when a replay
    does not reproduce the success its row recorded."""
    from benchmark_scripts import load

    from mas_trainer.eval.play import run_eval

    paired = load("paired_episodes")
    assert paired.mcnemar_exact(0, 0) == 1.0
    assert paired.mcnemar_exact(5, 0) == paired.mcnemar_exact(0, 5) == 2 / 32
    assert paired.mcnemar_exact(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)

    opts = {"rows": 4, "cols": 4}
    wins = sum(
        run_eval("mas/PlanPath-v0", "random", episodes=30, env_options=opts)["episode_success"]
    )
    rows = tmp_path / "plan-path-tiny" / "seed-0" / "rows"
    rows.mkdir(parents=True)
    for row, policy, success in (("a", "oracle", 1.0), ("b", "random", wins / 30)):
        cfg = {"env": {"id": "mas/PlanPath-v0", "mode": "mas", "options": opts},
               "eval_episodes": 30, "eval_split": "test"}  # fmt: skip
        result = {"config": cfg, "checkpoint": policy, "success_final": success}
        (rows / f"{row}.json").write_text(json.dumps(result))
    paired.main(["--out-dir", str(tmp_path), "--seed", "0", "--rows", "a", "b"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    p = paired.mcnemar_exact(30 - wins, 0)
    counts = f"{30 - wins} | 0 | {wins} | 0"  # a only, b only, both, neither
    assert last == f"| all (30 pairs) | {counts} | {100 * (30 - wins) / 30:+.1f} | {p:.3g} |"
    result["success_final"] = 1.0  # row b's file now claims more than its policy solves
    (rows / "b.json").write_text(json.dumps(result))
    with pytest.raises(SystemExit, match="the replay solved"):
        paired.main(["--out-dir", str(tmp_path), "--seed", "0", "--rows", "a", "b"])
