"""Per-role learners stepping side by side: the same order of results, the same errors, and a
training run that is the same bit for bit (mas_trainer/lockstep.py)."""

from __future__ import annotations

import threading
import time

import pytest

from mas_trainer.lockstep import lockstep, once_each


@pytest.mark.parametrize("side_by_side", [False, True])
def test_steps_come_in_order_with_every_policy_that_still_has_steps(side_by_side):
    calls: list[tuple[str, int]] = []
    steps = {"tool": 2, "planner": 4, "idle": 0}
    out = list(
        lockstep(
            lambda name, s: calls.append((name, s)) or f"{name}{s}",
            steps,
            side_by_side=side_by_side,
        )
    )
    assert out == [
        (1, {"tool": "tool1", "planner": "planner1"}),
        (2, {"tool": "tool2", "planner": "planner2"}),
        (3, {"planner": "planner3"}),
        (4, {"planner": "planner4"}),
    ]
    # Each policy's own steps run in order, whatever the interleaving.
    for name, n in steps.items():
        assert [s for who, s in calls if who == name] == list(range(1, n + 1))


def test_side_by_side_runs_the_policies_at_the_same_time():
    # Each step waits for the other policy's same step: one after another would time out.
    barrier = threading.Barrier(2, timeout=10)
    out = list(lockstep(lambda name, s: barrier.wait() >= 0, {"a": 3, "b": 3}, side_by_side=True))
    assert [s for s, _ in out] == [1, 2, 3]
    assert {t.name for t in threading.enumerate()}.isdisjoint({"lockstep-a", "lockstep-b"})


def test_a_failing_policy_stops_the_others_and_its_error_reaches_the_caller():
    ran: list[tuple[str, int]] = []

    def step(name: str, s: int) -> int:
        ran.append((name, s))
        time.sleep(0.002)
        if name == "bad" and s == 2:
            raise ValueError("bad policy at step 2")
        return s

    with pytest.raises(ValueError, match="bad policy at step 2"):
        for _ in lockstep(step, {"good": 1000, "bad": 3}, side_by_side=True):
            pass
    assert ("bad", 3) not in ran
    assert max(s for who, s in ran if who == "good") < 1000  # stopped early, not run out
    assert not [t for t in threading.enumerate() if t.name.startswith("lockstep-")]


def test_once_each_returns_every_result_by_name():
    assert once_each({"a": lambda: 1, "b": lambda: 2}, side_by_side=True) == {"a": 1, "b": 2}
    assert once_each({}, side_by_side=True) == {}


def test_a_per_role_run_is_the_same_bit_for_bit_side_by_side(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from test_train import fast_config

    from mas_trainer.models import load_model
    from mas_trainer.outputs import RunDir, read_metrics
    from mas_trainer.train import train

    runs = {}
    for flag in ("true", "false"):
        name = f"side-by-side-{flag}"
        cfg = fast_config(
            tmp_path, "--run.name", name, "--algo.policy_map", "per_role",
            "--optim.warmstart_steps", "3", "--optim.warmstart_steps_factor_by_policy",
            '{"echo": 2}', "--run.learners_side_by_side", flag,
        )  # fmt: skip
        train(cfg)
        runs[flag] = tmp_path / name
    weights = {}
    for flag, folder in runs.items():
        ckpt = RunDir(folder).latest_checkpoint()
        weights[flag] = {
            role: load_model(str(ckpt / role), device="cpu")[0].state_dict()
            for role in ("caller", "echo")
        }
    for role in ("caller", "echo"):
        a, b = weights["true"][role], weights["false"][role]
        assert all(torch.equal(a[k], b[k]) for k in a), role

    def learned(folder):
        keep = ("loss/", "optim/grad_norm", "algo/", "rollout/", "eval/success")
        return [
            {k: v for k, v in r.items() if any(x in k for x in keep)}
            for r in read_metrics(folder / "metrics.jsonl")
        ]

    assert learned(runs["true"]) == learned(runs["false"])
    assert any("warmstart/echo/loss/sft" in r for r in learned(runs["true"]))


def test_only_learners_that_share_nothing_step_side_by_side():
    from types import SimpleNamespace

    from mas_trainer.config import build_config
    from mas_trainer.train import _can_step_side_by_side

    a, b = object(), object()

    def pols(*models):
        return {f"p{i}": SimpleNamespace(model=m, learner=object()) for i, m in enumerate(models)}

    cpu = build_config("plan-path-tiny")
    gpu = build_config("plan-path-tiny", overrides=["--model.device", "cuda"])
    ray_gpu = build_config(
        "plan-path-tiny", overrides=["--model.device", "cuda", "--run.backend", "ray"]
    )
    assert _can_step_side_by_side(cpu, pols(a, b))
    assert not _can_step_side_by_side(cpu, pols(a, a))  # per_role_lora: one model, two adapters
    assert not _can_step_side_by_side(gpu, pols(a, b))  # two learners' activations on one GPU
    assert _can_step_side_by_side(ray_gpu, pols(a, b))  # actors of their own
