"""The engine protocol: token ids in, token ids and their log-probs out.

Every engine (:mod:`mas_trainer.engines.transformers`, :mod:`mas_trainer.engines.vllm`,
:mod:`mas_trainer.engines.openai`, and the Ray backend's remote engine) implements :class:`Engine`.
The learner trains on exactly the ids an engine returns, and the PPO ratio compares against the
log-probs the engine reports, so an engine must report the log-probs of the distribution it
*actually* sampled from: ``softmax(logits / temperature)`` restricted to the top-p nucleus
(:func:`mas_trainer.at_grpo.token_logprobs` computes the same thing in the learner). Greedy decoding
reports log-probs at temperature 1 over the full vocabulary.

This module imports no torch: the OpenAI-compatible client and the evaluation code use it without
the ``train`` extra.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

__all__ = ["Completion", "Engine", "SamplingParams"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample a completion.

    Attributes:
        temperature: Softmax temperature (> 0). 0 means greedy.
        top_p: Nucleus mass in (0, 1]; 1 samples from the full vocabulary.
        max_tokens: Most tokens generated per completion (the stop token included).
        greedy: Take the argmax token; log-probs are reported at temperature 1.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 128
    greedy: bool = False

    def __post_init__(self) -> None:
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")

    @property
    def is_greedy(self) -> bool:
        """True when decoding takes the argmax (``greedy`` or temperature 0)."""
        return self.greedy or self.temperature == 0.0


@dataclass(frozen=True)
class Completion:
    """One generated completion.

    Attributes:
        token_ids: Sampled ids, ending with the stop token when ``finish_reason == "stop"``.
        logprobs: Log-prob of each sampled id under the sampling distribution.
        finish_reason: ``"stop"`` (a stop token was sampled) or ``"length"`` (hit ``max_tokens``).
    """

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str


class Engine(Protocol):
    """What the rollout needs from a generation backend."""

    def generate(
        self, prompts: list[list[int]], params: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        """Sample one completion per prompt (token ids), in prompt order."""
        ...

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Take the learner's new weights (a no-op when the engine shares the learner's model)."""
        ...
