"""The unit of training data shared by rollout, learner and outputs.

A :class:`TrainSample` is one agent turn: the exact prompt token ids the policy saw, the exact
completion token ids it sampled, and the engine's log-probabilities of those tokens. The learner
trains on exactly these ids (token in, token out), so no re-tokenization can shift the log-probs.

This module is deliberately dependency-free (no torch) so rollout code and tests can build samples
without the ``train`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrainSample:
    """One sampled agent turn, ready for the learner.

    Attributes:
        prompt_ids: Token ids of the chat-formatted prompt (``apply_chat_template(...,
            add_generation_prompt=True)``).
        completion_ids: Token ids the engine sampled, including the stop token when it stopped.
        logprobs: Engine log-probabilities of ``completion_ids`` under the distribution actually
            sampled from (same length as ``completion_ids``). May be empty for supervised
            (warm-start) samples, which have no engine log-probs; ``Learner.update`` rejects those.
        reward: The AT-GRPO reward of this candidate (mixed team/local reward, read right after
            the step).
        advantage: Group-relative advantage; filled in by the trainer before ``Learner.update``.
        group: AT-GRPO group key ``(root env uid, turn, agent)``; samples with equal keys are
            compared with each other.
        role: The agent's role name (e.g. ``"planner"``).
        policy: Which policy (learner) trains on this sample.
        info: The env's info dict for the step (success, team/local reward, parsed action, ...).
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    reward: float
    advantage: float = 0.0
    group: tuple[Any, ...] = ()
    role: str = ""
    policy: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def num_tokens(self) -> int:
        """Prompt plus completion length in tokens."""
        return len(self.prompt_ids) + len(self.completion_ids)
