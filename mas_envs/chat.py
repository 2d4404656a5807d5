"""Observations as LLM stacks expect them: one string, or a list of chat messages.

Every env observes ``{"system": str, "prompt": str}``. Chat-completion APIs, tokenizer chat
templates and most LLM-RL trainers want ``[{"role": "system", ...}, {"role": "user", ...}]``;
completion-style APIs and text-game frameworks want one string. The functions here convert, and
the two wrappers give an env whose observations already come in that form::

    import gymnasium, mas_envs
    from mas_envs.chat import ChatObservation

    env = ChatObservation(gymnasium.make("mas/PlanPath-v0"), "messages")
    messages, info = env.reset(seed=0)        # [{"role": "system", ...}, {"role": "user", ...}]

    aec = mas_envs.chat.ChatView(mas_envs.make("mas/PlanPath-v0"), "text")
    aec.reset(seed=0)
    text = aec.observe(aec.agent_selection)   # system text, a blank line, then the prompt
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
from gymnasium import spaces
from pettingzoo.utils.wrappers import BaseWrapper

from mas_envs import spaces as text_spaces

__all__ = ["FORMATS", "ChatObservation", "ChatView", "as_messages", "as_text", "convert"]

FORMATS = ("dict", "text", "messages")
"""Observation formats: the env's own dict, one string, or chat messages."""

Message = dict[str, str]


def as_messages(obs: Mapping[str, str]) -> list[Message]:
    """``{"system", "prompt"}`` as ``[system message, user message]`` (OpenAI chat format)."""
    return [
        {"role": "system", "content": obs["system"]},
        {"role": "user", "content": obs["prompt"]},
    ]


def as_text(obs: Mapping[str, str]) -> str:
    """``{"system", "prompt"}`` as one string: the system text, a blank line, the prompt."""
    return f"{obs['system']}\n\n{obs['prompt']}"


def convert(obs: Mapping[str, str], fmt: str) -> Any:
    """``obs`` in format ``fmt`` (one of `FORMATS`)."""
    if fmt == "dict":
        return dict(obs)
    if fmt == "text":
        return as_text(obs)
    if fmt == "messages":
        return as_messages(obs)
    raise ValueError(f"unknown observation format {fmt!r}; choose one of {list(FORMATS)}")


def _space(fmt: str) -> spaces.Space:
    text = spaces.Text(
        min_length=0, max_length=2 * text_spaces.MAX_PROMPT_CHARS + 2, charset=text_spaces.CHARSET
    )
    if fmt == "text":
        return text
    role = spaces.Text(min_length=4, max_length=9, charset="abcdefghijklmnopqrstuvwxyz")
    return spaces.Sequence(spaces.Dict({"role": role, "content": text}), stack=False)


class ChatObservation(gymnasium.ObservationWrapper):
    """A Gymnasium env (the single-agent view) whose observations are text or chat messages.

    Args:
        env: ``gymnasium.make("mas/<Name>-v<N>")`` or any env observing ``{"system", "prompt"}``.
        fmt: ``"text"`` (one string) or ``"messages"`` (system and user message).
    """

    def __init__(self, env: gymnasium.Env, fmt: str = "messages") -> None:
        if fmt not in ("text", "messages"):
            raise ValueError(f"fmt must be 'text' or 'messages', got {fmt!r}")
        super().__init__(env)
        self.fmt = fmt
        self.observation_space = _space(fmt)

    def observation(self, observation: Mapping[str, str]) -> Any:
        return convert(observation, self.fmt)


class ChatView(BaseWrapper):
    """A PettingZoo AEC env whose ``observe`` returns text or chat messages.

    Rewards, infos, ``clone()`` (through ``env.unwrapped``) and turn order are the env's own.
    PettingZoo's ``api_test`` expects array-like observations and does not apply to this view;
    the wrapped env passes it.
    """

    def __init__(self, env: Any, fmt: str = "messages") -> None:
        if fmt not in ("text", "messages"):
            raise ValueError(f"fmt must be 'text' or 'messages', got {fmt!r}")
        super().__init__(env)
        self.fmt = fmt
        self._obs_space = _space(fmt)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def observe(self, agent: str) -> Any:
        return convert(self.env.observe(agent), self.fmt)
