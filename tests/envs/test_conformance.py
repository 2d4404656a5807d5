"""The checkers over every registered env id: PettingZoo's and Gymnasium's own, unmodified, and
ours, :func:`mas_envs.test.text_env_test` (the text-env contract), in both modes."""

from __future__ import annotations

import functools
import warnings

import gymnasium
import pettingzoo
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import api_test, parallel_api_test, render_test, seed_test

import mas_envs
from mas_envs.test import text_env_test

# What the checkers say about any env with text spaces and role names: expected, by design.
EXPECTED = (
    "Observation is not a NumPy array",
    "Observation space for each agent probably should be gymnasium.spaces.box",
    "Action space for each agent probably should be gymnasium.spaces.box",
    "We recommend agents to be named in the format <descriptor>_<number>",
)

IDS = mas_envs.list_envs()
MODES = [(env_id, mode) for env_id in IDS for mode in ("mas", "single")]


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


@pytest.mark.parametrize(("env_id", "mode"), MODES)
def test_text_env_contract(env_id, mode, strict_warnings):
    text_env_test(functools.partial(mas_envs.make, env_id, mode=mode), name=f"{env_id} ({mode})")


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_single_agent_view(env_id, strict_warnings):
    env = gymnasium.make(env_id)
    check_env(env.unwrapped)
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"system", "prompt"} and obs["prompt"]
    clone = env.unwrapped.clone()
    text = clone.env.oracle_action()
    assert env.unwrapped.step(text)[1:] == clone.step(text)[1:]


# A representative option of each id's family, and how to see that it reached the env.
FAMILY_OPTIONS = {
    "mas/Sokoban-v0": ({"width": 7, "height": 7}, lambda e: (e.width, e.height) == (7, 7)),
    "mas/SokobanCode-v0": ({"boxes": 2}, lambda e: e.n_boxes == 2),
    "mas/PlanPath-v0": ({"rows": 4, "cols": 5}, lambda e: (e.rows, e.cols) == (4, 5)),
    "mas/PlanPathCode-v0": ({"wall_prob": 0.1}, lambda e: e.wall_prob == 0.1),
    "mas/PlanPath-v1": ({"rows": 4, "cols": 5}, lambda e: (e.rows, e.cols) == (4, 5)),
    "mas/PlanPathCode-v1": ({"wall_prob": 0.1}, lambda e: e.wall_prob == 0.1),
    "mas/PlanPathCode-v2": ({"rows": 6, "cols": 6}, lambda e: (e.rows, e.cols) == (6, 6)),
    "mas/Sudoku-v0": ({"size": 9}, lambda e: e.size == 9),
    "mas/SudokuCode-v0": ({"clues": 8}, lambda e: e.clues == 8),
    "mas/Math-v0": ({"topics": ["arith"]}, lambda e: e.task_ids()[7].startswith("arith/")),
    "mas/Math-v1": ({"levels": [2]}, lambda e: e.task_ids()[7].split("/")[1] == "2"),
    "mas/Code-v0": ({"max_cases": 3}, lambda e: e.max_cases == 3),
    "mas/Code-v1": ({"max_cases": 3}, lambda e: e.max_cases == 3),
}


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_make_passes_every_option(env_id, strict_warnings):
    assert env_id in FAMILY_OPTIONS, f"add a representative option of {env_id} to FAMILY_OPTIONS"
    family, arrived = FAMILY_OPTIONS[env_id]
    common = {"mode": "single", "split": "test", "alpha": 0.5, "max_turns": 2}
    env = gymnasium.make(env_id, render_mode="ansi", max_action_chars=5000, **common, **family)
    inner = env.unwrapped.env
    assert (inner.mode, inner.split, inner.alpha, inner.max_turns) == ("single", "test", 0.5, 2)
    assert (inner.render_mode, inner.max_action_chars) == ("ansi", 5000)
    assert arrived(inner), f"{family} did not reach the env"
    env.reset(seed=0)
    assert inner.task_id in inner.task_ids("test")
    assert isinstance(env.render(), str)


def test_gymnasium_make_of_the_team_says_what_to_do():
    with pytest.raises(ValueError, match=r"one-agent env \(mode='single'.*pettingzoo.make"):
        gymnasium.make("mas/PlanPath-v0", mode="mas")
