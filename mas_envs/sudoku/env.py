"""Sudoku (``mas/Sudoku-v0``): fill a 4x4 or 9x9 grid that has exactly one solution.

Env card
========

**Task.** A ``size x size`` Sudoku (4, the paper's default, or 9) with ``clues`` given digits and
exactly one solution, generated from the level id (:mod:`mas_envs.sudoku.generate`): a random full
grid, then clues removed while the solution stays unique.

**Roles** (turn order; one turn = one cycle):

* ``mode="mas"`` (default): ``tool`` proposes a solution (a whole grid or fills); it is only
  *scored* on a copy of the board. Then ``planner`` sees the proposal, normalised to the grid it
  would give, with a rule check (clues kept, repeated digits, empty cells; no hidden information)
  and decides what is actually filled.
* ``mode="single"``: one ``planner`` does the whole task (the single-agent baseline).

**Observation.** ``{"system": str, "prompt": str}``. The prompt shows the rules, the given clues
(these never change), the current board with the number of empty cells, every move made so far
(cells filled or erased, rejected and unreadable answers with the reason), the turn, for the
planner the tool agent's proposal of this turn, for the tool the rule check of its previous
proposal, and the answer format. See ``docs/envs/sudoku.md``
for a full example.

**Action.** Text; the answer is read after the last ``####`` line (else the last code fence, else
the last fill list or grid in the text; :mod:`mas_envs.sudoku.prompts`). Two forms:

* the whole board, one row per line, digits separated by spaces, ``.`` (or ``0``/``_``) for an
  empty cell; box lines, commas, brackets and ``Row 1:`` labels are tolerated::

      ####
      1 2 3 4
      3 4 1 2
      2 1 4 3
      4 3 2 1

  The grid replaces the board: a ``.`` on a cell filled earlier erases it.
* fills ``[[row, column, digit], ...]``, rows and columns numbered **from 1**: ``#### [[1, 3, 4]]``.
  A fill overwrites that cell; other cells stay.

**Rules and rewards** (local reward of one answer; the paper's numbers):

======================================================  =================================
event                                                   local reward
======================================================  =================================
unreadable answer (no grid/fill list, wrong shape,      -1.0 (``format_penalty``),
row/column/digit out of range, one cell two digits)     board unchanged
changes or erases a given clue                          -0.5, rejected (board unchanged)
a digit twice in a row, column or box afterwards        -0.5, rejected (board unchanged)
an accepted move: progress shaping                      ``phi(after) - phi(before)``,
                                                        ``phi = (correct - wrong) / E``
the board equals the solution afterwards                +2.0 on top of the shaping
======================================================  =================================

``E`` is the number of cells to fill (``size**2 - clues``); ``correct``/``wrong`` count the filled
non-clue cells that do/do not match the hidden solution. A move that solves an empty board scores
``1 + 2 = 3``; a wrong digit costs ``1/E``, correcting it earns ``2/E``.

``planner``: the reward of its answer on the real board. ``tool``: the reward its proposal *would*
earn on the current board (a copy; the real board never changes). A proposal that changes a clue
is never a success, whatever else it gets right (a pitfall of the paper's code: full grids that
ignored the clues were accepted). Team reward: 1.0 when the real board is solved by this action,
else 0.0. Each agent gets ``alpha * team + local``.

**Success.** The real board equals the puzzle's unique solution (``infos[agent]["success"]``).

**Termination.** Terminated when solved; truncated after ``max_turns`` turns (default 3, the
paper's: a whole solution fits in one answer, so three turns leave two corrections).

**Seeds and splits.** A level id seeds ``np.random.default_rng(level_id)``, which draws the puzzle
for the env's ``size`` and ``clues``; ids per split are ``GAME_SPLITS`` (disjoint).
Puzzles are disjoint too: a 4x4 train reset, by seed or by id, redraws any puzzle that is also a
validation or test puzzle (4x4 puzzles repeat across ids; ``docs/envs/sudoku.md``).

**Difficulty.** ``size`` (4 or 9) and ``clues`` (4x4: 4-15, default 6; 9x9: 25-80, default 30;
fewer clues cannot give a unique puzzle reliably). ``infos`` also carry ``empty`` (empty cells on
the board after the answer; for the tool, on the copy; a rejected or unreadable answer changes
nothing) and ``valid`` (the answer parsed and kept the rules).

**Numeric view.** ``size**3`` discrete actions, one fill each (``a = (row * size + col) * size +
digit - 1``, 0-based, as text ``#### [[row+1, col+1, digit]]``), and a ``(2 * size + 1, size,
size)`` float32 observation: one plane per digit on the board, the clue mask, and one plane per
digit of the tool agent's latest proposed grid (planner in ``mas`` mode; zeros otherwise).

**Plan code** (``tool_mode="code"``, the id ``mas/SudokuCode-v0``). The tool answers with a
```` ```python ```` block instead; the program runs in the sandbox (``tool_timeout_s``, default
5 s; ``tool_memory_mb``, default 512) with the given clues on its stdin, and its output is parsed
and judged like a direct answer. No program, a failed program or an output without an answer:
-1.0 with a ``reason``; a failure of the sandbox itself: 0.0. The planner also sees this turn's
program and its output; ``infos`` add ``verdict``. Runs are cached per (program, stdin), shared by
clones; ``prefetch(texts)`` runs K candidates in one pooled call. ``mode="single"`` is the same in
both tool modes.

**Version history.** v0: first version. ``mas/SudokuCode-v0``: first version of the plan-code
variant; within v0 (2026-12-01) a tool program's MemoryError is a runtime_error, not memory_limit
(same reward). Both, split fix within v0 (no new version): ``reset(options={"task_id": i})`` of a
train or validation id whose puzzle is held out serves a redrawn puzzle, as seeded resets always
did; prompts, rules, rewards, the test split and the golden transcripts are unchanged
(``docs/envs/sudoku.md``).
"""

