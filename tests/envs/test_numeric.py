"""The numeric view (mas_envs.numeric): PettingZoo's checkers, the text env's semantics, and a
real third-party MARL library (Tianshou) learning on numeric Plan-Path."""

from __future__ import annotations

import math
import warnings
from typing import ClassVar

import numpy as np
import pettingzoo
import pytest
from gymnasium import spaces
from pettingzoo.test import api_test, parallel_api_test, seed_test

import mas_envs
from mas_envs.base import Outcome, TextEnv
from mas_envs.numeric import NumericView
from mas_envs.registry import NUMERIC_ENVS, make_numeric

IDS = sorted(NUMERIC_ENVS)
# Role names like "tool"/"planner" are by design (conformance tests expect the same warning).
EXPECTED = ("We recommend agents to be named in the format <descriptor>_<number>",)


@pytest.fixture
def strict_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    unexpected = [str(w.message) for w in caught if not str(w.message).startswith(EXPECTED)]
    assert not unexpected, unexpected


@pytest.mark.parametrize("env_id", IDS)
def test_api(env_id, strict_warnings):
    api_test(pettingzoo.make("aec", env_id), num_cycles=60)


@pytest.mark.parametrize("env_id", IDS)
def test_seed(env_id, strict_warnings):
    seed_test(lambda: pettingzoo.make("aec", env_id), num_cycles=60)


@pytest.mark.parametrize("env_id", IDS)
def test_parallel_api(env_id, strict_warnings):
    parallel_api_test(pettingzoo.make("parallel", env_id), num_cycles=60)


@pytest.mark.parametrize("env_id", IDS)
def test_spaces_match_the_hooks(env_id):
    view = make_numeric(env_id)
    view.reset(seed=0)
    text_env = view.env
    for agent in view.possible_agents:
        obs_space, act_space = view.observation_space(agent), view.action_space(agent)
        assert isinstance(obs_space, spaces.Box) and isinstance(act_space, spaces.Discrete)
        assert obs_space.shape == text_env.numeric_observation_shape()
        assert obs_space.dtype == np.float32 and act_space.n == text_env.numeric_action_count()
        assert obs_space.contains(view.observe(agent))
    assert view.clone().observation_space("planner") is not view.observation_space("planner")


@pytest.mark.parametrize("env_id", IDS)
def test_same_rewards_infos_and_ends_as_the_text_env(env_id):
    """Stepping the view with action a == stepping the text env with its answer text."""
    view = make_numeric(env_id)
    e = NUMERIC_ENVS[env_id]
    text_env = e.load()(**e.kwargs)
    rng = np.random.default_rng(0)
    for seed in range(3):
        view.reset(seed=seed)
        text_env.reset(seed=seed)
        for agent in view.agent_iter():
            _, reward, terminated, truncated, info = view.last()
            assert (reward, terminated, truncated, info) == text_env.last(observe=False)[1:]
            assert agent == text_env.agent_selection
            if terminated or truncated:
                view.step(None)
                text_env.step(None)
                continue
            action = int(rng.integers(view.action_space(agent).n))
            view.step(action)
            text_env.step(text_env.numeric_action_text(agent, action))
            assert view.rewards == text_env.rewards and view.infos == text_env.infos
            assert view.terminations == text_env.terminations
            assert view.truncations == text_env.truncations
        assert not text_env.agents


def test_plan_path_actions_are_moves():
    view = make_numeric("mas/PlanPathNumeric-v0", rows=4, cols=4, mode="single")
    view.reset(seed=5)
    path = view.env.oracle_action()[5:].split(", ")
    for move in path:
        view.step(np.int64("UDLR".index(move)))
    assert view.env.success and all(view.terminations.values())
    assert view.env.max_turns == 50, "numeric ids allow one move per turn"
    assert make_numeric("mas/PlanPathNumeric-v0", max_turns=7).env.max_turns == 7


def test_clone_is_independent_and_equivalent():
    view = make_numeric("mas/PlanPathNumeric-v0", rows=5, cols=5)
    view.reset(seed=3)
    view.step(1)
    twin = view.clone()
    before = (view.observe("planner").copy(), dict(view.rewards), view.agent_selection)
    twin.step(2)
    twin.step(3)
    after = (view.observe("planner"), dict(view.rewards), view.agent_selection)
    assert (after[0] == before[0]).all() and after[1:] == before[1:]
    again = view.clone()
    for env in (view, again):
        env.step(2)
        env.step(0)
    assert (view.observe("tool") == again.observe("tool")).all()
    assert view.rewards == again.rewards and view.infos == again.infos


@pytest.mark.parametrize("bad", ["#### U", 1.0, True, None, [1]])
def test_wrong_action_type_raises(bad):
    view = make_numeric("mas/PlanPathNumeric-v0")
    view.reset(seed=0)
    with pytest.raises(TypeError, match="numeric action must be an int in \\[0, 4\\)"):
        view.step(bad)


@pytest.mark.parametrize("bad", [-1, 4, np.int32(99)])
def test_out_of_range_action_raises(bad):
    view = make_numeric("mas/PlanPathNumeric-v0")
    view.reset(seed=0)
    with pytest.raises(ValueError, match="must be in \\[0, 4\\)"):
        view.step(bad)


