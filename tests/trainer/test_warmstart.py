"""The warm start's learning-rate schedule (cosine decay) and how it reaches the learners."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import pytest

from mas_trainer.config import ConfigError, build_config
from mas_trainer.samples import TrainSample
from mas_trainer.warmstart import cosine_lr, warm_start


class RecordingLearner:
    """Stands in for a Learner: records the rate of every ``sft_update`` call."""

    def __init__(self) -> None:
        self.rates: list[float | None] = []

    def sft_update(self, batch, lr=None):
        self.rates.append(lr)
        return {"loss/sft": float(len(batch))}


class Played(NamedTuple):
    """One action a recording Plan-Path env was stepped with."""

    agent: str
    action: str
    oracle: str
    prompt: str
    """The prompt the agent was shown."""
    level: Any
    cell: Any
    """The agent's cell before the action."""


def recording_planpath(played: list[Played], **options: Any):
    """A ``mas/PlanPath-v1`` factory whose envs append every action they are stepped with."""
    import mas_envs

    def make_env():
        env = mas_envs.make("mas/PlanPath-v1", **options)
        step = env.step

        def recording(action):
            if action is not None:
                agent = env.agent_selection
                shown = env.observe(agent)["prompt"]
                oracle = env.oracle_action(agent)
                played.append(Played(agent, action, oracle, shown, env.level, env._cell))
            step(action)

        env.step = recording
        return env

    return make_env


def _samples(n: int, policy: str = "shared") -> list[TrainSample]:
    return [TrainSample([1, 2], [3], [0.0], 0.0, policy=policy) for _ in range(n)]


def test_cosine_lr_runs_from_peak_to_floor_through_the_midpoint():
    assert cosine_lr(1e-2, 0.1, 1, 5) == pytest.approx(1e-2)
    assert cosine_lr(1e-2, 0.1, 3, 5) == pytest.approx(1e-2 * (0.1 + 0.9 * 0.5))  # half way
    assert cosine_lr(1e-2, 0.1, 5, 5) == pytest.approx(1e-3)
    assert cosine_lr(1e-2, 0.1, 2, 5) == pytest.approx(
        1e-2 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)))
    )
    assert cosine_lr(1e-2, 0.1, 1, 1) == pytest.approx(1e-2)  # a single step keeps the peak


def test_warm_start_gives_each_step_its_scheduled_rate():
    learner = RecordingLearner()
    out = warm_start(
        {"shared": learner}, _samples(8), steps=4, batch_size=2,
        rng=np.random.default_rng(0), lr=4e-3, min_lr_ratio=0.25,
    )  # fmt: skip
    assert learner.rates == pytest.approx([cosine_lr(4e-3, 0.25, s, 4) for s in range(1, 5)])
    assert learner.rates[0] == pytest.approx(4e-3) and learner.rates[-1] == pytest.approx(1e-3)
    assert all(a > b for a, b in zip(learner.rates, learner.rates[1:], strict=False))
    assert out["optim/lr"] == pytest.approx(1e-3)


def test_warm_start_without_a_schedule_keeps_the_learners_rate():
    learner = RecordingLearner()
    warm_start(
        {"shared": learner}, _samples(4), steps=3, batch_size=2, rng=np.random.default_rng(0)
    )
    assert learner.rates == [None, None, None]
    with pytest.raises(ValueError, match="min_lr_ratio"):
        warm_start(
            {"shared": learner}, _samples(4), steps=1, batch_size=2,
            rng=np.random.default_rng(0), lr=1e-3, min_lr_ratio=1.5,
        )  # fmt: skip


def test_a_per_policy_rate_replaces_the_peak_of_that_policy_only():
    tool, planner = RecordingLearner(), RecordingLearner()
    warm_start(
        {"tool": tool, "planner": planner}, [*_samples(4, "tool"), *_samples(4, "planner")],
        steps=3, batch_size=2, rng=np.random.default_rng(0), lr=1e-2, min_lr_ratio=0.5,
        lr_by_policy={"planner": 2e-2},
    )  # fmt: skip
    assert tool.rates == pytest.approx([cosine_lr(1e-2, 0.5, s, 3) for s in range(1, 4)])
    assert planner.rates == pytest.approx([cosine_lr(2e-2, 0.5, s, 3) for s in range(1, 4)])


