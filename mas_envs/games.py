"""The team of the game envs (Sokoban, Plan-Path, Sudoku): a tool agent proposes, a planner acts.

:class:`TeamGameEnv` holds what the three games share, so each game's env keeps only its rules:

* the roles: ``mode="mas"``, ``tool`` then ``planner`` each turn (the tool's answer is only scored
  on a copy of the state, the planner's is played); ``mode="single"``, one ``planner``; a game may
  add ``mode="tool"``, the tool agent alone with its code tool (Plan-Path: the paper's SA-code
  ablation);
* the level ids per split (:data:`mas_envs.registry.GAME_SPLITS`);
* ``tool_mode``: ``"plan"`` (the tool answers like the planner) or ``"code"`` (the tool answers
  with a program that prints its answer, run in the sandbox on the state as text, the game's
  :meth:`~TeamGameEnv._tool_stdin`); its options, its runner (shared by clones: runs are cached per
  program and stdin), :meth:`~TeamGameEnv.prefetch`, and the rule that a failure of the sandbox
  itself costs the tool nothing;
* the system text per agent, chosen once by the game's :meth:`~TeamGameEnv._system_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from mas_envs import programs
from mas_envs.base import Outcome, TaskId, TextEnv
from mas_envs.registry import GAME_SPLITS

__all__ = ["TeamGameEnv"]


class TeamGameEnv(TextEnv):
    """A game played by a tool agent and a planner (or one planner); a game subclasses it.

    A game implements :class:`~mas_envs.base.TextEnv`'s hooks but ``task_ids`` and ``_system``,
    and two more: :meth:`_system_text` and :meth:`_tool_stdin`.

    Args:
        tool_mode: ``"plan"`` (the tool answers like the planner) or ``"code"`` (with a program
            that prints its answer, run in the sandbox; see the game's card).
        tool_timeout_s: Wall-clock limit of one tool program (``tool_mode="code"``), (0, 60].
        tool_memory_mb: Memory limit of one tool program (``tool_mode="code"``), 32-8192.
        **kwargs: ``mode``, ``alpha``, ``max_turns``, ``split``, ``render_mode``,
            ``max_action_chars`` (see :class:`~mas_envs.base.TextEnv`).

    Raises:
        ValueError: An option is out of range (the message names it and the allowed values).
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi", "rgb_array"],
        "is_parallelizable": True,
    }
    """A game adds its ``name`` and ``render_fps``."""
    roles: ClassVar[dict[str, tuple[str, ...]]] = {
        "mas": ("tool", "planner"),
        "single": ("planner",),
    }

    def __init__(
        self,
        *,
        tool_mode: str = "plan",
        tool_timeout_s: float = 5.0,
        tool_memory_mb: int = 512,
        **kwargs: Any,
    ) -> None:
        runner = programs.runner_for(tool_mode, tool_timeout_s, tool_memory_mb)
        super().__init__(**kwargs)
        self.tool_mode = tool_mode
        self.tool_timeout_s = float(tool_timeout_s)
        # Only the team (and a game's tool alone, mode="tool") has a tool agent; mode="single" is
        # the same game in either tool_mode.
        if self.mode == "tool" and runner is None:
            raise ValueError(
                "mode='tool' is the tool agent alone with its code tool: use tool_mode='code' "
                "(a *Code id, e.g. mas/PlanPathCode-v1)"
            )
        self._runner = runner if self.mode != "single" else None
        self._mas = self.mode == "mas"
        texts = self.mode if self._runner is None else "code" if self._mas else "code-alone"
        self._systems = {a: self._system_text(texts, a) for a in self.possible_agents}

    # ------------------------------------------------------------------ hooks for a game

    def _system_text(self, texts: str, agent: str) -> str:
        """The system text of ``agent``; ``texts`` is the mode, or ``"code"`` for the team with
        ``tool_mode="code"``, ``"code-alone"`` for the tool alone (``mode="tool"``, where a game
        offers it); called once per agent, at construction."""
        raise NotImplementedError

    def _tool_stdin(self) -> str:
        """The current state as a tool program reads it on its stdin (``tool_mode="code"``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared

    def task_ids(self, split: str | None = None) -> Sequence[TaskId]:
        return GAME_SPLITS[split or self.split]

    def _system(self, agent: str) -> str:
        return self._systems[agent]

    def _writes_program(self, agent: str | None) -> bool:
        """``agent`` (default: ``agent_selection``) answers with a program (the tool in
        ``tool_mode="code"``)."""
        return self._runner is not None and (agent or self.agent_selection) == "tool"

    def _program_failed(self, reason: str, info: dict[str, Any]) -> Outcome:
        """The outcome of a tool program that gave no answer: the format penalty, or nothing
        when the sandbox itself failed (``info["verdict"] == "sandbox_error"``: not the agent's
        fault)."""
        if info["verdict"] == "sandbox_error":
            return Outcome(0.0, reason=reason, info=info)
        return Outcome(self.format_penalty, parsed=False, reason=reason, info=info)

    def prefetch(self, texts: Sequence[str], agent: str | None = None) -> None:
        """Run the programs of candidate tool replies ``texts`` at once (``tool_mode="code"``).

        A tree rollout samples K replies for the tool and steps K clones with them; ``prefetch``
        runs their programs in one pooled sandbox call and fills the cache the clones share, so
        the K steps only read it. It changes no state; other agents' texts are ignored.
        """
        runner = self._runner
        if runner is None or (agent or self.agent_selection) != "tool":
            return
        runner.prefetch_texts(texts, self._tool_stdin(), self.max_action_chars)