from __future__ import annotations

from itertools import compress
from operator import eq, itemgetter, ne
from typing import Any, ClassVar

import numpy as np

from mas_envs import programs
from mas_envs.base import Outcome, OutcomeFields, TaskId
from mas_envs.games import TeamGameEnv
from mas_envs.spaces import clean_text
from mas_envs.sudoku import prompts
from mas_envs.sudoku.generate import check_config, generate
from mas_envs.sudoku.render import render_board
from mas_envs.sudoku.rules import conflict, conflict_at, format_grid, geometry

__all__ = ["SudokuEnv"]

SOLVED_REWARD = 2.0
INVALID_REWARD = -0.5


class SudokuEnv(TeamGameEnv):
    """Sudoku with a tool agent that proposes and a planner that fills (see the module card).

    Args:
        size: Board size, 4 or 9.
        clues: Given digits (``None``: 6 for 4x4, 30 for 9x9); see
            :data:`mas_envs.sudoku.generate.CLUE_RANGE`.
        **kwargs: ``tool_mode`` (the tool answers with a grid or fills, or with a program that
            prints them), ``tool_timeout_s``, ``tool_memory_mb`` (see
            :class:`~mas_envs.games.TeamGameEnv`); ``mode``, ``alpha``, ``max_turns``, ``split``,
            ``render_mode``, ``max_action_chars`` (see :class:`~mas_envs.base.TextEnv`).
    """

    metadata: ClassVar[dict[str, Any]] = {
        **TeamGameEnv.metadata,
        "name": "sudoku_v0",
        "render_fps": 2,
    }

    def __init__(self, *, size: int = 4, clues: int | None = None, **kwargs: Any) -> None:
        self.clues = check_config(size, clues)
        self.size = int(size)
        super().__init__(**kwargs)
        geo = geometry(self.size)
        self._rules = prompts.rules_text(self.size, geo.box, self.max_turns)
        self._format = prompts.format_text(self.size)
        self._code_format = prompts.code_format_text(self.size, self.tool_timeout_s)

    # ------------------------------------------------------------------ task

    def _load_task(self, task_id: TaskId) -> None:
        if isinstance(task_id, bool) or not isinstance(task_id, (int, np.integer)) or task_id < 0:
            raise ValueError(f"a Sudoku task id is a non-negative int level id, got {task_id!r}")
        n = self.size
        puzzle, solution = generate(np.random.default_rng(int(task_id)), n, self.clues)
        free = tuple(i for i, v in enumerate(puzzle) if not v)
        given = tuple(i for i, v in enumerate(puzzle) if v)
        self._puzzle, self._solution = puzzle, solution
        self._free_get = itemgetter(*free)
        self._free_solution = self._free_get(solution)
        self._n_free = len(free)
        self._given = given
        self._clue_get = itemgetter(*given)
        self._clue_values = self._clue_get(puzzle)
        self._clue_text = format_grid(puzzle, n, boxes=True)
        self._clue_input = format_grid(puzzle, n)  # a tool program's stdin (tool_mode="code")
        # Game state: immutable values only, so clone() copies nothing.
        self._board = puzzle
        self._score = 0  # correct - wrong over the free cells of the board
        self._history: tuple[tuple[int, bytes, bytes | None, str], ...] = ()
        # Text caches (derived from the state above; immutable values, shared by clones).
        self._history_lines: tuple[str, ...] = ()
        self._board_cache: tuple[bytes | None, str] = (None, "")
        self._proposal_cache: tuple[tuple[int, bytes | None, str] | None, str] = (None, "")
        self._proposal: tuple[int, bytes | None, str] | None = None
        # tool_mode="code": the tool's latest program and what it printed (immutable).
        self._program: programs.ToolProgram | None = None

    @property
    def puzzle(self) -> bytes:
        """The given clues as a board (``bytes``, row-major, 0 = empty)."""
        return self._puzzle

    @property
    def solution(self) -> bytes:
        """The unique solution (hidden from the agents; for analysis and tests)."""
        return self._solution

    @property
    def board(self) -> bytes:
        """The current board: clues plus the cells the planner filled."""
        return self._board

    # ------------------------------------------------------------------ rules and rewards

    def _score_of(self, board: bytes) -> int:
        cells = self._free_get(board)
        correct = sum(map(eq, cells, self._free_solution))
        return 2 * correct - (self._n_free - cells.count(0))

    def _judge(self, text: str) -> tuple[float, bytes | None, str, int]:
        """Score ``text`` against the current board without changing anything.

        Returns ``(local_reward, new_board, reason, new_score)``: ``new_board`` is ``None`` when
        the text did not parse; ``reason`` is non-empty when it did not parse or broke a rule.
        """
        n, puzzle = self.size, self._puzzle
        parsed = prompts.parse_answer(text, n)
        if parsed.reason:
            return self.format_penalty, None, parsed.reason, 0
        reason = ""
        new = parsed.grid
        if new is not None:
            if self._clue_get(new) != self._clue_values:
                i = next(i for i in self._given if new[i] != puzzle[i])
                reason = _clue_reason(i, new[i], puzzle[i], n)
            elif new != self._solution:
                reason = conflict(new, n)
        else:
            fills = parsed.fills or ()
            work = bytearray(self._board)
            for i, v in fills:
                if puzzle[i] and puzzle[i] != v and not reason:
                    reason = _clue_reason(i, v, puzzle[i], n)
                work[i] = v
            new = bytes(work)
            if not reason and new != self._solution:
                # The board was clean before, so only the filled cells can clash.
                reason = conflict_at(new, n, (i for i, _ in fills))
        if reason:
            return INVALID_REWARD, new, reason, self._score
        if new == self._solution:
            return (
                (self._n_free - self._score) / self._n_free + SOLVED_REWARD,
                new,
                "",
                self._n_free,
            )
        score = self._score_of(new)
        return (score - self._score) / self._n_free, new, "", score

    def _apply(self, agent: str, text: str) -> OutcomeFields:
        # Outcome's fields as plain tuples (base.OutcomeFields): the hot path of rollouts.
        if self._runner is not None and agent == "tool":
            return self._apply_program(text)
        reward, new, reason, score = self._judge(text)
        after = self._board if new is None or reason else new  # a rejected answer changes nothing
        info = {"valid": not reason, "empty": after.count(0)}
        if agent == "tool":
            self._proposal = (self.turn, new, reason)
            return (reward, 0.0, False, False, new is not None, reason, info)
        if new is None or reason:
            note = ("not read: " if new is None else "rejected: ") + reason
            self._history = (*self._history, (self.turn, self._board, None, note))
            return (reward, 0.0, False, False, new is not None, reason, info)
        self._history = (*self._history, (self.turn, self._board, new, ""))
        solved = new == self._solution
        self._board, self._score = new, score
        return (reward, 1.0 if solved else 0.0, solved, solved, True, "", info)

    def _apply_program(self, text: str) -> Outcome:
        """``tool_mode="code"``: run the tool's program, judge what it printed like an answer."""
        assert self._runner is not None
        program = self._program = programs.tool_program(
            self._runner, text, self._clue_input, self.turn
        )
        verdict = program.verdict
        output = program.output
        if output is None:
            self._proposal = (self.turn, None, program.reason)
            info = {"valid": False, "empty": self._board.count(0), "verdict": verdict}
            return self._program_failed(program.reason, info)
        reward, new, reason, _ = self._judge(output)
        if new is None:
            reason = f"the program's output has no answer: {reason}"
        self._proposal = (self.turn, new, reason)
        after = self._board if new is None or reason else new
        info = {"valid": not reason, "empty": after.count(0), "verdict": verdict}
        return Outcome(reward, parsed=new is not None, reason=reason, info=info)

    def _tool_stdin(self) -> str:
        return self._clue_input  # the given clues: a program solves the puzzle, not the board

    # ------------------------------------------------------------------ text

    def _task_key(self) -> bytes | None:
        # 4x4 puzzles repeat across level ids (288 grids); a 9x9 puzzle (>= 25 clues of one of
        # ~6.7e21 grids) does not, and 2,000 held-out 9x9 puzzles would take seconds to make.
        return self._puzzle if self.size == 4 else None

    def _generator_key(self) -> tuple[int, int]:
        return (self.size, self.clues)

    def _system_text(self, texts: str, agent: str) -> str:
        return prompts.system_text(texts, agent)

    def _prompt(self, agent: str) -> str:
        parts = [
            self._rules,
            f"Given clues (these never change):\n{self._clue_text}",
            self._board_text(),
            "Moves so far:\n" + self._history_text(),
            f"Turn {self.turn + 1} of {self.max_turns}.",
        ]
        code = self._runner is not None
        if agent == "tool":
            if code and self._program is not None:
                parts.append(programs.program_report(self._program, "Your"))
            if self._proposal is not None:
                parts.append(self._own_proposal_text())
            parts.append(
                "Propose the complete solution. It is scored but does not change the board; the "
                "planner decides what is filled."
            )
        elif self.mode == "mas":
            program = self._program
            # The proposal text already says when the tool's reply had no program.
            if code and program is not None and program.turn == self.turn and program.run:
                parts.append(programs.program_report(program, "The tool agent's"))
            parts.append(self._proposal_text())
            parts.append(
                "Decide the cells to fill on the board: you may use, correct or ignore the "
                "proposal."
            )
        else:
            parts.append("Decide the cells to fill on the board.")
        parts.append(self._code_format if code and agent == "tool" else self._format)
        return "\n\n".join(parts)

    def _board_text(self) -> str:
        board, cached = self._board, self._board_cache
        if cached[0] is not board:
            n = self.size
            text = f"Current board ({board.count(0)} of {n * n} cells empty):\n" + format_grid(
                board, n, boxes=True
            )
            cached = self._board_cache = (board, text)
        return cached[1]

    def _history_text(self) -> str:
        history, lines = self._history, self._history_lines
        if not history:
            return "(none yet)"
        if len(lines) < len(history):
            # Lines are built once per entry; clones share the prefix (an immutable tuple).
            lines = lines + tuple(self._history_line(*e) for e in history[len(lines) :])
            self._history_lines = lines
        return "\n".join(lines)

    def _history_line(self, turn: int, before: bytes, after: bytes | None, note: str) -> str:
        if after is None:
            return f"turn {turn + 1}: {clean_text(note)}; the board did not change"
        n = self.size
        changed = list(compress(range(n * n), map(ne, before, after)))  # in C, no Python loop
        filled = [(i, after[i]) for i in changed if after[i]]
        erased = [i for i in changed if not after[i]]
        done = []
        if filled:
            done.append("filled " + prompts.format_fills(filled, n))
        if erased:
            done.append(
                "erased " + ", ".join(f"row {i // n + 1} column {i % n + 1}" for i in erased)
            )
        return f"turn {turn + 1}: " + ("; ".join(done) if done else "no change")

    def _own_proposal_text(self) -> str:
        """Feedback on the tool's previous proposal (what the planner did is in the moves)."""
        turn, grid, reason = self._proposal or (0, None, "")
        if grid is None:
            status = f"could not be read: {clean_text(reason)}"
        elif reason:
            status = f"was rejected by the rules: {reason}"
        else:
            status = f"kept the rules ({grid.count(0)} cells empty)"
        return f"Your proposal in turn {turn + 1} {status}."

    def _proposal_text(self) -> str:
        proposal = self._proposal
        if proposal is None or proposal[0] != self.turn:
            return "The tool agent has made no proposal this turn."
        if self._proposal_cache[0] is not proposal:
            self._proposal_cache = (proposal, self._format_proposal(proposal))
        return self._proposal_cache[1]

    def _format_proposal(self, proposal: tuple[int, bytes | None, str]) -> str:
        _, grid, reason = proposal
        if grid is None:
            if self._runner is not None:
                return f"The tool agent's program gave no proposal: {clean_text(reason)}"
            return f"The tool agent's answer could not be read: {clean_text(reason)}"
        if reason:
            check = f"rejected by the rules: {reason}"
        else:
            check = (
                "keeps every clue, no digit twice in a row, column or box, "
                f"{grid.count(0)} cells empty"
            )
        return (
            "The tool agent's proposal (as a board):\n"
            + format_grid(grid, self.size, boxes=True)
            + f"\nRule check of the proposal: {check}."
        )

    # ------------------------------------------------------------------ policies

    def oracle_action(self, agent: str | None = None) -> str:
        """The solution grid; with ``tool_mode="code"`` the tool's is a solver program
        (:func:`~mas_envs.sudoku.prompts.oracle_program`) that prints it."""
        if self._writes_program(agent):
            return prompts.oracle_program(self._clue_input)
        return "####\n" + format_grid(self._solution, self.size)

    def random_action(self, rng: np.random.Generator, agent: str | None = None) -> str:
        """A random grid (clues kept) or random fills; the tool's is a program printing one
        with ``tool_mode="code"``."""
        text = self._random_answer(rng)
        if self._writes_program(agent):
            return prompts.print_program(text)
        return text

    def _random_answer(self, rng: np.random.Generator) -> str:
        n = self.size
        free = [i for i, v in enumerate(self._puzzle) if not v]
        if rng.random() < 0.5:  # a whole grid: clues kept, every other cell a random digit
            grid = bytearray(self._puzzle)
            for i in free:
                grid[i] = int(rng.integers(1, n + 1))
            return "####\n" + format_grid(bytes(grid), n)
        cells = rng.choice(free, size=int(rng.integers(1, len(free) + 1)), replace=False)
        fills = [(int(i), int(rng.integers(1, n + 1))) for i in cells]
        return "#### " + prompts.format_fills(fills, n)

    # ------------------------------------------------------------------ render

    def _render_text(self) -> str:
        status = "solved" if self.success else f"{self._board.count(0)} empty"
        return (
            f"Sudoku {self.size}x{self.size} (level {self.task_id}, turn {self.turn}, {status})\n"
            + format_grid(self._board, self.size, boxes=True)
        )

    def _render_rgb(self) -> np.ndarray:
        return render_board(self._board, self._puzzle, self.size)

    # ------------------------------------------------------------------ numeric view

    def numeric_action_count(self) -> int:
        """Discrete actions per agent: one fill (cell, digit) each, ``size**3``."""
        return self.size**3

    def numeric_action_text(self, agent: str, action: int) -> str:
        """The answer text of discrete ``action``: ``#### [[row, col, digit]]`` (1-based); with
        ``tool_mode="code"`` the tool's is a program printing it."""
        n = self.size
        if not 0 <= action < n**3:
            raise ValueError(f"action must be in 0..{n**3 - 1} for a {n}x{n} Sudoku, got {action}")
        text = "#### " + prompts.format_fills([(action // n, action % n + 1)], n)
        if self._runner is not None and agent == "tool":  # tool_mode="code": a program
            return prompts.print_program(text)
        return text

    def numeric_observation_shape(self) -> tuple[int, ...]:
        """``(2 * size + 1, size, size)``: board digits, clue mask, proposed digits."""
        return (2 * self.size + 1, self.size, self.size)

    def numeric_observation(self, agent: str) -> np.ndarray:
        """One-hot planes of the board, the clue mask and the tool's proposed grid (planner)."""
        n = self.size
        obs = np.zeros((2 * n + 1, n * n), np.float32)
        cells = np.arange(n * n)
        board = np.frombuffer(self._board, np.uint8)
        filled = board > 0
        obs[board[filled].astype(np.intp) - 1, cells[filled]] = 1.0
        obs[n] = np.frombuffer(self._puzzle, np.uint8) > 0
        proposal = self._proposal
        if agent == "planner" and self.mode == "mas" and proposal and proposal[0] == self.turn:
            grid = proposal[1]
            if grid is not None:
                digits = np.frombuffer(grid, np.uint8)
                filled = digits > 0
                obs[n + digits[filled].astype(np.intp), cells[filled]] = 1.0
        return obs.reshape(2 * n + 1, n, n)


def _clue_reason(cell: int, value: int, clue: int, n: int) -> str:
    where = f"row {cell // n + 1}, column {cell % n + 1}"
    if not value:
        return f"erases the given clue {clue} in {where}"
    return f"changes the given clue in {where} from {clue} to {value}"
