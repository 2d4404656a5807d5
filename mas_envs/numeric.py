"""A numeric view of a game env, for classic MARL libraries: discrete actions, array observations.

Classic MARL libraries (Tianshou, TorchRL, AgileRL, ...) expect PettingZoo envs with ``Discrete``
actions and ``Box`` observations. :class:`NumericView` wraps a game :class:`~mas_envs.base.TextEnv`
that implements the numeric hooks::

    numeric_action_count() -> int                  # discrete actions per agent
    numeric_action_text(agent, action) -> str      # the answer text that action means
    numeric_observation(agent) -> np.ndarray       # float32, values in [0, 1]
    numeric_observation_shape() -> tuple[int, ...]

Each discrete action is turned into the env's answer text (Plan-Path: ``2`` -> ``"#### L"``) and
stepped on the text env, so the rules, rewards, ``infos``, termination and truncation are exactly
the text env's. The registered ids (``mas/PlanPathNumeric-v0``, ``mas/SokobanNumeric-v0``,
``mas/SudokuNumeric-v0``, see :data:`mas_envs.registry.NUMERIC_ENVS`) allow more turns than the
text ids, since one discrete action is one move or one fill::

    import mas_envs, pettingzoo
    env = pettingzoo.make("aec", "mas/PlanPathNumeric-v0", rows=5, cols=5)
    env.reset(seed=0)
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        env.step(None if terminated or truncated else env.action_space(agent).sample())
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from mas_envs.base import TextEnv

__all__ = ["NumericView"]

_HOOKS = (
    "numeric_action_count",
    "numeric_action_text",
    "numeric_observation",
    "numeric_observation_shape",
)


class NumericView(AECEnv):
    """PettingZoo AEC view of ``env`` with ``Discrete`` actions and ``Box(0, 1)`` observations.

    The wrapped text env holds all state: ``agents``, ``rewards``, ``terminations``,
    ``truncations``, ``infos`` and ``agent_selection`` are the text env's own, and
    ``env.clone()`` branches the view (see :meth:`clone`).

    Args:
        env: A game env that implements the numeric hooks (see the module docstring).

    Raises:
        TypeError: When ``env`` lacks a numeric hook.
    """

    def __init__(self, env: TextEnv) -> None:
        super().__init__()
        missing = [h for h in _HOOKS if not callable(getattr(env, h, None))]
        if missing:
            raise TypeError(
                f"{type(env).__name__} has no numeric view: it lacks {', '.join(missing)} "
                "(the game envs Plan-Path, Sokoban and Sudoku implement them)"
            )
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.metadata = {**env.metadata, "name": f"{env.metadata['name']}_numeric"}
        self.render_mode = env.render_mode
        self._n_actions = int(env.numeric_action_count())
        self._shape = tuple(env.numeric_observation_shape())
        self._spaces: tuple[dict[str, spaces.Box], dict[str, spaces.Discrete]] | None = None

    # ------------------------------------------------------------------ state lives in env

    @property
    def agents(self) -> list[str]:
        return self.env.agents

    @agents.setter
    def agents(self, value: list[str]) -> None:
        # AECEnv's machinery never assigns agents on a wrapper; the text env owns the list.
        self.env.agents = value

    @property
    def agent_selection(self) -> str:
        return self.env.agent_selection

    @property
    def rewards(self) -> dict[str, float]:
        return self.env.rewards

    @property
    def _cumulative_rewards(self) -> dict[str, float]:
        return self.env._cumulative_rewards

    @property
    def terminations(self) -> dict[str, bool]:
        return self.env.terminations

    @property
    def truncations(self) -> dict[str, bool]:
        return self.env.truncations

    @property
    def infos(self) -> dict[str, dict[str, Any]]:
        return self.env.infos

    # ------------------------------------------------------------------ spaces

    def _build_spaces(self) -> tuple[dict[str, spaces.Box], dict[str, spaces.Discrete]]:
        if self._spaces is None:  # per instance: seeding one view never seeds another
            self._spaces = (
                {a: spaces.Box(0.0, 1.0, self._shape, np.float32) for a in self.possible_agents},
                {a: spaces.Discrete(self._n_actions) for a in self.possible_agents},
            )
        return self._spaces

    def observation_space(self, agent: str) -> spaces.Box:
        return self._build_spaces()[0][agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._build_spaces()[1][agent]

    # ------------------------------------------------------------------ AEC API

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)

    def observe(self, agent: str) -> np.ndarray:
        return self.env.numeric_observation(agent)

    def step(self, action: int | np.integer | None) -> None:
        """Step the text env with the answer text of discrete ``action``.

        Raises:
            TypeError: ``action`` is not an integer (``None`` is for finished agents only).
            ValueError: ``action`` is outside ``[0, numeric_action_count())``.
        """
        env = self.env
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env._was_dead_step(action)  # PettingZoo's dead step (it checks that action is None)
            return
        try:
            if isinstance(action, bool | np.bool_):
                raise TypeError
            index = operator.index(action)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(
                f"{agent!r}'s numeric action must be an int in [0, {self._n_actions}), got "
                f"{type(action).__name__} {action!r}"
            ) from None
        if not 0 <= index < self._n_actions:
            raise ValueError(
                f"{agent!r}'s numeric action must be in [0, {self._n_actions}), got {index}"
            )
        env.step(env.numeric_action_text(agent, index))

    def render(self) -> str | np.ndarray | None:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    def clone(self) -> NumericView:
        """An independent view in the same state, RNG included (see :meth:`TextEnv.clone`)."""
        new = object.__new__(NumericView)
        new.__dict__ = self.__dict__.copy()
        new.env = self.env.clone()
        new._spaces = None
        return new

    def __str__(self) -> str:
        return self.metadata["name"]
