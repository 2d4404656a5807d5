"""The env contract of DESIGN.md section 3, for every registered id: clone, hostile text, splits."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mas_envs
from mas_envs.policies import oracle_policy, play_episode, random_policy

IDS = mas_envs.list_envs()
MODES = [(env_id, mode) for env_id in IDS for mode in ("mas", "single")]


def _snapshot(env) -> tuple:
    """Everything a user can observe of an env."""
    obs = {a: env.observe(a) for a in env.agents}
    return (
        list(env.agents),
        env.agent_selection if env.agents else None,
        dict(env.rewards),
        dict(env._cumulative_rewards),
        dict(env.terminations),
        dict(env.truncations),
        {a: dict(i) for a, i in env.infos.items()},
        obs,
        env.render() if env.render_mode else None,
    )


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
    before = _snapshot(env)
    assert _snapshot(clone) == before
    # Step the clone: the original must not change.
    rng_clone = np.random.default_rng(seed + 1)
    for kind, text in suffix:
        if not clone.agents:
            break
        _act(clone, kind, rng_clone, text)
    assert _snapshot(env) == before
    # Same actions on a fresh clone and on the original give the same results.
    twin = env.clone()
    for a, b in ((env, np.random.default_rng(seed + 2)), (twin, np.random.default_rng(seed + 2))):
        for kind, text in suffix:
            if not a.agents:
                break
            _act(a, kind, b, text)
    assert _snapshot(env) == _snapshot(twin)
    # The generator is cloned too: the next unseeded reset draws the same task.
    env.reset()
    twin.reset()
    assert env.task_id == twin.task_id
    assert _snapshot(env) == _snapshot(twin)


@pytest.mark.parametrize("env_id", IDS)
def test_clone_of_finished_episode_stays_finished(env_id):
    env = mas_envs.make(env_id)
    play_episode(env, oracle_policy, seed=3)
    assert env.success and not env.agents
    clone = env.clone()
    assert not clone.agents and clone.success
    env.reset(seed=4)
    assert not clone.agents


HOSTILE_TEXT = [
    "",
    " ",
    "x" * 1_000_000,
    "U" * 1_000_000,
    "\u4e2d\u6587 \U0001f600 \u202e\u0000\u0007\x1b[31m",
    "```\n```",
    "####",
    "#### " + "[" * 10_000,
    "\ud800",  # a lone surrogate
    "1" * 100_000,
    "<think>" + "\n" * 5000,
    "#### [[1, 1, " + "9" * 5000 + "]]",  # int() of it raises ValueError
    "\\boxed{" * 9000,  # unclosed boxes: a box parser must stay linear
]


@pytest.mark.parametrize(("env_id", "mode"), MODES)
def test_hostile_text_never_crashes(env_id, mode):
    env = mas_envs.make(env_id, mode=mode)
    for text in HOSTILE_TEXT:
        env.reset(seed=0)
        # Every role writes it in turn: each role has its own parser, and a later role's prompt
        # echoes what the earlier one wrote.
        for agent in env.possible_agents:
            if env.agent_selection != agent or env.terminations[agent] or env.truncations[agent]:
                break
            env.step(text)
            info = env.infos[agent]
            assert isinstance(env.rewards[agent], float)
            if not info["parsed"]:
                assert info["reason"], "a format penalty must say why"
                assert info["local_reward"] < 0
            obs = env.observe(env.agent_selection) if env.agents else None
            if obs is not None:
                space = env.observation_space(env.agent_selection)
                assert space.contains(obs), "echoed text must stay inside the observation space"


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("bad", [b"U, R", 3, None, ["U"], 1.5])
def test_wrong_action_type_raises_clear_type_error(env_id, bad):
    env = mas_envs.make(env_id)
    env.reset(seed=0)
    with pytest.raises(TypeError, match="must be str"):
        env.step(bad)


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_solves_and_random_mostly_fails(env_id):
    env = mas_envs.make(env_id, split="test")
    oracle = [play_episode(env, oracle_policy, seed=s) for s in range(20)]
    assert all(r.success and r.format_errors == 0 for r in oracle)
    rand = [play_episode(env, random_policy(s), seed=s) for s in range(20)]
    assert sum(r.success for r in rand) < 20
    assert all(r.format_errors == 0 for r in rand), "random answers are well-formed"


@pytest.mark.parametrize("env_id", IDS)
def test_splits_are_disjoint_and_reset_stays_in_split(env_id):
    env = mas_envs.make(env_id)
    ids = {split: env.task_ids(split) for split in mas_envs.SPLITS}
    sets = {s: set(v) if not isinstance(v, range) else v for s, v in ids.items()}
    for a in mas_envs.SPLITS:
        for b in mas_envs.SPLITS:
            if a < b:
                ra, rb = ids[a], ids[b]
                if isinstance(ra, range) and isinstance(rb, range):
                    assert ra.stop <= rb.start or rb.stop <= ra.start, (a, b)
                else:
                    assert not set(ra) & set(rb), (a, b)
    for split in mas_envs.SPLITS:
        env = mas_envs.make(env_id, split=split)
        for seed in range(5):
            env.reset(seed=seed)
            assert env.task_id in sets[split]


@pytest.mark.parametrize("env_id", IDS)
def test_reset_never_touches_global_rng(env_id):
    import random

    np.random.seed(123)
    random.seed(123)
    expect = (np.random.random(), random.random())
    np.random.seed(123)
    random.seed(123)
    env = mas_envs.make(env_id)
    env.reset(seed=1)
    play_episode(env, random_policy(0), seed=2)
    assert (np.random.random(), random.random()) == expect


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


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("mas/Sokoban-v0", {}),  # 6x6, one box: ~10% of raw train ids give a held-out level
        ("mas/PlanPath-v0", {"rows": 4, "cols": 4}),
        ("mas/Sudoku-v0", {}),
    ],
)
def test_train_split_never_serves_a_test_level(env_id, kwargs):
    env = mas_envs.make(env_id, split="test", **kwargs)
    test_levels = set()
    for task_id in env.task_ids("test")[:300]:
        env.reset(options={"task_id": task_id})
        test_levels.add(env._task_key())
    train = mas_envs.make(env_id, **kwargs)
    raw_hits = served_hits = 0
    for seed in range(300):
        train.reset(seed=seed)
        served_hits += train._task_key() in test_levels
        probe = train.clone()
        probe.reset(options={"task_id": train.task_ids()[seed]})
        raw_hits += probe._task_key() in test_levels
    assert served_hits == 0
    if env_id == "mas/Sokoban-v0":
        assert raw_hits > 0, "the check above would be vacuous: no raw train id hits a test level"
