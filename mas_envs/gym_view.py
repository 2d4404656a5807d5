"""A Gymnasium view of an env in ``mode="single"``: one agent, text in, text out.

For LLM-RL trainers that speak Gymnasium (``reset``/``step`` with one agent). The wrapped env is a
regular :class:`~mas_envs.base.TextEnv`; ``clone()`` branches both together.
"""

from __future__ import annotations

from typing import Any

import gymnasium

from mas_envs.base import TextEnv

__all__ = ["SingleAgentEnv"]


class SingleAgentEnv(gymnasium.Env):
    """Gymnasium env over a one-agent :class:`TextEnv`.

    Observations are ``{"system": str, "prompt": str}``, actions are ``str``; ``info`` is the
    agent's ``infos`` entry (``success``, ``team_reward``, ``local_reward``, ``reason``, ...).
    With ``gymnasium.make``, reach ``clone()`` through ``env.unwrapped.clone()``.
    """

    def __init__(self, env: TextEnv) -> None:
        if len(env.possible_agents) != 1:
            raise ValueError(
                f"SingleAgentEnv needs a one-agent env (mode='single', the default of "
                f"gymnasium.make), got agents {env.possible_agents}; for the team use "
                f"pettingzoo.make('aec', env_id) or mas_envs.make(env_id)"
            )
        self.env = env
        self.agent = env.possible_agents[0]
        self.metadata = env.metadata
        self.render_mode = env.render_mode
        self.observation_space = env.observation_space(self.agent)
        self.action_space = env.action_space(self.agent)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed=seed)
        self.env.reset(seed=seed, options=options)
        return self.env.observe(self.agent), dict(self.env.infos[self.agent])

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        env, agent = self.env, self.agent
        if not env.agents or env.terminations[agent] or env.truncations[agent]:
            raise RuntimeError("step() called after the episode ended; call reset() first")
        env.step(action)
        return (
            env.observe(agent),
            env.rewards[agent],
            env.terminations[agent],
            env.truncations[agent],
            dict(env.infos[agent]),
        )

    def render(self) -> Any:
        return self.env.render()

    def clone(self) -> SingleAgentEnv:
        """An independent copy in the same state (see :meth:`TextEnv.clone`)."""
        new = object.__new__(SingleAgentEnv)
        new.__dict__ = self.__dict__.copy()
        new.env = self.env.clone()
        return new
