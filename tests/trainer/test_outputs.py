"""The run folder's outputs: its pictures (success by phase, Wilson bands), quiet saves."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")

from mas_trainer import plots
from mas_trainer.eval.play import wilson_interval as wilson
from mas_trainer.plots import plot_run, success_figure, warmstart_loss_figure


def _run(tmp_path, evals_every=0):
    records = [
        {"step": 0, "phase": "init", "eval/success": 0.0, "eval/episodes": 100},
        *[
            {"step": s, "phase": "warmstart", "warmstart/loss/sft": 1.0 / s}
            for s in range(10, 110, 10)
        ],
        {"step": 0, "phase": "warmstart", "eval_warmstart/success": 0.22,
         "eval_warmstart/episodes": 100},
        *[
            {"step": s, "phase": "rl", "rollout/success": 0.5 + s / 40,
             "rollout/reward/tool": 0.1, "rollout/reward/planner": 0.2}
            for s in range(1, 11)
        ],
        {"step": 10, "phase": "final", "eval/success": 0.255, "eval/episodes": 200},
    ]  # fmt: skip
    if evals_every:
        records.insert(-1, {"step": 5, "phase": "rl", "eval/success": 0.3, "eval/episodes": 100})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    config = {
        "env": {"id": "mas/PlanPath-v0", "options": {"rows": 4, "cols": 4}},
        "model": {"name": "tiny:tiny"},
        "rollout": {"k": 4, "tasks_per_step": 16},
        "optim": {"steps": 10},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_wilson_interval():
    assert wilson(22, 100) == pytest.approx((0.1500, 0.3107), abs=1e-4)
    assert wilson(0, 100)[0] == pytest.approx(0.0, abs=1e-12)
    assert wilson(100, 100)[1] == pytest.approx(1.0)
    assert wilson(0, 0) == (0.0, 1.0)


def test_success_figure_shows_every_phase_labelled(tmp_path):
    fig = success_figure(_run(tmp_path, evals_every=5))
    ax, ax_rollout = fig.axes
    (held,) = ax.containers  # the evaluations, each with its Wilson interval
    assert held.get_label().startswith("held-out success: greedy")
    xs, ys = (list(a) for a in held.lines[0].get_data())
    assert ys == [0.0, 0.22, 0.3, 0.255]  # start, after the warm start, step 5, final
    assert xs[0] < 0 and xs[1:] == [0.0, 5.0, 10.0]
    # issue 32: measured points only (no line joins evaluations 5 steps apart)
    assert held.lines[0].get_linestyle() in ("None", "none", "")
    # the labels are the terminal's figures: 25.5%, not 26%
    texts = [t.get_text() for t in ax.texts]
    assert {"0.0%", "22.0%", "30.0%", "25.5%"} <= set(texts)
    # rollout best-of-K is a training-time number: its own panel, labelled so
    (rollout,) = ax_rollout.get_lines()
    assert list(rollout.get_data()[0]) == list(range(1, 11))
    assert ax_rollout.get_title().startswith("training-time, not held-out")
    assert "best of K=4" in ax_rollout.get_title()
    assert "tmp" in ax.get_title() or tmp_path.name in ax.get_title()
    assert "mas/PlanPath-v0 4x4" in ax.get_title()
    labels = [t.get_text() for t in ax_rollout.get_xticklabels()]
    assert labels[0] == "start" and all(t.isdigit() for t in labels[1:])  # integer steps
    assert any("warm start" in t for t in texts) and "AT-GRPO" in texts


def test_success_figure_draws_the_stored_baselines_the_summary_printed(tmp_path):
    run = _run(tmp_path)
    rows = {
        "single-grpo": {"label": "single agent + GRPO", "mean": 0.665, "seeds": [0, 1, 2]},
        "tool-grpo": {"label": "tool alone (code) + GRPO", "mean": 0.98, "seeds": [0, 1]},
        "mas": {"label": "MAS prompting", "mean": 0.321, "seeds": [0]},  # not printed: no line
    }
    (run / "summary.json").write_text(json.dumps({"baselines": {"rows": rows}}))
    (ax, _) = success_figure(run).axes
    dotted = [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert dotted == [0.665, 0.98]
    texts = [t.get_text() for t in ax.texts]
    assert "single agent + GRPO, mean of 3 seeds (stored): 66.5%" in texts
    assert "tool alone (code) + GRPO, mean of 2 seeds (stored): 98.0%" in texts


def test_turns_run_from_zero_to_the_turn_limit_and_format_errors_have_a_figure(tmp_path):
    import matplotlib.pyplot as plt

    run = _run(tmp_path)
    config = json.loads((run / "config.json").read_text())
    config["env"]["max_turns"] = 3
    (run / "config.json").write_text(json.dumps(config))
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for r in records:
        if r["phase"] == "rl":
            r.update({"rollout/turns_mean": 1.2 + r["step"] / 20, "rollout/format_error_rate": 0.1})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    written = {p.name for p in plot_run(run)}
    assert {"turns.png", "format_errors.png"} <= written
    turns = plots._rollout_figure(
        run, "rollout/turns_mean", "turns", "turns", ylim=(0, 3.3), hline=(3, "max turns (3)")
    )
    (ax,) = turns.axes
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 3
    assert "max turns (3)" in [line.get_label() for line in ax.get_lines()]
    plt.close("all")


def test_plot_run_writes_the_figures(tmp_path):
    run = _run(tmp_path)
    written = {p.name for p in plot_run(run)}
    assert {"success.png", "warmstart_loss.png", "reward_per_role.png"} <= written
    assert all((run / "plots" / name).stat().st_size > 5000 for name in written)
    loss = warmstart_loss_figure(run, name="my run")
    assert loss.axes[0].get_title().startswith("my run: supervised warm start")


def test_per_role_warm_start_has_its_steps_and_a_loss_curve_per_policy(tmp_path):
    """A per-role run logs ``warmstart/<policy>/loss/sft``: the figures read those too."""
    run = _run(tmp_path)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for r in records:
        if "warmstart/loss/sft" in r:
            loss = r.pop("warmstart/loss/sft")
            r.update({"warmstart/tool/loss/sft": loss, "warmstart/planner/loss/sft": 2 * loss})
            r["warmstart/tool/loss/sft/tool"] = loss  # a per-role breakdown is not a policy
    records += [  # the planner's warm start runs twice as long (as plan-path-tiny's does)
        {"step": s, "phase": "warmstart", "warmstart/planner/loss/sft": 0.01}
        for s in range(110, 210, 10)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    texts = [t.get_text() for t in success_figure(run).axes[0].texts]
    assert any("(planner 200, tool 100 SFT steps)" in t for t in texts), texts
    (ax,) = warmstart_loss_figure(run).axes
    lines = {line.get_label(): list(line.get_data()[1]) for line in ax.get_lines()}
    assert set(lines) == {"policy planner", "policy tool"}
    assert lines["policy planner"][:10] == [2 * v for v in lines["policy tool"]]
    assert lines["policy tool"][0] == pytest.approx(0.1)


def test_a_checkpoint_save_prints_no_hub_progress_bar(tmp_path, capfd):
    pytest.importorskip("transformers")
    from transformers.utils import logging as hf_logging

    from mas_trainer.models import build_tiny_model
    from mas_trainer.outputs import RunDir

    model, _ = build_tiny_model("tiny", seed=0)
    model.save_pretrained(tmp_path / "plain")  # the bar this guards against
    assert "Writing model shards" in capfd.readouterr().err
    run = RunDir(tmp_path / "run", tensorboard=False)
    folder = run.save_checkpoint(1, lambda d: model.save_pretrained(d / "policy"))
    assert (folder / "policy" / "config.json").is_file()
    assert "Writing model shards" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled()  # restored for the caller
    run.close()
