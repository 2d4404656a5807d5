"""One policy, many roles: a multi-agent env as the turn stream a one-policy trainer sees.

LLM-RL trainers (TRL, verl, OpenRLHF, SkyRL, prime-rl) train one policy on conversations. A team
env has several roles acting in turn. `RolePlay` maps the roles onto that policy in one of
three ways (docs/integrations.md says what each costs in fidelity to AT-GRPO):

1. **one model plays every role** (``plays=None``): every turn of every role goes to the policy;
2. **one role is trained, the others are frozen or scripted** (``plays=["planner"]``,
   ``others=oracle_policy`` or any ``(env, agent) -> str``, e.g. a frozen model): the other
   roles' turns are played inside ``reset``/``step`` and never reach the policy;
3. **the single-agent mode** (``make(id, mode="single")``): one role does the whole task.

::

    import mas_envs
    from mas_envs.adapters import RolePlay
    from mas_envs.policies import oracle_policy

    play = RolePlay(mas_envs.make("mas/PlanPath-v0"), plays=["planner"], others=oracle_policy)
    turn = play.reset(seed=0)              # the planner's first turn (the tool already spoke)
    while turn is not None:
        step = play.step(my_model(turn.observation))  # reward of this action, and the next turn
        turn = step.next
    print(play.success, play.returns)
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import mas_envs
from mas_envs.base import TextEnv
from mas_envs.chat import as_messages
from mas_envs.policies import Policy, oracle_policy, random_policy

__all__ = [
    "ROW_KEYS",
    "RolePlay",
    "Step",
    "Turn",
    "episode_rows",
    "make_role_play",
    "replay",
    "scripted_policy",
    "task_ids",
]


def scripted_policy(name: str, seed: int | None = None) -> Policy:
    """A reference policy by name, for configs that carry strings: ``"oracle"`` or ``"random"``."""
    if name == "oracle":
        return oracle_policy
    if name == "random":
        return random_policy(seed)
    raise ValueError(f"unknown scripted policy {name!r}; choose 'oracle' or 'random'")


@dataclass(frozen=True)
class Turn:
    """A turn the policy must take: which role acts and what it observes."""

    agent: str
    observation: dict[str, str]


@dataclass(frozen=True)
class Step:
    """What the policy's action did.

    Attributes:
        reward: The acting role's reward for this action (``alpha * team + local``).
        terminated: The episode ended (solved, or the team agreed).
        truncated: The episode hit ``max_turns``.
        info: The acting role's ``infos`` entry (``success``, ``parsed``, ``reason``, ...).
        next: The policy's next turn, or ``None`` when the episode is over.
    """

    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    next: Turn | None

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


@dataclass
class RolePlay:
    """An AEC env seen by one policy that plays ``plays`` (default: every role).

    Args:
        env: A ``mas_envs`` env (``mas_envs.make(...)``), in either mode.
        plays: The roles whose turns go to the policy; ``None`` for all of them.
        others: The policy of the roles not in ``plays`` (one for all, or one per role).
    """

    env: TextEnv
    plays: Collection[str] | None = None
    others: Policy | Mapping[str, Policy] | None = None
    returns: dict[str, float] = field(init=False, default_factory=dict)
    """Each role's summed reward in this episode (scripted roles included)."""

    def __post_init__(self) -> None:
        roles = list(self.env.possible_agents)
        plays = roles if self.plays is None else list(self.plays)
        unknown = [r for r in plays if r not in roles]
        if unknown or not plays:
            raise ValueError(f"plays must name roles of this env {roles}, got {plays}")
        self.plays = tuple(plays)
        rest = [r for r in roles if r not in self.plays]
        if rest and self.others is None:
            raise ValueError(
                f"roles {rest} are not played by the policy; pass others= a policy for them "
                "(e.g. mas_envs.policies.oracle_policy, or a frozen model's (env, agent) -> str)"
            )
        if isinstance(self.others, Mapping):
            missing = [r for r in rest if r not in self.others]
            if missing:
                raise ValueError(f"others has no policy for roles {missing}")

    @property
    def success(self) -> bool:
        """The task is solved."""
        return bool(self.env.success)

    @property
    def turn(self) -> Turn | None:
        """The policy's current turn, or ``None`` when the episode is over."""
        env = self.env
        if not env.agents or env.terminations[env.agent_selection]:
            return None
        if env.truncations[env.agent_selection]:
            return None
        agent = env.agent_selection
        return Turn(agent, env.observe(agent))

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Turn | None:
        """Reset the env and play scripted roles up to the policy's first turn."""
        self.env.reset(seed=seed, options=options)
        self.returns = dict.fromkeys(self.env.possible_agents, 0.0)
        self._play_others()
        return self.turn

    def step(self, text: str) -> Step:
        """Apply the policy's ``text`` for the current role, then play scripted roles."""
        env = self.env
        agent = env.agent_selection
        if self.turn is None:
            raise RuntimeError("step() called after the episode ended; call reset() first")
        env.step(text)
        reward = float(env.rewards[agent])
        info = dict(env.infos[agent])
        self.returns[agent] += reward
        self._play_others()
        terminated = bool(env.terminations.get(agent, False))
        truncated = bool(env.truncations.get(agent, False))
        return Step(reward, terminated, truncated, info, self.turn)

    def _play_others(self) -> None:
        env = self.env
        assert self.plays is not None
        while self.turn is not None and env.agent_selection not in self.plays:
            agent = env.agent_selection
            policy = self.others[agent] if isinstance(self.others, Mapping) else self.others
            assert policy is not None
            env.step(policy(env, agent))
            self.returns[agent] += float(env.rewards[agent])


