"""The training loop end to end on a tiny model and a digit-copying env; learning (slow)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from mas_trainer.config import ConfigError, build_config  # noqa: E402
from mas_trainer.learner import read_checkpoint  # noqa: E402
from mas_trainer.outputs import RunDir, read_metrics  # noqa: E402
from mas_trainer.train import train  # noqa: E402

FAST = [
    "--model.name", "tiny:tiny", "--algo.policy_map", "shared",
    "--env.id", "digit_env:DigitEnv", "--env.options", "{}", "--env.max_turns", "2",
    "--rollout.tasks_per_step", "2", "--rollout.max_new_tokens", "3", "--rollout.system_message",
    "true", "--optim.steps", "2", "--optim.warmstart_steps", "2", "--optim.warmstart_episodes",
    "8", "--optim.warmstart_batch_size", "8", "--optim.mini_batch_size", "16", "--optim.lr",
    "1e-3", "--eval.episodes", "4", "--run.threads", "1", "--run.progress", "false",
    "--run.save_every", "1",
]  # fmt: skip


def fast_config(tmp_path, *extra: str):
    return build_config("plan-path-tiny", overrides=[*FAST, "--run.out_dir", str(tmp_path), *extra])


def initial_params():
    from mas_trainer.models import build_tiny_model

    model, _ = build_tiny_model("tiny", seed=0)
    return {k: v.clone() for k, v in model.state_dict().items()}


def changed(folder, before) -> bool:
    from mas_trainer.models import load_model

    model, _ = load_model(str(folder), device="cpu")
    after = model.state_dict()
    return any(not torch.equal(after[k], before[k]) for k in before)


def test_run_folder_has_everything(tmp_path):
    cfg = fast_config(tmp_path, "--run.name", "r")
    summary = train(cfg)
    run = tmp_path / "r"
    assert json.loads((run / "config.json").read_text())["rollout"]["k"] == cfg.rollout.k
    records = read_metrics(run / "metrics.jsonl")
    init = [r for r in records if r["phase"] == "init"]
    final = [r for r in records if r["phase"] == "final"]
    rl = [r for r in records if r["phase"] == "rl"]
    assert init[0]["step"] == 0 and "eval/success" in init[0]
    assert final[0]["step"] == 2 and "eval/success" in final[0]
    assert 0.0 <= final[0]["eval/ci95_low"] <= final[0]["eval/ci95_high"] <= 1.0
    assert final[0]["eval/successes"] == round(final[0]["eval/success"] * final[0]["eval/episodes"])
    assert any("eval_warmstart/success" in r for r in records)
    assert [r["step"] for r in rl] == [1, 2]
    for key in (
        "rollout/turns_mean",
        "rollout/reward/caller",
        "rollout/reward/echo",
        "algo/zero_var_groups",
        "perf/tokens_per_s",
        "loss/policy",
    ):
        assert key in rl[0], key
    assert list(run.glob("events.out.tfevents*"))
    assert (run / "plots" / "reward_per_role.png").stat().st_size > 1000
    assert (run / "transcripts.jsonl").read_text().strip()
    ckpt = RunDir(run).latest_checkpoint()
    assert ckpt is not None and ckpt.name == "step-000002"
    state = json.loads((ckpt / "trainer_state.json").read_text())
    assert state["step"] == 2 and state["policy_of"] == {"caller": "shared", "echo": "shared"}
    assert changed(ckpt / "shared", initial_params())  # the model really trained
    assert summary["steps"] == 2 and summary["success_final"] == final[0]["eval/success"]


def test_the_console_shows_every_evaluation_and_no_hub_bars(tmp_path, capfd):
    cfg = fast_config(tmp_path, "--run.name", "r", "--run.progress", "true", "--eval.every", "1")
    train(cfg)
    out, err = capfd.readouterr()
    assert "[step 0] held-out success before training" in out
    assert "[warm start] held-out success after SFT" in out
    assert "[step 1] held-out success: " in out and "(95% CI " in out  # the intermediate eval
    assert "AT-GRPO" in err and "Writing model shards" not in err  # checkpoints saved quietly


def test_resume_continues_the_same_run(tmp_path):
    train(fast_config(tmp_path, "--run.name", "r", "--optim.steps", "1"))
    run = tmp_path / "r"
    cfg = build_config(overrides=[*FAST, "--run.resume", str(run), "--optim.steps", "3"])
    summary = train(cfg)
    records = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in records if r["phase"] == "rl"] == [1, 2, 3]
    assert sum(r["phase"] == "init" for r in records) == 1  # not re-evaluated
    assert sum("eval_warmstart/success" in r for r in records) == 1  # warm start not redone
    assert summary["steps"] == 3


def test_ctrl_c_saves_a_checkpoint_and_stops(tmp_path, monkeypatch):
    from mas_trainer import rollout as rollout_mod

    real_run = rollout_mod.TreeRollout.run

    def run_then_interrupt(self, task_ids, *, uid_prefix=""):
        if uid_prefix == "1/":  # the second RL step's rollout: as if the user hit Ctrl-C
            raise KeyboardInterrupt
        return real_run(self, task_ids, uid_prefix=uid_prefix)

    monkeypatch.setattr(rollout_mod.TreeRollout, "run", run_then_interrupt)
    summary = train(
        fast_config(tmp_path, "--run.name", "r", "--optim.steps", "5", "--run.save_every", "0")
    )
    assert summary["interrupted"] and summary["steps"] == 1
    ckpt = RunDir(tmp_path / "r").latest_checkpoint()
    assert ckpt is not None and json.loads((ckpt / "trainer_state.json").read_text())["step"] == 1


def test_per_role_policies_each_train_on_their_own_samples(tmp_path):
    summary = train(fast_config(tmp_path, "--run.name", "r", "--algo.policy_map", "per_role"))
    ckpt = RunDir(tmp_path / "r").latest_checkpoint()
    before = initial_params()
    for role in ("caller", "echo"):
        assert (ckpt / f"learner-{role}" / ".metadata").is_file()
        assert changed(ckpt / role, before)
    rl = [r for r in read_metrics(tmp_path / "r" / "metrics.jsonl") if r["phase"] == "rl"]
    assert "loss/policy/caller" in rl[0] and "loss/policy/echo" in rl[0]
    assert summary["steps"] == 2


def test_the_group_filter_leaves_out_the_lowest_mean_groups_and_logs_them(tmp_path, monkeypatch):
    """algo.drop_low_mean through mas-train: each step logs how many groups it left out
    (floor of the share of the step's groups), and the learner gets only the kept samples."""
    from mas_trainer.learner import Learner

    trained = []
    update = Learner.update

    def counting(self, samples):
        trained.append(len(samples))
        return update(self, samples)

    monkeypatch.setattr(Learner, "update", counting)
    train(fast_config(tmp_path, "--run.name", "r", "--algo.drop_low_mean", "0.5"))
    rl = [r for r in read_metrics(tmp_path / "r" / "metrics.jsonl") if r["phase"] == "rl"]
    assert len(rl) == 2
    for record in rl:
        groups = record["algo/groups"]
        assert groups >= 2
        assert record["algo/groups_dropped_low_mean"] == groups // 2
        assert record["algo/groups_dropped_low_std"] == 0.0
        assert record["algo/groups_dropped"] >= record["algo/groups_dropped_low_mean"]
    assert trained[-2:] == [r["algo/samples_trained"] for r in rl]
    # Off by default: the metric is logged, nothing dropped by it.
    train(fast_config(tmp_path, "--run.name", "off"))
    off = [r for r in read_metrics(tmp_path / "off" / "metrics.jsonl") if r["phase"] == "rl"]
    assert all(r["algo/groups_dropped_low_mean"] == 0.0 for r in off)


def test_per_role_lora_checkpoint_evaluates_with_a_swapped_role_map(tmp_path):
    pytest.importorskip("peft")
    from mas_trainer.eval.play import run_eval

    train(
        fast_config(
            tmp_path,
            "--run.name",
            "r",
            "--algo.policy_map",
            "per_role_lora",
            "--algo.lora_r",
            "4",
            "--algo.lora_alpha",
            "8",
        )
    )
    ckpt = RunDir(tmp_path / "r").latest_checkpoint()
    assert (ckpt / "base").is_dir() and (ckpt / "adapters" / "echo").is_dir()
    result = run_eval(
        "digit_env:DigitEnv",
        str(tmp_path / "r"),
        episodes=3,
        max_turns=2,
        role_map={"caller": "echo"},
        max_new_tokens=3,
    )
    assert result["policy_of"] == {"caller": "echo", "echo": "echo"}
    assert result["episodes"] == 3


def test_a_crash_mid_save_keeps_the_last_good_checkpoint(tmp_path):
    run = RunDir(tmp_path / "r", tensorboard=False)
    run.save_checkpoint(1, lambda d: (d / "w.txt").write_text("good"))

    def crash(folder):
        (folder / "w.txt").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        run.save_checkpoint(2, crash)
    latest = run.latest_checkpoint()
    assert latest is not None and latest.name == "step-000001"
    assert (latest / "w.txt").read_text() == "good"
    assert not (tmp_path / "r" / "checkpoints" / "step-000002").exists()


def test_missing_model_and_unknown_env_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="tiny:"):
        train(fast_config(tmp_path, "--model.name", "./no/such/model"))
    with pytest.raises(KeyError, match="did you mean 'mas/PlanPath-v0'"):
        train(fast_config(tmp_path, "--env.id", "mas/PlanPat-v0"))


