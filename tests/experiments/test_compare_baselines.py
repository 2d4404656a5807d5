"""``experiments/compare_baselines.py`` at a tiny budget: its rows are what they claim to be."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from benchmark_scripts import load

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

BUDGET = [
    "--warmstart-steps", "3", "--steps", "2", "--episodes", "3",
    "--rollout.tasks_per_step", "2", "--optim.warmstart_episodes", "8",
    "--run.log_transcripts", "0",
]  # fmt: skip


def _rl_metrics(run_dir: Path) -> list[dict]:
    keep = ("rollout/success", "rollout/samples", "loss/policy/tool", "eval/success")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    # The RL records and the final evaluation after them (a row's folder also holds its warm
    # start's records, whose 0-step run ended with a "final" evaluation at step 0).
    after = [r for r in rows if r["phase"] == "rl" or (r["phase"] == "final" and r["step"] > 0)]
    return [{k: r.get(k) for k in ("step", *keep)} for r in after]


def _adam_steps(folder: Path) -> int:
    from mas_trainer.learner import read_checkpoint

    state = read_checkpoint(folder)["optimizer"]["state"]
    return min(int(s["step"]) for s in state.values())


@pytest.mark.slow  # eleven short trainer runs (~3 min on one CPU thread)
def test_rows_share_warm_starts_budgets_and_the_per_role_row_is_mas_train(tmp_path, monkeypatch):
    module = load("compare_baselines")
    out = tmp_path / "cmp"
    argv = ["compare_baselines.py", *BUDGET, "--out-dir", str(out), "--out", str(out / "t.md")]
    monkeypatch.setattr(sys, "argv", argv)
    module.main()

    root = out / "plan-path-tiny" / "seed-0"
    rows = {k: json.loads((root / "rows" / f"{k}.json").read_text()) for k in module.ROWS}
    # One warm start per kind; every row of a kind reports that warm start's success.
    kinds = sorted(p.name for p in root.glob("*-warmstart"))
    assert kinds == ["mas-shared-warmstart", "mas-warmstart", "single-warmstart", "tool-warmstart"]
    for key, row in rows.items():
        assert row["config"]["eval_episodes"] == 3 and row["config"]["seed"] == 0
        if key == "mas-swapped":
            continue
        ws = json.loads((root / f"{row['warm_start']}-warmstart.json").read_text())
        assert row["success_after_ws"] == ws["success_warmstart"], key
        assert row["rl_steps"] == (0 if module.ROWS[key].policy_map is None else 2)
    # Same budget: the one-policy rows do the work of the team's two policies (the preset gives
    # the planner twice the tool's warm-start steps: 3 + 6).
    assert rows["mas"]["config"]["warmstart_steps"] == 3
    assert rows["mas"]["config"]["warmstart_steps_by_policy"] == {"planner": 6}
    assert rows["single"]["config"]["warmstart_steps"] == 9
    assert rows["mas-shared"]["config"]["warmstart_steps"] == 9
    assert "warmstart_steps_by_policy" not in rows["single"]["config"]
    assert rows["single-grpo"]["config"]["tasks_per_step"] == 4
    # The tool alone (the paper's SA-code ablation) gets the single agent's budget, with the code
    # tool: its one role writes programs whose printed moves are made.
    assert rows["tool"]["config"]["warmstart_steps"] == 9
    assert rows["tool-grpo"]["config"]["tasks_per_step"] == 4
    assert rows["tool-grpo"]["config"]["env"]["mode"] == "tool"
    assert rows["tool-grpo"]["config"]["env"]["id"] == "mas/PlanPathCode-v1"
    assert rows["mas-per-role"]["config"]["tasks_per_step"] == 2
    assert rows["mas-parallel"]["config"]["rollout_mode"] == "parallel"
    assert rows["mas-parallel-prompt"]["config"]["rollout_mode"] == "parallel-prompt"
    # Unset budget fields keep the preset's values.
    assert rows["mas-per-role"]["config"]["temperature"] == 1.0
    assert rows["mas-per-role"]["config"]["k"] == 4
    # Policies: one model per role, or one shared; RL continues the warm start's AdamW.
    final = Path(rows["mas-per-role"]["checkpoint"])
    assert (final / "planner").is_dir() and (final / "tool").is_dir()
    assert not (final / "shared").exists()
    assert (Path(rows["mas-shared"]["checkpoint"]) / "shared").is_dir()
    ws_ckpt = Path(json.loads((root / "mas-warmstart.json").read_text())["checkpoint"])
    for role, steps in (("tool", 3), ("planner", 6)):
        assert _adam_steps(ws_ckpt / f"learner-{role}") == steps
        assert _adam_steps(final / f"learner-{role}") >= steps  # a fresh AdamW: <= 2
    # The swapped row plays each role with the other's trained policy, on the same tasks.
    swapped = rows["mas-swapped"]
    assert swapped["policy_of"] == {"tool": "planner", "planner": "tool"}
    assert swapped["success_after_ws"] == rows["mas-per-role"]["success_final"]

    # The per-role MAS row is the run plain mas-train makes with the same settings, step for step.
    from mas_trainer.config import build_config
    from mas_trainer.train import train

    overrides = [
        "--optim.warmstart_steps", "3", "--optim.steps", "2", "--eval.episodes", "3",
        "--rollout.tasks_per_step", "2", "--optim.warmstart_episodes", "8",
        "--run.log_transcripts", "0", "--run.progress", "false",
    ]  # fmt: skip
    summary = train(build_config("plan-path-tiny", overrides=overrides), run_path=tmp_path / "ref")
    assert summary["success_final"] == rows["mas-per-role"]["success_final"]
    assert _rl_metrics(tmp_path / "ref") == _rl_metrics(root / "mas-per-role")
    assert len(_rl_metrics(tmp_path / "ref")) == 3  # 2 RL steps + the final eval

    table = (out / "t.md").read_text()
    for row in module.ROWS.values():
        assert f"| {row.label} |" in table


def test_cross_seed_figures_and_the_shipped_baselines_file(tmp_path):
    module = load("compare_baselines")
    out = tmp_path / "cmp"
    for seed, values in ((0, (0.2, 0.5, 0.9)), (1, (0.4, 0.4, 0.7))):
        folder = out / "plan-path-tiny" / f"seed-{seed}" / "rows"
        folder.mkdir(parents=True)
        for key, v in zip(("single-grpo", "mas", "mas-per-role"), values, strict=True):
            row = {"success_final": v, "config": {"eval_episodes": 10}, "commit": "abc"}
            (folder / f"{key}.json").write_text(json.dumps(row))
    args = module.argparse.Namespace(
        out_dir=str(out), seed=[0, 1], envs=["plan-path-tiny"], keep_rows_from=None
    )
    data = module.cross_seed(args, "plan-path-tiny")
    assert data["rows"]["mas-per-role"]["mean"] == pytest.approx(0.8)
    # The t-interval of two seeds: mean +- 12.706 * sd / sqrt(2).
    sd = (0.1**2 * 2) ** 0.5
    low, high = data["rows"]["mas-per-role"]["ci95_seeds"]
    assert (high - low) / 2 == pytest.approx(12.706 * sd / 2**0.5)
    assert data["rows"]["mas-per-role"]["ci95_pooled"][0] < 0.8
    assert data["gains"]["rl"]["per_seed"] == pytest.approx([0.4, 0.3])
    assert data["gains"]["team"]["mean"] == pytest.approx(0.5)
    assert "tree" not in data["gains"]  # no parallel-sampling row was run

    # --write-baselines stores them under the preset's config fingerprint; mas-train reads them.
    from mas_trainer import baselines
    from mas_trainer.config import build_config

    # The file goes to the out-dir, with its provenance, never into the package.
    shipped = baselines.PATH.read_bytes() if baselines.PATH.is_file() else None
    path = module.write_baselines(module.argparse.Namespace(**vars(args), overrides=[]))
    assert path == out / "baselines.json"
    entry = json.loads(path.read_text())["plan-path-tiny"]
    assert entry["commits"] == ["abc"] and entry["seeds"] == [0, 1]
    assert entry["command"].startswith("python experiments/compare_baselines.py")
    assert entry["machine"] and entry["measured_utc"]
    assert (baselines.PATH.read_bytes() if baselines.PATH.is_file() else None) == shipped
    cfg = build_config("plan-path-tiny", overrides=["--run.seed", "3", "--run.name", "x"])
    found = baselines.lookup(cfg, path)
    assert found is not None and found["rows"]["single-grpo"]["mean"] == pytest.approx(0.3)
    changed = build_config("plan-path-tiny", overrides=["--optim.steps", "5"])
    assert baselines.lookup(changed, path) is None  # another config: no figure


def _stored(path: Path, rows: dict[str, list[float]]) -> None:
    """A baselines file measured at the default preset's config, with rows of two seeds."""
    from mas_trainer.baselines import fingerprint
    from mas_trainer.config import build_config

    entry = {
        "config": fingerprint(build_config("plan-path-tiny")),
        "command": "python experiments/compare_baselines.py --seed 0 1",
        "commits": ["old"],
        "measured_utc": "2026-12-02 16:25 UTC",
        "rows": {
            key: {
                "label": key,
                "seeds": [0, 1],
                "per_seed": v,
                "mean": sum(v) / 2,
                "ci95_seeds": [min(v), max(v)],
                "ci95_pooled": [min(v), max(v)],
                "episodes_per_seed": 10,
            }
            for key, v in rows.items()
        },
    }
    path.write_text(json.dumps({"plan-path-tiny": entry}))