class _NoHooks(TextEnv):
    roles: ClassVar[dict[str, tuple[str, ...]]] = {"mas": ("solo",)}

    def _apply(self, agent: str, text: str) -> Outcome:
        return Outcome(0.0)


def test_env_without_hooks_is_refused_with_a_clear_error():
    with pytest.raises(
        TypeError, match="_NoHooks has no numeric view: it lacks numeric_action_count"
    ):
        NumericView(_NoHooks())
    with pytest.raises(KeyError, match="did you mean 'mas/PlanPathNumeric-v0'"):
        make_numeric("mas/PlanPathNumerc-v0")
    assert not set(NUMERIC_ENVS) & set(mas_envs.ENVS), "ENVS stays the table of text envs"


# ---------------------------------------------------------------------- a real MARL library


@pytest.mark.marl
def test_tianshou_dqn_learns_numeric_plan_path(monkeypatch):
    """Independent DQN (Tianshou) for tool and planner, through Tianshou's PettingZooEnv."""
    # Tianshou's replay-buffer kernels are numba functions whose JIT takes longer on these CPUs
    # than the whole training run; numba's pure-Python fallback computes the same values.
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    pytest.importorskip("tianshou", reason="pip install -e '.[marl]'")
    import torch
    from tianshou.algorithm import DQN, MultiAgentOffPolicyAlgorithm
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv, PettingZooEnv
    from tianshou.utils.net.common import Net
    from tianshou.utils.torch_utils import policy_within_training_step, torch_train_mode

    config = {"rows": 4, "cols": 4, "max_turns": 12}

    def make_env() -> PettingZooEnv:
        return PettingZooEnv(pettingzoo.make("aec", "mas/PlanPathNumeric-v0", **config))

    def evaluate(marl: MultiAgentOffPolicyAlgorithm) -> tuple[float, float]:
        """Greedy play on 40 test-split levels: success rate and mean planner return."""
        env = pettingzoo.make("aec", "mas/PlanPathNumeric-v0", split="test", **config)
        successes, planner_return = 0, 0.0
        for seed in range(40):
            env.reset(seed=seed)
            for agent in env.agent_iter():
                obs, reward, terminated, truncated, _ = env.last()
                planner_return += reward if agent == "planner" else 0.0
                if terminated or truncated:
                    env.step(None)
                    continue
                with torch.no_grad():
                    q_values, _ = marl.get_algorithm(agent).policy.model(obs[None])
                env.step(int(q_values.argmax()))
            successes += env.env.success
        return successes / 40, planner_return / 40

    # Tianshou's epsilon-greedy draws from NumPy's global RNG: seed it here, restore it after.
    global_rng, threads = np.random.get_state(), torch.get_num_threads()
    np.random.seed(0)
    torch.manual_seed(0)
    torch.set_num_threads(1)  # a 64-sample MLP update; threads only add contention here
    try:
        env = make_env()
        algorithms = []
        for _ in env.agents:
            net = Net(
                state_shape=env.observation_space.shape, action_shape=4, hidden_sizes=[64, 64]
            )
            policy = DiscreteQLearningPolicy(
                model=net, action_space=env.action_space, eps_training=0.2, eps_inference=0.0
            )
            algorithms.append(
                DQN(
                    policy=policy,
                    optim=AdamOptimizerFactory(lr=3e-3),
                    gamma=0.7,
                    target_update_freq=50,
                )
            )
        marl = MultiAgentOffPolicyAlgorithm(algorithms=algorithms, env=env)
        start = {
            agent: [p.detach().clone() for p in marl.get_algorithm(agent).policy.parameters()]
            for agent in env.agents
        }
        success_before, return_before = evaluate(marl)

        train_envs = DummyVectorEnv([make_env for _ in range(4)])
        train_envs.seed(0)
        buffer = VectorReplayBuffer(20_000, len(train_envs))
        collector = Collector(marl, train_envs, buffer, exploration_noise=True)
        collector.reset()
        collector.collect(n_step=256, random=True)
        losses = []
        for _ in range(120):
            collector.collect(n_step=16)
            with policy_within_training_step(marl.policy), torch_train_mode(marl.policy):
                stats = marl.update(buffer, sample_size=64)
            losses.append(stats.get_loss_stats_dict())
        success_after, return_after = evaluate(marl)
    finally:
        np.random.set_state(global_rng)
        torch.set_num_threads(threads)

    assert len(buffer) > 2000, "transitions flowed from the env into Tianshou's buffer"
    for agent, params in start.items():
        assert all(math.isfinite(loss[f"{agent}/loss"]) for loss in losses), agent
        now = list(marl.get_algorithm(agent).policy.parameters())
        assert all(not torch.equal(a, b) for a, b in zip(params, now, strict=True)), (
            f"{agent}'s net trained"
        )
    # Learning, not just running: greedy play got better on held-out levels.
    assert return_after > return_before + 0.5, (return_before, return_after)
    assert success_after > success_before, (success_before, success_after)