@pytest.mark.slow
def test_at_grpo_learns_a_learnable_task_and_trains_every_policy(tmp_path):
    """No warm start: from random init, AT-GRPO alone raises the reward of both roles (~1 min)."""
    cfg = build_config(
        "plan-path-tiny",
        overrides=[
            "--model.name", "tiny:tiny",
            "--env.id", "digit_env:DigitEnv", "--env.options", "{}", "--env.max_turns", "1",
            "--algo.policy_map", "per_role", "--rollout.tasks_per_step", "16",
            "--rollout.k", "8", "--rollout.max_new_tokens", "1", "--optim.steps", "40",
            "--optim.warmstart_steps", "0", "--optim.lr", "3e-3", "--optim.mini_batch_size", "64",
            "--algo.drop_zero_var", "true", "--eval.episodes", "4", "--run.threads", "1",
            "--run.progress", "false", "--run.out_dir", str(tmp_path), "--run.name", "r",
        ],
    )  # fmt: skip
    train(cfg)
    rl = [r for r in read_metrics(tmp_path / "r" / "metrics.jsonl") if r["phase"] == "rl"]
    for role in ("caller", "echo"):
        first = sum(r[f"rollout/reward/{role}"] for r in rl[:5]) / 5
        last = sum(r[f"rollout/reward/{role}"] for r in rl[-5:]) / 5
        # measured: ~0.02 -> ~0.28 (answers go from junk bytes to digits; the right digit is
        # rarer: copying needs attention that 40 steps only start to learn)
        assert last > first + 0.15, (role, first, last)
    assert sum(r["rollout/format_error_rate"] for r in rl[-5:]) / 5 < 0.1
    ckpt = RunDir(tmp_path / "r").latest_checkpoint()
    before = initial_params()
    assert all(changed(ckpt / role, before) for role in ("caller", "echo"))