def make_role_play(
    env_id: str,
    *,
    mode: str = "mas",
    split: str = "train",
    plays: Collection[str] | None = None,
    others: str = "oracle",
    env_kwargs: Mapping[str, Any] | str | None = None,
) -> RolePlay:
    """A `RolePlay` from plain values (what a dataset row or a config file carries).

    ``others`` names the scripted policy of the roles not in ``plays`` (``"oracle"`` or
    ``"random"``); it is unused when the policy plays every role. ``env_kwargs`` may be a JSON
    object's text: Parquet cannot store an empty struct, so SkyRL's rows carry it encoded.
    ``plays`` may be any sequence (a column read back from Parquet is an array).
    """
    if isinstance(env_kwargs, str):
        decoded = json.loads(env_kwargs) if env_kwargs.strip() else {}
        if not isinstance(decoded, dict):
            raise ValueError(f"env_kwargs must be a JSON object, got {env_kwargs!r}")
        env_kwargs = decoded
    roles = None if plays is None else [str(role) for role in plays]
    env = mas_envs.make(env_id, mode=mode, split=split, **(env_kwargs or {}))
    return RolePlay(env, plays=roles, others=scripted_policy(others, seed=0) if roles else None)


def episode_rows(
    env_id: str,
    *,
    n: int,
    split: str = "train",
    mode: str = "mas",
    plays: Collection[str] | None = None,
    others: str = "oracle",
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One row per task: the policy's first turn as chat ``prompt``, and what replays the episode.

    Rows are plain JSON values (a trainer's dataset, a parquet file): ``prompt`` (system and user
    message of the policy's first turn), ``agent`` (its role), and ``env_id``, ``task_id``,
    ``split``, ``mode``, ``plays``, ``others``, ``env_kwargs``, which `make_role_play` and
    ``reset(options={"task_id": ...})`` turn back into the same episode (`replay`). Tasks are
    those of `task_ids`: the first ``n`` ids of a held-out split, or ``n`` seeded train draws.
    """
    kwargs: dict[str, Any] = {
        "mode": mode,
        "split": split,
        "plays": list(plays) if plays else None,
        "others": others,
        "env_kwargs": dict(env_kwargs or {}),
    }
    play = make_role_play(env_id, **kwargs)
    rows = []
    for i, task_id in enumerate(task_ids(play.env, split, n)):
        turn = play.reset(options={"task_id": task_id}) if task_id is not None else None
        if turn is None:
            turn = play.reset(seed=i)
            task_id = play.env.task_id
        assert turn is not None  # a fresh episode always has a first turn
        rows.append(
            {
                "prompt": as_messages(turn.observation),
                "agent": turn.agent,
                "env_id": env_id,
                "task_id": task_id,
                **kwargs,
            }
        )
    return rows


ROW_KEYS = ("env_id", "task_id", "split", "mode", "plays", "others", "env_kwargs")
"""The columns of an `episode_rows` row that `replay` reads."""


def replay(row: Mapping[str, Any]) -> RolePlay:
    """The episode of an `episode_rows` row, reset to the policy's first turn.

    This is all a single-turn reward needs: ``replay(row).step(completion).reward`` is the
    env's reward for the completion. ``env_kwargs`` may be a JSON string and ``task_id`` a
    string of an int (as Arrow-backed datasets store them).
    """
    kwargs = row.get("env_kwargs") or {}
    if isinstance(kwargs, str):
        kwargs = json.loads(kwargs)
    play = make_role_play(
        row["env_id"],
        mode=row.get("mode", "mas"),
        split=row.get("split", "train"),
        plays=row.get("plays"),
        others=row.get("others", "oracle"),
        env_kwargs=kwargs,
    )
    task_id = row["task_id"]
    if isinstance(task_id, str) and isinstance(play.env.task_ids(play.env.split)[0], int):
        task_id = int(task_id)
    play.reset(options={"task_id": task_id})
    return play


def task_ids(env: TextEnv, split: str, n: int) -> list[Any]:
    """The tasks an adapter serves: the first ``n`` ids of a held-out split, in order.

    For ``"train"`` it returns ``n`` times ``None``: draw those tasks with ``reset(seed=i)``,
    which skips train levels that are also validation or test levels (small boards repeat), so
    the splits stay disjoint in content.
    """
    if split == "train":
        return [None] * n
    return list(env.task_ids(split)[:n])