def test_per_policy_steps_give_each_policy_its_own_schedule_and_log_only_its_steps():
    tool, planner = RecordingLearner(), RecordingLearner()
    logged: list[tuple[int, set[str]]] = []
    warm_start(
        {"tool": tool, "planner": planner}, [*_samples(4, "tool"), *_samples(4, "planner")],
        steps=2, batch_size=2, rng=np.random.default_rng(0), lr=1e-2, min_lr_ratio=0.1,
        steps_by_policy={"planner": 5}, on_step=lambda i, m: logged.append((i, set(m))),
    )  # fmt: skip
    assert tool.rates == pytest.approx([cosine_lr(1e-2, 0.1, s, 2) for s in range(1, 3)])
    assert planner.rates == pytest.approx([cosine_lr(1e-2, 0.1, s, 5) for s in range(1, 6)])
    assert [i for i, _ in logged] == [1, 2, 3, 4, 5]
    assert all(any(k.startswith("tool/") for k in keys) == (i <= 2) for i, keys in logged)


class BatchLearner(RecordingLearner):
    """Also records which samples each step trained on."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[int]] = []

    def sft_update(self, batch, lr=None):
        self.batches.append(sorted(s.prompt_ids[0] for s in batch))
        return super().sft_update(batch, lr)


def _numbered(n: int, policy: str) -> list[TrainSample]:
    return [TrainSample([i], [3], [0.0], 0.0, policy=policy) for i in range(n)]


@pytest.mark.parametrize("side_by_side", [False, True])
def test_a_saved_and_resumed_warm_start_trains_on_what_a_whole_one_does(side_by_side):
    # Saves every 3 steps land between steps, with every policy done with the step before; a
    # warm start resumed after step 3 (the same generator state) trains the remaining steps on
    # the same minibatches at the same rates as one that never stopped.
    def run(start=0, save_every=0):
        learners = {"tool": BatchLearner(), "planner": BatchLearner()}
        saves: list[tuple[int, int, int]] = []
        warm_start(
            learners, [*_numbered(9, "tool"), *_numbered(9, "planner")], steps=4, batch_size=3,
            rng=np.random.default_rng(5), lr=1e-2, min_lr_ratio=0.1,
            steps_by_policy={"planner": 8}, side_by_side=side_by_side, start=start,
            save_every=save_every,
            on_save=lambda i: saves.append(
                (i, len(learners["tool"].rates), len(learners["planner"].rates))
            ),
        )  # fmt: skip
        return learners, saves

    whole, no_saves = run()
    chunked, saves = run(save_every=3)
    assert no_saves == [] and saves == [(3, 3, 3), (6, 4, 6)]  # not after the last step
    for name in ("tool", "planner"):
        assert chunked[name].batches == whole[name].batches
        assert chunked[name].rates == whole[name].rates
    resumed, _ = run(start=3, save_every=3)
    assert resumed["tool"].batches == whole["tool"].batches[3:]
    assert resumed["planner"].batches == whole["planner"].batches[3:]
    assert resumed["planner"].rates == pytest.approx(whole["planner"].rates[3:])


def test_config_scales_per_policy_steps():
    factor = ["--optim.warmstart_steps_factor_by_policy", '{"planner": 2.5}']
    cfg = build_config("plan-path-tiny", overrides=[*factor, "--optim.warmstart_steps", "7"])
    assert cfg.optim.warmstart_steps_of("planner") == 18  # 17.5, rounded to even
    assert cfg.optim.warmstart_steps_of("tool") == 7
    for bad in ('{"planner": -1}', '{"planner": "many"}', '{"planner": true}'):
        with pytest.raises(
            ConfigError, match=r"warmstart_steps_factor_by_policy\['planner'\] must be"
        ):
            build_config(
                "plan-path-tiny", overrides=["--optim.warmstart_steps_factor_by_policy", bad]
            )


def test_config_checks_per_policy_rates():
    cfg = build_config(
        "plan-path-tiny", overrides=["--optim.warmstart_lr_by_policy", '{"tool": 0.5}']
    )
    assert cfg.optim.warmstart_lr_by_policy == {"tool": 0.5}
    with pytest.raises(ConfigError, match=r"warmstart_lr_by_policy\['tool'\] must be a number > 0"):
        build_config("plan-path-tiny", overrides=["--optim.warmstart_lr_by_policy", '{"tool": 0}'])


def test_config_checks_the_decay_ratio():
    cfg = build_config("plan-path-tiny", overrides=["--optim.warmstart_min_lr_ratio", "0.1"])
    assert cfg.optim.warmstart_min_lr_ratio == 0.1
    with pytest.raises(ConfigError, match="warmstart_min_lr_ratio"):
        build_config("plan-path-tiny", overrides=["--optim.warmstart_min_lr_ratio", "2"])


def test_oracle_share_mixes_random_targets_for_one_role_and_plays_the_oracle():
    pytest.importorskip("transformers")
    from digit_env import DigitEnv

    from mas_trainer.models import build_byte_tokenizer
    from mas_trainer.warmstart import oracle_samples

    tok = build_byte_tokenizer()
    played = []

    class Recording(DigitEnv):
        def step(self, action):
            if action is not None:
                played.append((self.agent_selection, action, self.oracle_action()))
            super().step(action)

    samples = oracle_samples(
        Recording, tok, {"caller": "shared", "echo": "shared"}, list(range(400)),
        rng=np.random.default_rng(0), explore=0.0, oracle_share={"caller": 0.25},
    ).samples  # fmt: skip

    def hits(role: str) -> float:
        mine = [s for s in samples if s.role == role]
        oracle = [s for s in mine if tok.decode(s.completion_ids[:-1]) in tok.decode(s.prompt_ids)]
        return len(oracle) / len(mine)

    assert hits("echo") == 1.0  # a role not named: always the oracle's answer
    assert 0.25 <= hits("caller") <= 0.40  # 25% oracle + the random digits that happen to match
    # Whatever the target, the oracle's answer is what is played (explore=0): the next roles see
    # the states an oracle team reaches.
    assert played and all(action == oracle for _, action, oracle in played)
    with pytest.raises(ConfigError, match="warmstart_oracle_share"):
        build_config("plan-path-tiny", overrides=["--optim.warmstart_oracle_share", '{"tool": 2}'])


def test_near_miss_plays_a_roles_mistakes_and_the_next_role_learns_the_levels_answer():
    pytest.importorskip("transformers")
    from digit_env import DigitEnv

    from mas_envs.planpath import grid
    from mas_trainer.models import build_byte_tokenizer
    from mas_trainer.warmstart import oracle_samples

    tok = build_byte_tokenizer()
    played: list[Played] = []
    make_env = recording_planpath(played, rows=6, cols=6)

    samples = oracle_samples(
        make_env, tok, {"tool": "tool", "planner": "planner"}, list(range(60)),
        rng=np.random.default_rng(0), explore=0.0, near_miss={"tool": 1.0},
    ).samples  # fmt: skip
    tool = [p for p in played if p.agent == "tool"]
    wrong = [p for p in tool if p[1] != p[2]]
    assert 0 < len(wrong) < len(tool)  # misread walls: some reports change, some do not
    # The planner (not named) plays the oracle's answer, which is also every one of its targets:
    # a shortest path on the real level, whatever the report showed.
    for agent, action, oracle, _, level, cell in played:
        if agent == "planner":
            assert action == oracle
            moves = tuple(m.strip() for m in oracle.removeprefix("#### ").split(","))
            _, _, made, blocked, reached = grid.run_moves(level, cell, moves, 0)
            assert reached and not blocked and len(made) == level.dist[cell]
    planner = [tok.decode(s.completion_ids[:-1]) for s in samples if s.role == "planner"]
    assert planner == [p.oracle for p in played if p.agent == "planner"]
    with pytest.raises(ValueError, match="no near_miss_action"):
        oracle_samples(
            DigitEnv, tok, {"caller": "shared", "echo": "shared"}, [0],
            rng=np.random.default_rng(0), near_miss={"caller": 0.5},
        )  # fmt: skip
    with pytest.raises(ConfigError, match="warmstart_near_miss"):
        build_config("plan-path-tiny", overrides=["--optim.warmstart_near_miss", '{"tool": 2}'])


def test_own_play_plays_the_roles_own_answers_and_keeps_the_oracles_targets():
    """With ``own_play`` a role plays what its model writes (here a stand-in that answers random
    well-formed programs) while its target stays the oracle's; the next role sees that report."""
    pytest.importorskip("transformers")
    from mas_trainer.models import build_byte_tokenizer
    from mas_trainer.warmstart import oracle_samples

    tok = build_byte_tokenizer()
    played: list[Played] = []
    asked = []
    answers = np.random.default_rng(1)
    make_env = recording_planpath(played, rows=5, cols=5)

    def answer(agent, prompt_ids):
        text = make_env().random_action(answers, agent)
        asked.append((agent, tok.decode(prompt_ids), text))
        return text

    samples = oracle_samples(
        make_env, tok, {"tool": "tool", "planner": "planner"}, list(range(30)),
        rng=np.random.default_rng(0), explore=0.0, own_play={"tool": 1.0}, answer=answer,
    ).samples  # fmt: skip
    tool = [p for p in played if p.agent == "tool"]
    assert tool and [a[0] for a in asked] == ["tool"] * len(tool)
    for p, (_, prompt, text) in zip(tool, asked, strict=True):
        assert p.action == text and p.prompt in prompt  # the answer to the prompt it was shown
    assert any(p.action != p.oracle for p in tool)
    targets = [tok.decode(s.completion_ids[:-1]) for s in samples if s.role == "tool"]
    assert targets == [p.oracle for p in tool]  # the targets stay the oracle's
    assert all(p.action == p.oracle for p in played if p.agent == "planner")
    with pytest.raises(ValueError, match="no answer function"):
        oracle_samples(
            make_env, tok, {"tool": "tool", "planner": "planner"}, [0],
            rng=np.random.default_rng(0), own_play={"tool": 0.5},
        )  # fmt: skip
    with pytest.raises(ConfigError, match="warmstart_own_play"):
        build_config("plan-path-tiny", overrides=["--optim.warmstart_own_play", '{"tool": -1}'])


