"""Config: presets, files, overrides, clear errors, and every field documented."""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest

from mas_trainer.config import (
    PRESETS,
    SECTIONS,
    ConfigError,
    TrainConfig,
    build_config,
    config_from_dict,
    config_to_dict,
    field_docs,
    help_text,
)


def test_default_is_the_cpu_plan_path_preset():
    cfg = build_config()
    assert cfg.preset == "plan-path-tiny"
    # The paper's mechanism: the tool writes a program that the sandbox runs; one model per role.
    assert cfg.env.id == "mas/PlanPathCode-v1" and cfg.env.mode == "mas"
    assert cfg.algo.policy_map == "per_role"
    assert cfg.model.name == "tiny:tiny-bpe"
    assert cfg.model.device == "cpu"
    assert cfg.optim.warmstart_steps > 0  # the default run warm-starts (docs say so)
    # ... teaching the tool the format, not the search: the oracle program is a minority target.
    assert 0 < cfg.optim.warmstart_oracle_share["tool"] < 0.5
    assert cfg.eval.episodes >= 200


def test_required_presets_exist():
    for name in (
        "plan-path-tiny",
        "plan-path-qwen3-1.7b",
        "plan-path-qwen3-8b",
        "sokoban-qwen3-8b",
    ):
        assert name in PRESETS
    gpu = PRESETS["plan-path-qwen3-8b"]
    assert (gpu.rollout.k, gpu.algo.clip_low, gpu.algo.dual_clip, gpu.algo.kl_coef) == (
        4,
        0.2,
        3.0,
        0.0,
    )


@pytest.mark.parametrize(
    ("override", "section", "name", "value"),
    [
        (["--rollout.k", "8"], "rollout", "k", 8),
        (["--optim.lr=3e-4"], "optim", "lr", 3e-4),
        (["--run.progress", "false"], "run", "progress", False),
        (["--algo.policy_map", "per_role"], "algo", "policy_map", "per_role"),
        (["--env.options", '{"rows": 4}'], "env", "options", {"rows": 4}),
    ],
)
def test_overrides_are_typed(override, section, name, value):
    cfg = build_config("plan-path-tiny", overrides=override)
    assert getattr(getattr(cfg, section), name) == value


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (["--optim.lrr", "1"], "did you mean 'lr'"),
        (["--optm.lr", "1"], "did you mean 'optim'"),
        (["--optim.lr", "fast"], "expects a number"),
        (["--rollout.k", "2.5"], "expects an integer"),
        (["--rollout.k", "0"], "rollout.k must be >= 1"),
        (["--rollout.mode", "beam"], "must be one of"),
        (["--model.checkpoint_mode", "some"], "model.checkpoint_mode must be one of"),
        (["--algo.measure_change", "2"], r"algo.measure_change must be in \[0, 1\]"),
        (["--run.progress", "maybe"], "true or false"),
        (["--env.options", "[1]"], "JSON object"),
        (["--rollout.k"], "needs a value"),
        (["rollout.k=3"], "--section.field"),
    ],
)
def test_bad_overrides_say_what_is_wrong(override, message):
    with pytest.raises(ConfigError, match=message):
        build_config("plan-path-tiny", overrides=override)


def test_unknown_preset_suggests_the_closest():
    with pytest.raises(ConfigError, match="did you mean 'plan-path-tiny'"):
        build_config("plan-path-tny")


def test_config_files_json_and_toml(tmp_path):
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"preset": "sokoban-qwen3-8b", "rollout": {"k": 6}}))
    cfg = build_config(config_file=str(j), overrides=["--rollout.k", "5"])
    assert cfg.env.id == "mas/SokobanCode-v0" and cfg.rollout.k == 5  # the command line wins
    t = tmp_path / "c.toml"
    t.write_text("[optim]\nlr = 0.001\n[env]\noptions = { rows = 4, cols = 4 }\n")
    cfg = build_config(config_file=str(t))
    assert cfg.optim.lr == 0.001 and cfg.env.options == {"rows": 4, "cols": 4}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"optim": {"learning_rate": 1}}))
    with pytest.raises(ConfigError, match="learning_rate"):
        build_config(config_file=str(bad))
    with pytest.raises(ConfigError, match="does not exist"):
        build_config(config_file=str(tmp_path / "missing.toml"))


def test_config_round_trips_through_its_json():
    cfg = build_config("sudoku-qwen3-1.7b", overrides=["--algo.kl_coef", "0.1"])
    again = config_from_dict(json.loads(json.dumps(config_to_dict(cfg))))
    assert again == cfg


def test_every_field_is_documented_in_help():
    text = help_text()
    hints = typing.get_type_hints(TrainConfig)
    for section in SECTIONS:
        cls = hints[section]
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
        docs = field_docs(cls)
        for f in dataclasses.fields(cls):
            assert docs.get(f.name), f"{section}.{f.name} has no docstring"
            assert f"--{section}.{f.name} " in text


def test_group_filter_shares_are_validated_and_documented():
    from mas_trainer.config import AlgoConfig, ConfigError, build_config, field_docs, help_text

    cfg = build_config(overrides=["--algo.drop_low_mean", "0.3"])
    assert cfg.algo.drop_low_mean == 0.3 and cfg.algo.drop_low_std == 0.0
    for bad in ("1.0", "-0.1"):
        with pytest.raises(ConfigError, match=r"algo.drop_low_mean must be in \[0, 1\)"):
            build_config(overrides=["--algo.drop_low_mean", bad])
    assert "0.3" in field_docs(AlgoConfig)["drop_low_mean"]
    assert "--algo.drop_low_std FLOAT" in help_text()


def test_measure_change_reaches_the_learner():
    """The post-update re-score is a diagnostic the learner pays a no-grad pass for: the paper
    presets re-score one sample in 8, and the share set in the config is the learner's."""
    from mas_trainer.policy import learner_kwargs

    class Tok:
        pad_token_id = 0

    paper = build_config("plan-path-qwen3-1.7b")
    assert learner_kwargs(paper, "planner", Tok(), None)["measure_change"] == 0.125
    tiny = build_config("plan-path-tiny", overrides=["--algo.measure_change", "0"])
    assert learner_kwargs(tiny, "planner", Tok(), None)["measure_change"] == 0.0
