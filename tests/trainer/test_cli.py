"""mas-train and mas-eval from the command line: help, errors, evaluation output."""

from __future__ import annotations

import dataclasses
import json

import pytest

import mas_envs
from mas_trainer.cli import train_main
from mas_trainer.config import PRESETS, SECTIONS
from mas_trainer.eval.cli import main as eval_main


def test_help_lists_every_field_and_preset(capsys):
    assert train_main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in PRESETS:
        assert name in out
    cfg = PRESETS["plan-path-tiny"]
    for section in SECTIONS:
        for f in dataclasses.fields(getattr(cfg, section)):
            assert f"--{section}.{f.name} " in out


def test_print_config_shows_the_resolved_values(capsys):
    assert train_main(["sokoban-qwen3-8b", "--rollout.k", "6", "--print-config"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["env"]["id"] == "mas/SokobanCode-v0" and cfg["rollout"]["k"] == 6


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--optim.lr", "abc"], "expects a number"),
        (["--optim.lrr", "1"], "did you mean 'lr'"),
        (["no-such-preset"], "unknown preset"),
        (["--config", "missing.toml"], "does not exist"),
        (["--run.resume", "/no/such/run"], "is it a run folder"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(argv, message, capsys):
    assert train_main(argv) == 2
    assert message in capsys.readouterr().err


def test_missing_model_is_a_clear_error(tmp_path, capsys):
    pytest.importorskip("torch")
    code = train_main(
        [
            "--model.name",
            str(tmp_path / "nope"),
            "--run.out_dir",
            str(tmp_path),
            "--run.progress",
            "false",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "nope" in err and "tiny:" in err


def test_eval_oracle_writes_json_with_a_confidence_interval(tmp_path, capsys):
    out = tmp_path / "res" / "oracle.json"
    code = eval_main(
        [
            "--env",
            "mas/PlanPath-v0",
            "--policy",
            "oracle",
            "--episodes",
            "20",
            "--env-options",
            '{"rows": 5, "cols": 5}',
            "--output",
            str(out),
        ]
    )
    assert code == 0
    assert "success 100.0%" in capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["success"] == 1.0 and result["episodes"] == 20
    assert 0.8 < result["ci95"][0] < 1.0 and result["ci95"][1] == 1.0
    assert result["successes"] == 20 and set(result["return_mean"]) == {"tool", "planner"}
    assert result["split"] == "test" and result["env_id"] == "mas/PlanPath-v0"
    assert '"episodes": 20,' in out.read_text()  # a count, not 20.0
    # every task played, in order: enough to replay the evaluation exactly
    env = mas_envs.make("mas/PlanPath-v0", rows=5, cols=5)
    assert result["task_ids"] == list(env.task_ids("test")[:20])
    assert result["env_options"] == {"rows": 5, "cols": 5} and result["max_turns"] is None


def test_eval_output_lists_non_contiguous_task_ids(tmp_path):
    # Math-v0's test ids interleave topics and levels: a first/last pair could not describe them
    out = tmp_path / "math.json"
    argv = ["--env", "mas/Math-v0", "--policy", "oracle", "--episodes", "3", "--output", str(out)]
    assert eval_main(argv) == 0
    result = json.loads(out.read_text())
    ids = list(mas_envs.make("mas/Math-v0").task_ids("test")[:3])
    assert result["task_ids"] == ids and len(set(ids)) == 3
    assert result["episodes"] == 3 and isinstance(result["episodes"], int)


def test_eval_random_is_worse_than_oracle(tmp_path):
    out = tmp_path / "random.json"
    assert (
        eval_main(
            [
                "--env",
                "mas/PlanPath-v0",
                "--policy",
                "random",
                "--episodes",
                "20",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["success"] < 1.0


def test_eval_errors(capsys):
    assert eval_main(["--env", "mas/PlanPat-v0", "--policy", "oracle", "--episodes", "2"]) == 2
    assert "did you mean" in capsys.readouterr().err
    assert (
        eval_main(
            [
                "--env",
                "mas/PlanPath-v0",
                "--policy",
                "oracle",
                "--episodes",
                "2",
                "--role-map",
                "tool=planner",
            ]
        )
        == 2
    )
    assert "role-map" in capsys.readouterr().err
    assert (
        eval_main(
            [
                "--env",
                "mas/PlanPath-v0",
                "--policy",
                "oracle",
                "--episodes",
                "2",
                "--role-map",
                "toolplanner",
            ]
        )
        == 2
    )


def test_eval_a_tiny_model_greedy(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "tiny.json"
    assert (
        eval_main(
            [
                "--env",
                "mas/PlanPath-v0",
                "--policy",
                "tiny:tiny",
                "--episodes",
                "3",
                "--env-options",
                '{"rows": 4, "cols": 4}',
                "--max-new-tokens",
                "4",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    result = json.loads(out.read_text())
    assert result["greedy"] and result["policy_of"] == {"tool": "shared", "planner": "shared"}
    assert result["success"] == 0.0  # an untrained model writes bytes that never parse


def test_the_summary_prints_the_tool_alone_beside_the_single_agent(capsys):
    from mas_trainer.cli import _print_summary

    def row(mean: float, **extra: object) -> dict:
        return {"mean": mean, "ci95_seeds": [mean - 0.03, mean + 0.03], "seeds": [0, 1], **extra}

    measured = {"command": "python x.py", "commits": ["abc"], "measured_utc": "2026-12-06 UTC"}
    summary = {
        "run_dir": "runs/r",
        "checkpoint": "runs/r/checkpoints/final",
        "wall_s": 1.0,
        "success_warmstart": 0.3,
        "success_final": 0.9,
        "baselines": {
            "source": "baselines.json: python old.py (commits old, 2026-12-02 UTC)",
            "rows": {"single-grpo": row(0.665), "tool-grpo": row(0.98, measured=measured)},
        },
    }
    _print_summary(summary)
    out = capsys.readouterr().out
    assert "single agent + GRPO (no code tool) at the same budget: 66.5% (95% CI 63.5-69.5%" in out
    assert "this run's team is 23.5 points above it\n  (measured, not re-run: " in out
    assert "baselines.json: python old.py (commits old, 2026-12-02 UTC)" in out
    tool = "tool alone + GRPO (the same code tool, its printed moves made) at the same budget: "
    # the t-interval of a rate is clipped to 100%, as in the results tables
    assert tool + "98.0% (95% CI 95.0-100.0%, mean of seeds [0, 1]); this run's team is 8.0 " in out
    assert "points below it\n  (measured, not re-run: baselines.json: python x.py (commits" in out

    del summary["baselines"]["rows"]["tool-grpo"]  # a config measured before the tool rows
    _print_summary(summary)
    out = capsys.readouterr().out
    assert "tool alone + GRPO (the same code tool, its printed moves made): not measured" in out
    assert "--rows tool tool-grpo" in out