@pytest.mark.parametrize(("system", "thinking"), [(False, False), (True, True)])
def test_every_phase_encodes_prompts_as_configured(tmp_path, monkeypatch, system, thinking):
    # rollout.system_message decides whether the env's system text is in the prompt, and
    # rollout.enable_thinking is the chat template's thinking switch. The warm start, the RL
    # rollouts and the evaluations must all follow both: RL on prompts unlike the ones the model is
    # warm-started and evaluated on trains the wrong distribution (the RL rollout once ignored the
    # system setting while the tiny presets turn it off).
    import mas_trainer.rollout
    import mas_trainer.warmstart

    seen = []
    real = mas_trainer.rollout.encode_prompt

    def spy(tokenizer, obs, *, system=True, enable_thinking=False):
        seen.append((system, enable_thinking))
        return real(tokenizer, obs, system=system, enable_thinking=enable_thinking)

    monkeypatch.setattr(mas_trainer.rollout, "encode_prompt", spy)
    monkeypatch.setattr(mas_trainer.warmstart, "encode_prompt", spy)
    flags = ["--rollout.system_message", str(system).lower()]
    flags += ["--rollout.enable_thinking", str(thinking).lower()]
    train(fast_config(tmp_path, "--run.name", "s", *flags))
    assert len(seen) > 20 and set(seen) == {(system, thinking)}


