"""A tiny learnable TextEnv for trainer tests: each role must say the digit shown in its prompt.

Roles ``("caller", "echo")`` in ``mode="mas"``, ``("echo",)`` in ``mode="single"``. At each turn
each role sees ``Say <d>.`` for a digit that depends on the task, the turn and the role; the
answer's first character is read. Local reward: 1.0 for the right digit, 0.2 for another digit,
0.0 otherwise (unparsed). Team reward 1.0 when the last role answered right and every role did in
this turn (success, the episode terminates). A tiny model can learn this by copying one byte.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from mas_envs.base import Outcome, TextEnv

__all__ = ["DigitEnv"]


class DigitEnv(TextEnv):
    """Say the digit in the prompt (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "name": "digit_v0"}
    roles: ClassVar[dict[str, tuple[str, ...]]] = {
        "mas": ("caller", "echo"),
        "single": ("echo",),
    }
    steps_taken = 0  # class-level counter: tests check which envs were stepped

    def task_ids(self, split: str | None = None) -> range:
        split = split or self.split
        return {
            "train": range(0, 10_000),
            "validation": range(10_000, 11_000),
            "test": range(20_000, 21_000),
        }[split]

    def _load_task(self, task_id: Any) -> None:
        self._base = int(task_id)
        self._turn_ok = True

    def _digit(self, agent: str) -> int:
        j = self.possible_agents.index(agent)
        return (self._base * 7 + self.turn * 3 + j * 5) % 10

    def _apply(self, agent: str, text: str) -> Outcome:
        DigitEnv.steps_taken += 1
        if agent == self.possible_agents[0]:
            self._turn_ok = True
        text = text.strip()
        want = str(self._digit(agent))
        if not text or not text[0].isdigit():
            self._turn_ok = False
            return Outcome(0.0, parsed=False, reason="the answer must start with a digit")
        ok = text[0] == want
        self._turn_ok = self._turn_ok and ok
        solved = ok and self._turn_ok and agent == self.possible_agents[-1]
        return Outcome(
            1.0 if ok else 0.2, team_reward=1.0 if solved else 0.0, success=solved, done=solved
        )

    def _system(self, agent: str) -> str:
        return "Answer with one digit."

    def _prompt(self, agent: str) -> str:
        return f"Say {self._digit(agent)}."

    def oracle_action(self, agent: str | None = None) -> str:
        return str(self._digit(agent or self.agent_selection))

    def random_action(self, rng: np.random.Generator, agent: str | None = None) -> str:
        return str(int(rng.integers(10)))

    def _render_text(self) -> str:
        return f"task {self._base}, turn {self.turn}"
