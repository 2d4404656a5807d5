"""Reference policies that anyone can run against an env, and a loop that plays one episode.

``oracle`` answers with the solver's optimal text (the ceiling), ``random`` with well-formed random
text (the floor). Any callable ``policy(env, agent) -> str`` works in :func:`play_episode`; an LLM
policy reads ``env.observe(agent)`` and returns its completion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from mas_envs.base import TextEnv

__all__ = ["EpisodeResult", "Policy", "oracle_policy", "play_episode", "random_policy"]

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