def test_best_checkpoint_is_chosen_on_validation_and_scored_on_test(tmp_path, monkeypatch):
    import mas_trainer.train
    from mas_trainer.eval.play import evaluate_engines

    # Validation successes by step, crafted so that the middle step wins; every call's split and
    # the weights it played with are recorded.
    crafted = {1: 0.25, 2: 0.75, 3: 0.5}
    calls = []
    step_now = {"n": 0}

    def spy(make_env, engines, tokenizer, policy_of, task_ids, **kw):
        metrics, episodes = evaluate_engines(
            make_env, engines, tokenizer, policy_of, task_ids, **kw
        )
        split = make_env().split
        weights = {k: v.clone() for k, v in engines["shared"].model.state_dict().items()}
        calls.append((split, list(task_ids), weights))
        if split == "validation":
            step_now["n"] += 1
            metrics = {**metrics, "success": crafted[step_now["n"]]}
        return metrics, episodes

    monkeypatch.setattr(mas_trainer.train, "evaluate_engines", spy)
    cfg = fast_config(tmp_path, "--run.name", "b", "--optim.steps", "3",
                      "--eval.select_every", "1", "--eval.select_episodes", "3")  # fmt: skip
    summary = train(cfg)
    assert summary["best_step"] == 2 and summary["success_best_validation"] == 0.75
    best = tmp_path / "b" / "checkpoints" / "best"
    assert json.loads((best / "trainer_state.json").read_text())["step"] == 2
    assert RunDir(tmp_path / "b").latest_checkpoint().name == "step-000003"  # beside the last
    splits = [split for split, _, _ in calls]
    assert splits == ["test", "test", "validation", "validation", "validation", "test", "test"]
    # Selection played validation tasks only (DigitEnv: ids 10000-10999), never a test task.
    played = [t for split, ids, _ in calls if split == "validation" for t in ids]
    assert played and all(10_000 <= t < 11_000 for t in played)
    # The last evaluation is the test split with the step-2 weights (the best), not the last ones.
    from mas_trainer.models import load_model

    chosen, _ = load_model(str(best / "shared"))
    final_w, best_w = calls[-2][2], calls[-1][2]
    assert all(torch.equal(best_w[k], v) for k, v in chosen.state_dict().items())
    assert any(not torch.equal(final_w[k], best_w[k]) for k in best_w)
    records = read_metrics(tmp_path / "b" / "metrics.jsonl")
    (scored,) = [r for r in records if r["phase"] == "best"]
    assert summary["success_best"] == scored["eval_best/success"]
    assert sum("select/success" in r for r in records) == 3


def test_mixed_precision_resume_continues_bit_for_bit(tmp_path):
    # fp32 master weights with bf16 compute at the paper's lr: the checkpoint keeps the masters
    # (and AdamW's fp32 moments), so stopping after step 1 and resuming gives the same steps 2-3
    # as one uninterrupted run, to the bit.
    mixed = ["--model.autocast", "bfloat16", "--optim.lr", "1e-6", "--optim.steps", "3"]
    train(fast_config(tmp_path, "--run.name", "straight", *mixed))
    train(fast_config(tmp_path, "--run.name", "resumed", *mixed, "--optim.steps", "1"))
    train(build_config(overrides=[*FAST, *mixed, "--run.resume", str(tmp_path / "resumed")]))
    from mas_trainer.models import load_model

    a, b = (RunDir(tmp_path / n).latest_checkpoint() for n in ("straight", "resumed"))
    assert a.name == b.name == "step-000003"
    wa, _ = load_model(str(a / "shared"))
    wb, _ = load_model(str(b / "shared"))
    for (name, pa), pb in zip(wa.state_dict().items(), wb.state_dict().values(), strict=True):
        assert pa.dtype == torch.float32 and torch.equal(pa, pb), name
    sa = read_checkpoint(a / "learner-shared")["optimizer"]["state"]
    sb = read_checkpoint(b / "learner-shared")["optimizer"]["state"]
    assert all(torch.equal(sa[k]["exp_avg_sq"], sb[k]["exp_avg_sq"]) for k in sa)
    rl = {n: [r for r in read_metrics(tmp_path / n / "metrics.jsonl") if r["phase"] == "rl"]
          for n in ("straight", "resumed")}  # fmt: skip
    for ra, rb in zip(rl["straight"], rl["resumed"], strict=True):
        same = [k for k in ra if k.startswith(("loss/", "algo/", "rollout/", "optim/"))]
        assert same and {k: ra[k] for k in same} == {k: rb[k] for k in same}
    assert changed(a / "shared", initial_params())


