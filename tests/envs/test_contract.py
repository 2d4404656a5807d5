"""The env contract (docs/architecture.md, "The env contract"), for every registered id, beyond what
:func:`mas_envs.test.text_env_test` checks (test_conformance.py runs it on every id): clones under
random action sequences, finished episodes, the oracle and random policies, golden transcripts,
content-disjoint splits on small boards."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mas_envs
from mas_envs.policies import oracle_policy, play_episode, random_policy
from mas_envs.test import observable_state

IDS = mas_envs.list_envs()
MODES = [(env_id, mode) for env_id in IDS for mode in ("mas", "single")] + [
    (env_id, "tool") for env_id in IDS if env_id.startswith("mas/PlanPathCode-")
]  # Plan-Path's tool alone (code ids only)


def _act(env, kind: str, rng: np.random.Generator, text: str) -> None:
    agent = env.agent_selection
    if env.terminations[agent] or env.truncations[agent]:
        env.step(None)
    elif kind == "oracle":
        env.step(env.oracle_action())
    elif kind == "random":
        env.step(env.random_action(rng))
    else:
        env.step(text)


action_kinds = st.lists(
    st.tuples(st.sampled_from(["oracle", "random", "text"]), st.text(max_size=40)),
    min_size=0,
    max_size=12,
)


@pytest.mark.parametrize(("env_id", "mode"), MODES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), prefix=action_kinds, suffix=action_kinds)
def test_clone_is_independent_and_equivalent(env_id, mode, seed, prefix, suffix):
    env = mas_envs.make(env_id, mode=mode, render_mode="ansi")
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for kind, text in prefix:
        if not env.agents:
            break
        _act(env, kind, rng, text)
    clone = env.clone()
    before = observable_state(env)
    assert observable_state(clone) == before
    # Step the clone: the original must not change.
    rng_clone = np.random.default_rng(seed + 1)
    for kind, text in suffix:
        if not clone.agents:
            break
        _act(clone, kind, rng_clone, text)
    assert observable_state(env) == before
    # Same actions on a fresh clone and on the original give the same results.
    twin = env.clone()
    for a, b in ((env, np.random.default_rng(seed + 2)), (twin, np.random.default_rng(seed + 2))):
        for kind, text in suffix:
            if not a.agents:
                break
            _act(a, kind, b, text)
    assert observable_state(env) == observable_state(twin)
    # The generator is cloned too: the next unseeded reset draws the same task.
    env.reset()
    twin.reset()
    assert env.task_id == twin.task_id
    assert observable_state(env) == observable_state(twin)


@pytest.mark.parametrize("env_id", IDS)
def test_clone_of_finished_episode_stays_finished(env_id):
    env = mas_envs.make(env_id)
    play_episode(env, oracle_policy, seed=3)
    assert env.success and not env.agents
    clone = env.clone()
    assert not clone.agents and clone.success
    env.reset(seed=4)
    assert not clone.agents


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_solves_and_random_mostly_fails(env_id):
    env = mas_envs.make(env_id, split="test")
    oracle = [play_episode(env, oracle_policy, seed=s) for s in range(20)]
    assert all(r.success and r.format_errors == 0 for r in oracle)
    rand = [play_episode(env, random_policy(s), seed=s) for s in range(20)]
    assert sum(r.success for r in rand) < 20
    assert all(r.format_errors == 0 for r in rand), "random answers are well-formed"


def test_bad_config_gives_clear_errors():
    with pytest.raises(KeyError, match="did you mean 'mas/Sokoban-v0'"):
        mas_envs.make("mas/Sokobn-v0")
    env_id = IDS[0]
    with pytest.raises(ValueError, match="unknown mode"):
        mas_envs.make(env_id, mode="duo")
    with pytest.raises(ValueError, match="unknown split"):
        mas_envs.make(env_id, split="dev")
    with pytest.raises(ValueError, match="max_turns"):
        mas_envs.make(env_id, max_turns=0)


def test_import_does_not_pull_torch():
    code = "import sys, mas_envs; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("env_id", IDS)
def test_golden_transcript(env_id):
    from golden import check

    check(env_id)


def _held_out_levels(env_id: str, kwargs: dict, split: str) -> set:
    """The task keys of every id of ``split``, as the ids load (before any redraw)."""
    env = mas_envs.make(env_id, split=split, **kwargs)
    keys = set()
    for task_id in env.task_ids(split):
        env._load_task(task_id)
        keys.add(env._task_key())
    return keys


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("mas/Sokoban-v0", {}),  # 6x6, one box: ~10% of raw train ids give a held-out level
        ("mas/PlanPath-v0", {"rows": 4, "cols": 4}),  # ~1.4% (the tiny preset's board)
        ("mas/Sudoku-v0", {}),
        ("mas/Math-v0", {"topics": ["arith"]}),
    ],
)
def test_no_split_serves_a_later_splits_task_whichever_way_it_is_chosen(env_id, kwargs):
    held = {s: _held_out_levels(env_id, kwargs, s) for s in ("validation", "test")}
    later = {"train": held["validation"] | held["test"], "validation": held["test"]}
    for split, banned in later.items():
        env, probe = mas_envs.make(env_id, split=split, **kwargs), None
        ids = env.task_ids(split)
        raw_hits = 0
        for n in range(300):
            env.reset(seed=n)
            assert env._task_key() not in banned, (split, "seed", n)
            probe = probe or env.clone()
            probe._load_task(ids[n])
            raw_hits += probe._task_key() in banned
            env.reset(options={"task_id": ids[n]})
            assert env._task_key() not in banned, (split, "task_id", ids[n])
            assert env.task_id in ids
            if probe._task_key() not in banned:
                assert env.task_id == ids[n], "an id whose task is not held out plays as it is"
            # One id serves one task, whatever the env's generator holds, and the id it reports
            # serves the same task again.
            served = (env.task_id, env.observe(env.agent_selection))
            env.reset(seed=10_000 + n)
            env.reset(options={"task_id": ids[n]})
            assert (env.task_id, env.observe(env.agent_selection)) == served
            env.reset(options={"task_id": served[0]})
            assert (env.task_id, env.observe(env.agent_selection)) == served
        if split == "train" and env_id in ("mas/Sokoban-v0", "mas/PlanPath-v0"):
            assert raw_hits > 0, "the checks above would be vacuous: no raw id hits a later split"


def test_a_chosen_task_of_another_split_plays_as_it_is():
    train = mas_envs.make("mas/PlanPath-v0", rows=4, cols=4)
    test = mas_envs.make("mas/PlanPath-v0", rows=4, cols=4, split="test")
    for task_id in test.task_ids()[:50]:
        train.reset(options={"task_id": task_id})
        test.reset(options={"task_id": task_id})
        assert train.task_id == test.task_id == task_id
        assert train.observe("planner") == test.observe("planner")