def test_explore_can_be_set_per_role():
    """``explore`` per role: a role at 1 plays random answers on every step, one at 0 the
    oracle's on every step, and the targets stay the oracle's for both."""
    pytest.importorskip("transformers")
    from mas_trainer.models import build_byte_tokenizer
    from mas_trainer.warmstart import oracle_samples

    tok = build_byte_tokenizer()
    played: list[Played] = []
    samples = oracle_samples(
        recording_planpath(played, rows=5, cols=5), tok, {"tool": "tool", "planner": "planner"},
        list(range(20)), rng=np.random.default_rng(0), explore={"tool": 1.0, "planner": 0.0},
    ).samples  # fmt: skip
    tool = [p for p in played if p.agent == "tool"]
    assert sum(p.action != p.oracle for p in tool) > 0.9 * len(tool)
    assert all(p.action == p.oracle for p in played if p.agent == "planner")
    targets = [tok.decode(s.completion_ids[:-1]) for s in samples]
    assert targets == [p.oracle for p in played]
    with pytest.raises(ConfigError, match="warmstart_explore"):
        build_config("plan-path-tiny", overrides=["--optim.warmstart_explore", '{"tool": 1.5}'])


def test_warm_start_skips_codecontests_problems_without_a_python_reference(tmp_path):
    """A published CodeContests problem may have no correct Python 3 solution (the fixture's
    ``1002_B. Words`` has only a Python 2 one): its oracle cannot play, the warm start skips it
    with a warning, and the env still serves it to the RL phase."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("transformers")
    from pathlib import Path

    from mas_envs.code.env import CodeEnv
    from mas_envs.datasets import prepare
    from mas_trainer.models import build_byte_tokenizer
    from mas_trainer.warmstart import oracle_samples

    fixture = Path(__file__).parents[1] / "fixtures" / "datasets" / "codecontests"
    prepare("codecontests", fixture, tmp_path)
    train = tmp_path / "codecontests" / "train.jsonl"

    def make_env():
        return CodeEnv(problems={"train": str(train)}, max_turns=1)

    double, words = "codecontests/1000_A. Double", "codecontests/1002_B. Words"
    assert {double, words} <= set(make_env().task_ids("train"))
    tok, roles = build_byte_tokenizer(), {"coder": "shared", "tester": "shared"}
    rng = np.random.default_rng(0)
    with pytest.warns(UserWarning, match=r"skipped 2 of 3 episode\(s\).*'codecontests/1002_B"):
        samples, skipped = oracle_samples(make_env, tok, roles, [words, double, words], rng=rng)
    assert skipped == [words, words]
    assert samples and {s.group[0] for s in samples} == {f"oracle/{double}"}
    assert {s.role for s in samples} == {"coder", "tester"}
    with pytest.raises(ValueError, match=r"none of the 1 warm-start episodes.*warmstart_steps 0"):
        oracle_samples(make_env, tok, roles, [words], rng=rng)
    env = make_env()  # RL still plays the problem: a model's program is judged as usual
    env.reset(options={"task_id": words})
    env.step("```python\nprint(len(input().split()))\n```")
    assert env.infos["coder"]["pass_rate"] == 1.0