def test_rl_continues_the_warm_starts_optimizer_and_reports_cpu_time(tmp_path):
    # One learner per policy serves the warm start and RL: AdamW's moments and step counts carry
    # over (a fresh AdamW would start RL with bias-corrected full-size steps).
    summary = train(fast_config(tmp_path, "--run.name", "r", "--optim.steps", "1"))
    ckpt = RunDir(tmp_path / "r").latest_checkpoint()
    state = read_checkpoint(ckpt / "learner-shared")
    steps = {int(s["step"]) for s in state["optimizer"]["state"].values()}
    assert min(steps) >= 2 + 1  # 2 warm-start steps, then at least one RL mini-batch
    assert state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(1e-3)  # RL's rate
    assert summary["cpu_s"] > 0 and summary["eval_episodes"] == 4


def test_per_policy_rl_rates_reach_each_learner_and_a_resume_can_change_them(tmp_path):
    rates = ["--algo.policy_map", "per_role", "--optim.lr_by_policy", '{"echo": 3e-3}']
    train(fast_config(tmp_path, "--run.name", "r", "--optim.steps", "1", *rates))

    def saved_rates() -> dict[str, float]:
        ckpt = RunDir(tmp_path / "r").latest_checkpoint()
        return {
            role: read_checkpoint(ckpt / f"learner-{role}")["optimizer"]["param_groups"][0]["lr"]
            for role in ("caller", "echo")
        }

    assert saved_rates() == pytest.approx({"caller": 1e-3, "echo": 3e-3})
    rl = [r for r in read_metrics(tmp_path / "r" / "metrics.jsonl") if r["phase"] == "rl"]
    assert rl[0]["optim/lr/echo"] == pytest.approx(3e-3)
    assert rl[0]["optim/lr/caller"] == pytest.approx(1e-3)
    # A resume with other rates sets them in the restored optimisers.
    resumed = ["--run.resume", str(tmp_path / "r"), "--optim.steps", "2"]
    more = ["--optim.lr_by_policy", '{"caller": 5e-4}']
    train(build_config(overrides=[*FAST, *resumed, *rates[:2], *more]))
    assert saved_rates() == pytest.approx({"caller": 5e-4, "echo": 1e-3})


def test_config_checks_per_policy_rl_rates():
    cfg = build_config("plan-path-tiny", overrides=["--optim.lr_by_policy", '{"planner": 1e-3}'])
    assert cfg.optim.lr_of("planner") == 1e-3 and cfg.optim.lr_of("tool") == cfg.optim.lr
    for bad in ('{"tool": -1e-3}', '{"tool": "fast"}', '{"tool": true}'):
        with pytest.raises(ConfigError, match=r"lr_by_policy\['tool'\] must be a number >= 0"):
            build_config("plan-path-tiny", overrides=["--optim.lr_by_policy", bad])


def test_per_policy_warm_start_steps_train_each_policy_its_own_number_of_steps(tmp_path):
    more = ["--algo.policy_map", "per_role", "--optim.warmstart_steps_factor_by_policy"]
    more += ['{"echo": 2.5}']  # 2 steps (FAST) x 2.5
    train(fast_config(tmp_path, "--run.name", "r", "--optim.steps", "0", *more))
    ckpt = RunDir(tmp_path / "r").latest_checkpoint()
    for role, steps in (("caller", 2), ("echo", 5)):
        state = read_checkpoint(ckpt / f"learner-{role}")
        assert {int(s["step"]) for s in state["optimizer"]["state"].values()} == {steps}
    logged = [
        r for r in read_metrics(tmp_path / "r" / "metrics.jsonl") if r["phase"] == "warmstart"
    ]
    assert max(r["step"] for r in logged) == 5


