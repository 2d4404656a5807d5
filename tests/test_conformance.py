"""PettingZoo's and Gymnasium's own checkers, unmodified, over every registered env id."""

from __future__ import annotations

import warnings

import gymnasium
import pettingzoo
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import api_test, parallel_api_test, render_test, seed_test

import mas_envs

# What the checkers say about any env with text spaces and role names: expected, by design.
EXPECTED = (
    "Observation is not a NumPy array",
    "Observation space for each agent probably should be gymnasium.spaces.box",
    "Action space for each agent probably should be gymnasium.spaces.box",
    "We recommend agents to be named in the format <descriptor>_<number>",
)

IDS = mas_envs.list_envs()


# Gymnasium's note on an id whose newer version is registered too (v0 stays beside v1).
OUT_OF_DATE = "is out of date. You should consider upgrading to version"


def _unexpected(caught: list[warnings.WarningMessage]) -> list[str]:
    messages = [str(w.message) for w in caught]
    return [m for m in messages if not m.startswith(EXPECTED) and OUT_OF_DATE not in m]


@pytest.fixture
def strict_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    assert not _unexpected(caught), _unexpected(caught)


@pytest.mark.parametrize("env_id", IDS)
def test_api(env_id, strict_warnings):
    api_test(pettingzoo.make("aec", env_id), num_cycles=30)


@pytest.mark.parametrize("env_id", IDS)
def test_seed(env_id, strict_warnings):
    seed_test(lambda: pettingzoo.make("aec", env_id), num_cycles=30)


@pytest.mark.parametrize("env_id", IDS)
def test_parallel_api(env_id, strict_warnings):
    parallel_api_test(pettingzoo.make("parallel", env_id), num_cycles=30)


@pytest.mark.parametrize("env_id", IDS)
def test_render(env_id, strict_warnings, capsys):
    render_test(lambda render_mode=None: pettingzoo.make("aec", env_id, render_mode=render_mode))
    assert capsys.readouterr().out, "render_mode='human' printed nothing"


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_single_agent_view(env_id, strict_warnings):
    env = gymnasium.make(env_id)
    check_env(env.unwrapped)
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"system", "prompt"} and obs["prompt"]
    clone = env.unwrapped.clone()
    text = clone.env.oracle_action()
    assert env.unwrapped.step(text)[1:] == clone.step(text)[1:]
