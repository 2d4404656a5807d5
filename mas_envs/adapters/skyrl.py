"""Every env id as a skyrl-gym (>= 0.4) `BaseTextEnv`, for SkyRL's trainer.

Importing this module registers each id of `mas_envs.list_envs()` in skyrl-gym's registry
(`skyrl_gym.make("mas/PlanPath-v0", env_config=..., extras=...)`). A SkyRL dataset row names the
id in `env_class` and the episode in `extra_info`; `dataset_rows` writes such rows::

    import pandas as pd
    from mas_envs.adapters.skyrl import dataset_rows

    pd.DataFrame(dataset_rows("mas/PlanPath-v0", n=1024)).to_parquet("train.parquet")
    # skyrl-train: data.train_data=['train.parquet'], environment.env_class=mas/PlanPath-v0

`extra_info["env_kwargs"]` is a JSON object's text (Parquet cannot store an empty struct);
`MasTextEnv` decodes it, and also takes a dict.

An episode is one growing chat, as SkyRL's generator keeps it: `init` returns the policy's first
turn (system and user message), each `step(text)` applies the text for the acting role and
returns the next turn as one user message (prefixed with that role's system text when the role
changes), with the acting role's reward (`alpha * team + local`). `extra_info` may set `plays`
(the roles the policy plays; default all) and `others` (`"oracle"` or `"random"` for the rest),
`mode` (`"single"`: the single-agent mode), `split`, `env_kwargs` and `task_id` (or `seed`).
"""

from __future__ import annotations

import json
from typing import Any

from mas_envs.optional import missing

try:
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
except ImportError as e:  # pragma: no cover - depends on the environment
    raise missing("skyrl_gym", e, purpose="mas_envs.adapters.skyrl") from e

import mas_envs
from mas_envs.adapters.roles import Turn, episode_rows, make_role_play
from mas_envs.chat import as_messages

__all__ = ["MasTextEnv", "dataset_rows", "register"]

_EPISODE_KEYS = ("task_id", "seed", "split", "mode", "plays", "others", "env_kwargs")


class MasTextEnv(BaseTextEnv):
    """One episode of ``env_id`` as SkyRL's text env (see the module docstring).

    Args:
        env_config: SkyRL's per-env config (``environment.skyrl_gym.<env_class>``); its keys
            are defaults for ``extra_info``.
        extras: The dataset row's extra columns; the episode is read from ``extra_info``.
        env_id: The registered id (set by the registration).
    """

    def __init__(
        self, env_config: Any = None, extras: dict[str, Any] | None = None, *, env_id: str
    ) -> None:
        super().__init__()
        info = {**dict(env_config or {}), **dict((extras or {}).get("extra_info") or {})}
        unknown = set(info) - set(_EPISODE_KEYS) - {"env_id", "agent"}
        if unknown:
            raise ValueError(
                f"unknown extra_info keys {sorted(unknown)} for {env_id}; known: "
                f"{list(_EPISODE_KEYS)}"
            )
        self.play = make_role_play(
            env_id,
            mode=info.get("mode", "mas"),
            split=info.get("split", "train"),
            plays=info.get("plays"),
            others=info.get("others", "oracle"),
            env_kwargs=info.get("env_kwargs"),
        )
        self._task_id = info.get("task_id")
        self._seed = info.get("seed")
        self.max_turns = self.play.env.max_turns * len(self.play.plays or ())
        self._system = ""
        self._format_errors = 0

    def init(self, prompt: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Start the episode; the dataset's ``prompt`` is replaced by the env's own first turn."""
        options = None if self._task_id is None else {"task_id": self._task_id}
        turn = self.play.reset(seed=self._seed, options=options)
        assert turn is not None
        self._system = turn.observation["system"]
        return as_messages(turn.observation), {"agent": turn.agent, "task_id": self.task_id}

    @property
    def task_id(self) -> Any:
        return self.play.env.task_id

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        out = self.play.step(action)
        self._format_errors += not out.info["parsed"]
        observations = [] if out.next is None else [self._message(out.next)]
        return BaseTextEnvStepOutput(
            observations=observations,
            reward=out.reward,
            done=out.done,
            metadata={**out.info, "agent": out.next.agent if out.next else None},
            postprocessed_action=None,
        )

    def _message(self, turn: Turn) -> dict[str, str]:
        obs = turn.observation
        if obs["system"] == self._system:
            return {"role": "user", "content": obs["prompt"]}
        self._system = obs["system"]
        return {"role": "user", "content": f"{obs['system']}\n\n{obs['prompt']}"}

    def get_metrics(self) -> dict[str, Any]:
        returns = {f"return/{role}": value for role, value in self.play.returns.items()}
        return {
            "success": float(self.play.success),
            "turns": float(self.play.env.turn),
            "format_errors": float(self._format_errors),
            **returns,
        }


def dataset_rows(env_id: str, *, n: int, **episode: Any) -> list[dict[str, Any]]:
    """SkyRL dataset rows (``prompt``, ``env_class``, ``extra_info``) for ``n`` tasks of
    ``env_id``; ``episode`` takes `mas_envs.adapters.roles.episode_rows`' options."""
    rows = []
    for row in episode_rows(env_id, n=n, **episode):
        prompt = row.pop("prompt")
        row.pop("agent")
        # Parquet cannot write a struct with no fields ({}, the common case): store the text
        row["env_kwargs"] = json.dumps(row["env_kwargs"], sort_keys=True)
        rows.append({"prompt": prompt, "env_class": row.pop("env_id"), "extra_info": row})
    return rows


def register() -> None:
    """Register every env id in skyrl-gym's registry (idempotent; done on import)."""
    for env_id in mas_envs.list_envs():
        if env_id not in skyrl_gym.registry:
            skyrl_gym.register(
                id=env_id,
                entry_point="mas_envs.adapters.skyrl:MasTextEnv",
                kwargs={"env_id": env_id},
            )


register()