def test_own_play_in_the_warm_start_samples_the_roles_engine(tmp_path, monkeypatch):
    """``optim.warmstart_own_play``: the trainer answers the named role's warm-start turns with
    its policy's engine, sampled as the rollouts sample (the same prompt gets different answers)
    or greedily with ``warmstart_own_play_decoding`` greedy (always the same), and the run goes
    on."""
    import mas_trainer.train as train_module

    real, asked, explore = train_module.oracle_samples, [], []

    def spying(*args, answer, **kwargs):
        explore.append(kwargs["explore"])

        def recorded(agent, prompt):
            asked.append((agent, tuple(prompt), answer(agent, prompt)))
            return asked[-1][2]

        return real(*args, answer=recorded, **kwargs)

    def answers_by_prompt(*extra):
        asked.clear()
        own = ["--optim.warmstart_own_play", '{"echo": 1.0}', "--optim.warmstart_episodes", "24"]
        cfg = fast_config(tmp_path, *own, "--optim.steps", "1", *extra)
        assert train(cfg)["steps"] == 1
        assert asked and {agent for agent, _, _ in asked} == {"echo"}
        by_prompt: dict[tuple[int, ...], list[str]] = {}
        for _, prompt, text in asked:
            by_prompt.setdefault(prompt, []).append(text)
        return by_prompt

    monkeypatch.setattr(train_module, "oracle_samples", spying)
    sampled = answers_by_prompt("--run.name", "sampled").values()
    assert any(len(set(texts)) > 1 for texts in sampled)
    decoding = ["--optim.warmstart_own_play_decoding", "greedy"]
    no_random = ["--optim.warmstart_explore", '{"echo": 0}']
    greedy = answers_by_prompt("--run.name", "greedy", *decoding, *no_random).values()
    assert explore == [{}, {"echo": 0}]  # optim.warmstart_explore reaches the warm start
    assert any(len(texts) > 1 for texts in greedy)  # some prompts come back...
    assert all(len(set(texts)) == 1 for texts in greedy)  # ...and get the same answer
    with pytest.raises(ConfigError, match="warmstart_own_play_decoding"):
        fast_config(tmp_path, "--optim.warmstart_own_play_decoding", "argmax")


def test_a_policy_at_rate_0_is_frozen_in_rl(tmp_path, monkeypatch):
    """``optim.lr_by_policy`` 0: the policy's turns are still played and scored, but it takes no
    update (none is run, so its weights and optimizer state stay as they were) and its engine
    gets no weights after an RL step (an 8B tool on vLLM is not resent for nothing)."""
    import mas_trainer.train as train_module

    synced: list[set[str]] = []
    real_sync = train_module.sync_engines

    def recording_sync(policies, *args, **kwargs):
        synced.append(set(policies))
        return real_sync(policies, *args, **kwargs)

    monkeypatch.setattr(train_module, "sync_engines", recording_sync)
    cfg = fast_config(
        tmp_path, "--algo.policy_map", "per_role", "--optim.warmstart_steps", "0",
        "--optim.lr_by_policy", '{"echo": 0}', "--run.name", "frozen",
    )  # fmt: skip
    train(cfg)
    records = [r for r in read_metrics(tmp_path / "frozen" / "metrics.jsonl") if r["phase"] == "rl"]
    assert records and all("rollout/reward/echo" in r for r in records)  # still played
    updated = [k for r in records for k in r if k.startswith(("loss/", "optim/")) and "echo" in k]
    assert not updated
    assert not changed(RunDir(tmp_path / "frozen").latest_checkpoint() / "echo", initial_params())
    assert synced and all("echo" not in names for names in synced)  # no warm start here
    with pytest.raises(ConfigError, match=r"lr_by_policy\['echo'\] must be a number >= 0"):
        fast_config(tmp_path, "--optim.lr_by_policy", '{"echo": -1e-3}')
