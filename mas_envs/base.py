"""The base class of every mas_envs environment: a PettingZoo AEC env whose agents act in text.

A family (Sokoban, Plan-Path, ...) subclasses :class:`TextEnv` and fills in five hooks:

* ``_load_task(task_id)``: set up the task (generate the level, pick the problem);
* ``_apply(agent, text)``: parse the agent's text, apply it, return a :class:`Outcome` (or, on
  a hot path, its fields as a plain tuple, :data:`OutcomeFields`);
* ``_system(agent)`` and ``_prompt(agent)``: the texts an LLM needs to act now;
* ``_copy_state(new)``: copy the family's *mutable* state into a clone (immutable state, such
  as tuples and strings, is shared for free).

The base class owns everything else: the AEC bookkeeping, turn order and ``max_turns``, the reward
split ``r = alpha * team + local``, the ``infos`` contract, seeding and splits, and ``clone()``.

Contract (docs/architecture.md, "The env contract"):

* Turns are sequential; one turn is one cycle through ``possible_agents``. Each action is applied
  at once and its reward is immediate: ``env.rewards[agent]`` right after ``step`` is the reward of
  that action (``last()`` returns it accumulated, PettingZoo style).
* Actions are ``str``. Any text is accepted (unparseable text gets a format penalty and a reason);
  another type raises ``TypeError``.
* ``infos[agent]`` holds ``team_reward``, ``local_reward``, ``reward``, ``success``, ``turn``,
  ``parsed`` and ``reason`` (empty when the text parsed), plus family-specific keys.
* ``reset(seed=s)`` seeds the env's own generator, which draws a task id from the env's split;
  ``reset(options={"task_id": t})`` picks a task directly. The global RNG is never touched.
* Splits are disjoint in content whichever way a task is chosen: a task of this split that is
  also a task of a later split is never served; ``reset`` serves a redrawn task in its place
  (:meth:`TextEnv._serve`).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Hashable, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from mas_envs import spaces as text_spaces

__all__ = ["SPLITS", "NoOracleError", "Outcome", "OutcomeFields", "TextEnv"]

SPLITS = ("train", "validation", "test")

_HELD_OUT: dict[Hashable, frozenset[Hashable]] = {}
"""Per (env class, generator settings, split): the task keys a split must not serve."""
_MAX_REDRAWS = 10_000
"""Held-out tasks ``reset`` redraws in a row before it gives up on a config (a tiny board whose
every level is also a test level would otherwise loop forever)."""

TaskId = int | str


class NoOracleError(ValueError):
    """:meth:`TextEnv.oracle_action` has no answer for this task and agent: the task's data holds
    none (e.g. a coding problem published without a correct solution in the judged language).
    The env still plays the task; only its reference policy cannot."""


_NO_EXTRA: dict[str, Any] = {}
"""``infos`` entries of an :class:`Outcome` without ``info`` (never written to)."""


class Outcome(NamedTuple):
    """What one agent's action did, as reported by a family's ``_apply``.

    Attributes:
        local_reward: The acting agent's own reward for this action.
        team_reward: The team's reward after this action (shared signal, scaled by ``alpha``).
        success: The task is solved (judged on hidden ground truth) after this action.
        done: The episode ends now (terminated), solved or not.
        parsed: The text parsed into a valid action.
        reason: Why the text did not parse, or what went wrong; empty when all is well.
        info: Family-specific entries for ``infos[agent]`` (plain, immutable values).
    """

    local_reward: float
    team_reward: float = 0.0
    success: bool = False
    done: bool = False
    parsed: bool = True
    reason: str = ""
    info: dict[str, Any] | None = None


OutcomeFields = tuple[float, float, bool, bool, bool, str, dict[str, Any] | None]
"""An :class:`Outcome`'s fields as a plain tuple, in the same order. ``_apply`` may return one
instead of an :class:`Outcome` (which is also one): ``step`` only unpacks it, and a plain tuple is
built in a quarter of a NamedTuple's time, which counts on a family's hot path."""


class TextEnv(AECEnv):
    """A PettingZoo AEC environment whose observations and actions are text.

    Args:
        mode: ``"mas"`` (the multi-agent team, the family's roles) or ``"single"`` (one role does
            the whole task: the single-agent baseline).
        alpha: Weight of the team reward in each agent's reward, ``r = alpha * team + local``.
        max_turns: Turns (cycles through all roles) before the episode is truncated.
        split: Which task ids ``reset`` draws from: ``"train"``, ``"validation"`` or ``"test"``.
        render_mode: ``None``, ``"human"`` (prints the text view), ``"ansi"`` or, where the
            family supports it, ``"rgb_array"``.
        max_action_chars: Longer actions get a format penalty instead of being parsed.
        agents: For families whose team size is a parameter: this instance's agent names in
            turn order (default: ``roles[mode]``).
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"],
        "name": "text_env",
        "is_parallelizable": True,
    }
    roles: ClassVar[dict[str, tuple[str, ...]]] = {}
    """Agent names per mode, in turn order, e.g. ``{"mas": ("tool", "planner"), ...}``."""
    format_penalty: ClassVar[float] = -1.0
    """Local reward of text that does not parse."""

    def __init__(
        self,
        *,
        mode: str = "mas",
        alpha: float = 1.0,
        max_turns: int = 3,
        split: str = "train",
        render_mode: str | None = None,
        max_action_chars: int = text_spaces.MAX_ACTION_CHARS,
        agents: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        if mode not in self.roles:
            raise ValueError(f"unknown mode {mode!r}; choose one of {sorted(self.roles)}")
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; choose one of {list(SPLITS)}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"unsupported render_mode {render_mode!r}; choose one of "
                f"{self.metadata['render_modes']} or None"
            )
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns must be a positive int, got {max_turns!r}")
        if not np.isfinite(alpha):
            raise ValueError(f"alpha must be a finite number, got {alpha!r}")
        if max_action_chars < 1:
            raise ValueError(f"max_action_chars must be >= 1, got {max_action_chars}")
        self.mode = mode
        self.alpha = float(alpha)
        self.max_turns = max_turns
        self.split = split
        self.render_mode = render_mode
        self.max_action_chars = max_action_chars
        self.possible_agents = list(self.roles[mode] if agents is None else agents)
        self._last_role = self.possible_agents[-1]
        order = self.possible_agents
        self._next_role = dict(zip(order, order[1:] + order[:1], strict=True))
        self._spaces: tuple[dict[str, spaces.Dict], dict[str, spaces.Text]] | None = None
        self._rng = np.random.default_rng()
        self._rng_shared = False
        self.task_id: TaskId | None = None
        self.turn = 0
        self.success = False
        self.agents: list[str] = []

    # ------------------------------------------------------------------ hooks for a family

    def task_ids(self, split: str | None = None) -> Sequence[TaskId]:
        """The task ids of ``split`` (default: this env's split), fixed in the registry."""
        raise NotImplementedError

    def _load_task(self, task_id: TaskId) -> None:
        raise NotImplementedError

    def _apply(self, agent: str, text: str) -> OutcomeFields:
        raise NotImplementedError

    def _system(self, agent: str) -> str:
        raise NotImplementedError

    def _prompt(self, agent: str) -> str:
        raise NotImplementedError

    def _task_key(self) -> Hashable | None:
        """What makes the loaded task the task it is: equal keys, the same task (or ``None``).

        Small generated boards repeat: different level ids can give the same level. A family
        whose tasks can repeat returns a key here, and ``reset`` then never draws a train task
        whose key is also a validation or test task's (nor a validation task that is also a test
        task), so the splits are disjoint in content, not only in ids.
        """
        return None

    def _generator_key(self) -> Hashable:
        """The settings that, with a task id, decide the task (e.g. board size, boxes)."""
        return ()

    def _held_out_keys(self) -> frozenset[Hashable]:
        """Task keys of the splits after this env's split, computed once per process."""
        later = SPLITS[SPLITS.index(self.split) + 1 :]
        if not later or self._task_key() is None:
            return frozenset()
        cache_key = (type(self), self._generator_key(), self.split)
        keys = _HELD_OUT.get(cache_key)
        if keys is None:
            probe = self.clone()
            found = set()
            for split in later:
                for task_id in self.task_ids(split):
                    probe._load_task(task_id)
                    found.add(probe._task_key())
            keys = _HELD_OUT[cache_key] = frozenset(found)
        return keys

    def oracle_action(self, agent: str | None = None) -> str:
        """The text an optimal agent would write now (from the family's solver or ground truth).

        ``agent`` defaults to ``agent_selection``. The text is in the exact answer format the
        prompt asks for, so it also serves as a supervised target for warm starts. Raises
        :class:`NoOracleError` where the task's data has no answer for ``agent``.
        """
        raise NotImplementedError

    def random_action(self, rng: np.random.Generator, agent: str | None = None) -> str:
        """A well-formed but random answer for ``agent`` (default: ``agent_selection``)."""
        raise NotImplementedError

    def _copy_state(self, new: TextEnv) -> None:
        """Copy mutable family state into ``new`` (which already shares every attribute)."""

    # ------------------------------------------------------------------ spaces

    def _build_spaces(self) -> tuple[dict[str, spaces.Dict], dict[str, spaces.Text]]:
        if self._spaces is None:
            self._spaces = (
                {a: text_spaces.observation_space() for a in self.possible_agents},
                {a: text_spaces.action_space(self.max_action_chars) for a in self.possible_agents},
            )
        return self._spaces

    def observation_space(self, agent: str) -> spaces.Dict:
        return self._build_spaces()[0][agent]

    def action_space(self, agent: str) -> spaces.Text:
        return self._build_spaces()[1][agent]

    # ------------------------------------------------------------------ AEC API

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self._rng_shared = False
        task_id = (options or {}).get("task_id")
        if task_id is None:
            if self._rng_shared:  # copy-on-write after clone()
                self._rng = copy.deepcopy(self._rng)
                self._rng_shared = False
            ids = self.task_ids()
            task_id = self._serve(ids[int(self._rng.integers(len(ids)))], self._rng)
        else:
            task_id = self._serve(task_id, None)
        self.task_id = task_id
        self.turn = 0
        self.success = False
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        info: dict[str, Any] = {"turn": 0, "success": False, "task_id": task_id}
        self.infos = {a: dict(info) for a in self.agents}
        self.agent_selection = self.agents[0]

    def _serve(self, task_id: TaskId, rng: np.random.Generator | None) -> TaskId:
        """Load ``task_id``, or the task served in its place; return the id of the loaded task.

        A task of this split whose key is also a later split's (:meth:`_task_key`) is redrawn:
        further ids of the split are drawn until one is not held out. A seeded ``reset`` draws
        them from the env's generator ``rng``. A chosen id (``rng is None``) draws them from a
        generator seeded by the id alone, so one id always serves one task, whatever the env's
        generator holds; an id of another split (or a hand-made task) is played as it is.
        """
        self._load_task(task_id)
        held_out = self._held_out_keys()
        if not held_out or self._task_key() not in held_out:
            return task_id
        ids = self.task_ids()
        if rng is None:
            if task_id not in ids:
                return task_id
            rng = np.random.default_rng(_id_seed(task_id))
        for _ in range(_MAX_REDRAWS):
            task_id = ids[int(rng.integers(len(ids)))]
            self._load_task(task_id)
            if self._task_key() not in held_out:
                return task_id
        raise ValueError(
            f"{_MAX_REDRAWS} tasks drawn from split {self.split!r} in a row were all also tasks "
            "of a later split: this config has too few distinct tasks to keep the splits apart; "
            "make it larger (a bigger board, more topics or levels)"
        )

    def observe(self, agent: str) -> dict[str, str]:
        return {"system": self._system(agent), "prompt": self._prompt(agent)}

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if not isinstance(action, str):
            raise TypeError(
                f"the action of {agent!r} must be str (the model's text), got "
                f"{type(action).__name__}; decode the model's output to text before step()"
            )
        out: OutcomeFields
        if len(action) > self.max_action_chars:
            out = Outcome(
                self.format_penalty,
                parsed=False,
                reason=f"answer too long: {len(action)} characters, the limit is "
                f"{self.max_action_chars}",
            )
        else:
            out = self._apply(agent, action)
        # One unpacking instead of seven attribute reads: step() is the hot path of rollouts.
        local, team, success, done, parsed, reason, extra = out
        reward = self.alpha * team + local
        rewards = self.rewards
        for a in rewards:
            rewards[a] = 0.0
        rewards[agent] = reward
        # The acting agent's total restarts at its new reward; every other agent's reward is 0.0
        # now, so their totals stay as they are.
        self._cumulative_rewards[agent] = reward
        self.success = success
        # One dict display with the family's entries unpacked last (as info.update(extra) would
        # add them), without the method call.
        self.infos[agent] = {
            "team_reward": team,
            "local_reward": local,
            "reward": reward,
            "success": success,
            "turn": self.turn,
            "task_id": self.task_id,
            "parsed": parsed,
            "reason": reason,
            **(extra or _NO_EXTRA),
        }
        last = agent == self._last_role
        if last:
            self.turn += 1
        if done or (last and self.turn >= self.max_turns):
            ended = self.terminations if done else self.truncations
            for a in self.agents:
                ended[a] = True
                if a != agent:
                    self.infos[a] = {**self.infos[a], "success": success}
        self.agent_selection = self._next_role[agent]

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            import gymnasium

            gymnasium.logger.warn("render() called with render_mode=None; nothing to render")
            return None
        if self.render_mode == "human":
            print(self._render_text())
            return None
        if self.render_mode == "ansi":
            return self._render_text()
        return self._render_rgb()

    def _render_text(self) -> str:
        raise NotImplementedError

    def _render_rgb(self) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} has no rgb_array render")

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ branching

    def clone(self) -> TextEnv:
        """Return an independent env in the same state, RNG included.

        The same action on the original and the clone gives the same result, and stepping one
        never changes the other. Only mutable state is copied; immutable values are shared.
        """
        new = object.__new__(type(self))
        d = self.__dict__.copy()
        d["_spaces"] = None  # spaces are per instance (seeding one must not seed the other)
        new.__dict__ = d
        if self.agents:
            new.agents = self.agents[:]
            new.rewards = self.rewards.copy()
            new._cumulative_rewards = self._cumulative_rewards.copy()
            new.terminations = self.terminations.copy()
            new.truncations = self.truncations.copy()
            new.infos = {a: i.copy() for a, i in self.infos.items()}
        self._rng_shared = new._rng_shared = True
        self._copy_state(new)
        return new

    def __str__(self) -> str:
        return self.metadata["name"]


def _id_seed(task_id: TaskId) -> int:
    """A seed that depends on a task id alone (stable across processes, unlike ``hash``)."""
    key = f"int:{int(task_id)}" if isinstance(task_id, int | np.integer) else f"str:{task_id}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
