"""TRL (>= 1.16): a reward function with TRL's signature, and a multi-turn `environment_factory`.

Single-turn GRPO (each completion is one action; `env_reward` scores it on the env)::

    from trl import GRPOConfig, GRPOTrainer
    from mas_envs.adapters.trl import env_reward, make_dataset

    data = make_dataset("mas/PlanPath-v0", n=512, plays=["planner"], others="oracle")
    GRPOTrainer(model, reward_funcs=env_reward, train_dataset=data, args=GRPOConfig(...)).train()

Multi-turn (TRL's experimental environment interface: the model acts by calling the env's `act`
tool, whose result is its next prompt, until the episode ends; `get_reward` is the return)::

    from mas_envs.adapters.trl import ToolEnv

    GRPOTrainer(model, train_dataset=data, environment_factory=ToolEnv, args=...).train()

The dataset rows (`make_dataset`) carry the policy's first turn as a chat `prompt` and the
columns that replay the episode (`env_id`, `task_id`, `split`, `mode`, `plays`, `others`,
`env_kwargs`); TRL passes them to the reward function and to `ToolEnv.reset`. `plays` and
`others` map the roles onto the one policy (`mas_envs.adapters.roles`; docs/integrations.md).
The multi-turn interface needs a chat template that renders tool calls (Qwen3's, for one).
"""

from __future__ import annotations

import json
from typing import Any

from mas_envs.adapters.roles import ROW_KEYS, RolePlay, episode_rows, replay
from mas_envs.optional import missing

__all__ = ["ToolEnv", "completion_text", "env_reward", "make_dataset"]


def make_dataset(env_id: str, *, n: int, **episode: Any) -> Any:
    """A `datasets.Dataset` of ``n`` tasks (options: `mas_envs.adapters.roles.episode_rows`).

    ``env_kwargs`` is stored as a JSON string (Arrow has no type for an arbitrary dict).
    """
    try:
        from datasets import Dataset
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise missing("datasets", e, purpose="make_dataset") from e
    rows = episode_rows(env_id, n=n, **episode)
    for row in rows:
        row["env_kwargs"] = json.dumps(row["env_kwargs"])
        row["task_id"] = str(row["task_id"])  # one column type for int and str task ids
    return Dataset.from_list(rows)


def completion_text(completion: Any) -> str:
    """A TRL completion as text: a string as it is; messages: the last assistant content."""
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion)):
        if message.get("role") == "assistant":
            content = message.get("content") or ""
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def env_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """The env's reward for each completion as the policy's first action of its row's episode.

    TRL's reward-function signature: ``kwargs`` holds the dataset columns (one list each, as
    `make_dataset` writes them) besides TRL's own (``trainer_state``, ``completion_ids``, ...).
    The reward is the acting role's ``alpha * team + local`` for that one step.
    """
    missing = [c for c in ROW_KEYS if c not in kwargs]
    if missing:
        raise KeyError(
            f"env_reward needs the dataset columns {missing}; build the dataset with "
            "mas_envs.adapters.trl.make_dataset"
        )
    rewards = []
    for i, completion in enumerate(completions):
        play = replay({c: kwargs[c][i] for c in ROW_KEYS})
        rewards.append(play.step(completion_text(completion)).reward)
    return rewards


class ToolEnv:
    """TRL's multi-turn environment over one episode: the model acts through the `act` tool.

    TRL makes one per rollout (``environment_factory=ToolEnv``), calls ``reset(**row)`` with the
    dataset row, exposes the public method `act` as a tool, and scores the rollout with
    `get_reward`: the summed reward of the roles the policy played, or the env's format penalty
    when the model never called `act` (a model that does not act has not earned anything).
    """

    def __init__(self) -> None:
        self._play: RolePlay | None = None
        self._actions = 0
        self._agent = ""

    def reset(self, **row: Any) -> None:
        """Start the row's episode (`replay`); the row's ``prompt`` already is its first turn."""
        self._play = replay(row)
        self._actions = 0
        self._agent = self._play.env.agent_selection

    def act(self, answer: str) -> str:
        """Submit your answer for this turn to the environment.

        Args:
            answer: Your answer, in the exact format the prompt asks for.

        Returns:
            The prompt of your next turn, or the result when the episode is over.
        """
        play = self._require_episode()
        if play.turn is None:
            return "The episode is over; do not call act again."
        self._actions += 1
        step = play.step(answer if isinstance(answer, str) else json.dumps(answer))
        feedback = f"Reward {step.reward:+.2f}."
        if step.info.get("reason"):
            feedback += f" {step.info['reason']}."
        if step.next is None:
            solved = "solved" if play.success else "not solved"
            return f"{feedback} The episode is over: the task is {solved}."
        obs, agent = step.next.observation, step.next.agent
        if agent == self._agent:
            return f"{feedback}\n\n{obs['prompt']}"
        self._agent = agent  # one model plays every role: a new role brings its system text
        return f"{feedback}\n\nYou now act as the {agent}.\n{obs['system']}\n\n{obs['prompt']}"

    def get_reward(self) -> float:
        """The rollout's reward (see the class docstring)."""
        play = self._require_episode()
        if self._actions == 0:
            return float(play.env.format_penalty)
        return float(sum(play.returns[r] for r in play.plays or ()))

    def _require_episode(self) -> RolePlay:
        if self._play is None:
            raise RuntimeError("ToolEnv used before reset(); TRL calls reset(**row) first")
        return self._play