def test_new_rows_join_the_stored_ones_and_pair_with_them_by_seed(tmp_path):
    module = load("compare_baselines")
    out = tmp_path / "cmp"
    for seed, v in ((0, 1.0), (1, 0.9)):  # only the tool alone + GRPO was run here
        folder = out / "plan-path-tiny" / f"seed-{seed}" / "rows"
        folder.mkdir(parents=True)
        row = {"success_final": v, "config": {"eval_episodes": 10}, "commit": "new"}
        (folder / "tool-grpo.json").write_text(json.dumps(row))
    stored = tmp_path / "baselines.json"
    _stored(stored, {"mas": [0.2, 0.4], "mas-per-role": [0.9, 0.8], "single-grpo": [0.5, 0.6]})
    args = module.argparse.Namespace(
        out_dir=str(out), seed=[0, 1], envs=["plan-path-tiny"], overrides=[], keep_rows_from=None
    )
    assert list(module.cross_seed(args, "plan-path-tiny")["rows"]) == ["tool-grpo"]

    args.keep_rows_from = str(stored)
    data = module.cross_seed(args, "plan-path-tiny")
    assert list(data["rows"]) == ["single-grpo", "tool-grpo", "mas", "mas-per-role"]
    assert data["gains"]["team-tool"]["per_seed"] == pytest.approx([-0.1, -0.1])
    assert data["gains"]["team"]["per_seed"] == pytest.approx([0.4, 0.2])
    assert data["gains"]["rl"]["mean"] == pytest.approx(0.55)
    assert "| tool alone (code) + GRPO | 100.0% | 90.0% | 95.0% |" in "\n".join(
        module._summary_table(args, "plan-path-tiny")
    )

    path = module.write_baselines(args)
    entry = json.loads(path.read_text())["plan-path-tiny"]
    assert set(entry["rows"]) == {"single-grpo", "tool-grpo", "mas", "mas-per-role"}
    assert entry["rows"]["mas-per-role"]["per_seed"] == [0.9, 0.8]  # kept as stored
    old, new = entry["rows"]["single-grpo"]["measured"], entry["rows"]["tool-grpo"]["measured"]
    assert old["commits"] == ["old"] and old["measured_utc"] == "2026-12-02 16:25 UTC"
    assert new["commits"] == ["new"] and new["machine"] and old["command"] != new["command"]
    assert entry["commits"] == ["new", "old"]
    assert entry["gains"]["team-tool"]["mean"] == pytest.approx(-0.1)

    # Rows measured at another config are not mixed in.
    other = module.argparse.Namespace(**{**vars(args), "overrides": ["--optim.steps", "5"]})
    with pytest.raises(SystemExit, match="no figures of plan-path-tiny at this config"):
        module.cross_seed(other, "plan-path-tiny")
