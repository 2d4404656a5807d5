"""Reference policies that anyone can run against an env, and a loop that plays one episode.

``oracle`` answers with the solver's optimal text (the ceiling), ``random`` with well-formed random
text (the floor). :func:`memorised_team` is the probe of a task that memorised text should not
solve: every role but the last answers one constant text, the last copies the last ``####`` line
of its prompt (:func:`memorised_success` plays it on a split). Any callable
``policy(env, agent) -> str`` works in :func:`play_episode`; an LLM policy reads
``env.observe(agent)`` and returns its completion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from mas_envs.base import TextEnv

__all__ = [
    "EpisodeResult",
    "Policy",
    "copy_last_answer",
    "memorised_success",
    "memorised_team",
    "oracle_policy",
    "play_episode",
    "random_policy",
]

Policy = Callable[[TextEnv, str], str]
"""A policy maps (env, agent) to the agent's text; it may read ``env.observe(agent)``."""


def oracle_policy(env: TextEnv, agent: str) -> str:
    """The optimal answer, from the env's solver."""
    return env.oracle_action(agent)


def random_policy(seed: int | None = None) -> Policy:
    """A policy that answers with well-formed random text, from its own seeded generator."""
    rng = np.random.default_rng(seed)

    def policy(env: TextEnv, agent: str) -> str:
        return env.random_action(rng, agent)

    return policy


@dataclass(frozen=True)
class EpisodeResult:
    """Summary of one episode played by :func:`play_episode`."""

    task_id: int | str | None
    success: bool
    turns: int
    returns: dict[str, float]
    format_errors: int


def play_episode(
    env: TextEnv,
    policy: Policy | Mapping[str, Policy],
    *,
    seed: int | None = None,
    options: dict | None = None,
) -> EpisodeResult:
    """Reset ``env`` and play one episode; ``policy`` is one policy or one per agent."""
    env.reset(seed=seed, options=options)
    returns = dict.fromkeys(env.possible_agents, 0.0)
    format_errors = 0
    for agent in env.agent_iter():
        _, reward, terminated, truncated, _ = env.last()
        returns[agent] += reward
        if terminated or truncated:
            env.step(None)
            continue
        act = policy[agent] if isinstance(policy, Mapping) else policy
        env.step(act(env, agent))
        format_errors += not env.infos[agent]["parsed"]
    return EpisodeResult(env.task_id, env.success, env.turn, returns, format_errors)


def copy_last_answer(env: TextEnv, agent: str) -> str:
    """The last line of ``agent``'s prompt that starts with ``####`` (``"####"`` when none):
    a role that repeats what another role printed, without reading the task."""
    lines = env.observe(agent)["prompt"].splitlines()
    return next((line.strip() for line in reversed(lines) if line.startswith("####")), "####")


def memorised_team(make_env: Callable[[], TextEnv], task_id: object) -> dict[str, Policy]:
    """The memorised-text team: every role but the last answers one constant text, the oracle's
    first answer on ``task_id`` (a training task of ``make_env``'s env), and the last role
    copies the last ``####`` line of its prompt (:func:`copy_last_answer`).

    A team task is learnt only if this team fails it: if it succeeds, a policy that memorised one
    string per role and learnt to copy solves the task without reading it. An env with one role
    (a single agent, or Plan-Path's tool alone) has no one to copy: its role answers the constant.
    """
    env = make_env()
    env.reset(options={"task_id": task_id})
    *firsts, copier = env.possible_agents
    last: str | None = copier
    if not firsts:
        firsts, last = [copier], None
    texts: dict[str, str] = {}
    for agent in env.agent_iter():
        if env.terminations[agent] or env.truncations[agent] or len(texts) == len(firsts):
            break
        oracle = env.oracle_action(agent)
        if agent != last:
            texts.setdefault(agent, oracle)
        env.step(oracle)
    missing = [a for a in firsts if a not in texts]
    if missing:
        raise ValueError(f"task {task_id!r} ended before {missing} answered; pick a longer task")
    team: dict[str, Policy] = {a: _constant(t) for a, t in texts.items()}
    return team if last is None else {**team, last: copy_last_answer}


def _constant(text: str) -> Policy:
    def policy(env: TextEnv, agent: str) -> str:
        return text

    return policy


def memorised_success(
    make_env: Callable[[], TextEnv], episodes: int, *, split: str = "test"
) -> float:
    """Share of the first ``episodes`` tasks of ``split`` that :func:`memorised_team` solves
    (its constants taken on the first training task). ``make_env`` builds the env as it is
    trained and evaluated (its id, options and turns); its own split is not used."""
    env = make_env()
    team = memorised_team(make_env, env.task_ids("train")[0])
    tasks = list(env.task_ids(split)[:episodes])
    if not tasks:
        raise ValueError(f"episodes must be at least 1 and {split!r} must have tasks")
    solved = sum(play_episode(env, team, options={"task_id": t}).success for t in tasks)
    return solved / len(tasks)
