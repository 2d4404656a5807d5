"""``mas/Sokoban-v0``: Sokoban played by a team of LLM agents (or one agent) in text.

Env card (the long form with a real prompt and an image is ``docs/envs/sokoban.md``).

Roles:
    ``mode="mas"`` (default): ``tool`` then ``planner`` each turn. The tool agent proposes a
    complete plan; the plan is scored on a copy of the state and never moves anything. The planner
    sees the board, the moves so far and the tool's latest proposal; its moves are the ones made.
    ``mode="single"``: one ``planner`` does both (the single-agent baseline).

Observation:
    ``{"system": str, "prompt": str}``. The prompt holds the rules and legend, the live ASCII
    board (``# _ . $ * @ +``: wall, floor, goal, box, box on goal, player, player on goal), the
    turn, boxes on goals ``k/n``, the player's row and column, the moves made so far, what failed
    in the last answer, a warning once a box is stuck on a dead cell, the tool's proposal (the
    planner in the team) and the answer format.

Action:
    Text with a list of moves ``U D L R`` after a ``####`` line, e.g. ``"#### U, R, R, D"``. Also
    accepted: prose before the answer, code fences, ``["U", "R"]``, ``up right``, ``URRD``, any case
    (:func:`mas_envs.moves.parse_moves`). Anything else: a format penalty with a reason.
    At most ``4 * width * height`` moves per answer.

Rewards (``r = alpha * team + local``):

    ==========================  =======  ==============================================
    event                        local    note
    ==========================  =======  ==============================================
    each move made               -0.01
    failed move                  -0.05    instead of -0.01; the player stays put
    box pushed onto a goal       +1.0
    box pushed off a goal        -0.5
    level solved                 +10.0    moves after the solving one are ignored
    shaping, each move           gamma * phi(s') - phi(s),  phi = -0.1 * sum of each box's
                                          Manhattan distance to its nearest goal, gamma = 1.0
    answer that does not parse   -1.0     ``parsed=False`` and a ``reason``
    team (shared)                1.0      if the level is solved after this action, else 0.0
    ==========================  =======  ==============================================

    The tool's local reward is what its plan would earn from the current state (simulated); the
    planner's is what its moves earned on the board. ``shaping_scale`` and ``shaping_gamma`` are
    constructor options.

Success and termination:
    Success: every box on a goal on the real board. The episode terminates when the level is
    solved and truncates after ``max_turns`` turns (default 3, the paper's value: room for a plan,
    a correction and a retry). ``infos[agent]`` adds ``boxes_on_goals``, ``moves_made``,
    ``failed_moves`` and ``stuck``.

Seeds and splits:
    A level id (from ``registry.GAME_SPLITS``; train, validation and test are disjoint) seeds
    ``np.random.default_rng(level_id)``, which generates the level for the configured size and box
    count by reverse play from a solved room, so every level is solvable and none is solved at the
    start. ``reset(seed=s)`` draws a level id from the split; ``reset(options={"task_id": i})``
    picks one, and ``reset(options={"task_id": picture})`` plays a hand-made level given as its
    ASCII picture (in the legend's symbols, no larger than ``width`` x ``height``).
    Levels are disjoint too: the default 6x6 one-box room has few distinct levels, so a train
    reset, by seed or by id, redraws any level that is also a validation or test level
    (``docs/envs/sokoban.md``).

Difficulty:
    ``width`` and ``height`` (5-16, including the wall ring; default 6x6) and ``boxes`` (1 to
    ``(width - 2) * (height - 2) // 4``; default 1).

Plan code (``tool_mode="code"``, the id ``mas/SokobanCode-v0``):
    The tool answers with a ```` ```python ```` block instead; the program runs in the sandbox
    (``tool_timeout_s``, default 5 s; ``tool_memory_mb``, default 512) with the current board on
    its stdin, and its output is parsed like a plan-mode answer and scored the same way. No
    program, a failed program or an output without a plan: -1.0 with a ``reason``; a failure of
    the sandbox itself: 0.0. The planner also sees the program and its output; ``infos`` add
    ``verdict``. Runs are cached per (program, stdin), shared by clones; ``prefetch(texts)`` runs
    K candidates in one pooled call. ``mode="single"`` is the same in both tool modes.

Version history:
    v0: first version. ``mas/SokobanCode-v0``: first version of the plan-code variant; within v0
    (2026-12-01) a tool program's MemoryError is a runtime_error, not memory_limit (same reward).
    Both, split fix within v0 (no new version): ``reset(options={"task_id": i})`` of a train or
    validation id whose level is held out serves a redrawn level, as seeded resets always did;
    prompts, rules, rewards, the test split and the golden transcripts are unchanged
    (``docs/envs/sokoban.md``).
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, ClassVar

import numpy as np

from mas_envs import programs
from mas_envs.base import Outcome, OutcomeFields, TaskId
from mas_envs.games import TeamGameEnv
from mas_envs.sokoban import prompts
from mas_envs.sokoban.board import Board, Rewards, parse_level, play_fields, player_region
from mas_envs.sokoban.generate import generate_level
from mas_envs.sokoban.prompts import NO_NOTE, failed_note, parse_answer, read_answer
from mas_envs.sokoban.render import render_rgb
from mas_envs.sokoban.solver import solve

__all__ = ["SokobanEnv"]

_MOVES = ("U", "D", "L", "R")
_ONE_MOVE: dict[str, tuple[str, ...]] = {f"#### {m}": (m,) for m in _MOVES}
"""The canonical one-move answers (what the numeric view sends): parsed by one lookup."""
_MIN_SIDE, _MAX_SIDE = 5, 16


class SokobanEnv(TeamGameEnv):
    """Sokoban for LLM agents; see the module docstring (the env card).

    Args:
        width: Columns of the room, including the wall ring (5-16).
        height: Rows of the room, including the wall ring (5-16).
        boxes: Boxes (and goals) per level, 1 to ``(width - 2) * (height - 2) // 4``.
        shaping_scale: Scale of the distance potential (0 turns shaping off).
        shaping_gamma: Discount of the shaping term, in (0, 1].
        **kwargs: ``tool_mode`` (the tool answers with moves, or with a program that prints
            them), ``tool_timeout_s``, ``tool_memory_mb`` (see
            :class:`~mas_envs.games.TeamGameEnv`); ``mode``, ``alpha``, ``max_turns``, ``split``,
            ``render_mode``, ``max_action_chars`` (see :class:`~mas_envs.base.TextEnv`).

    Raises:
        ValueError: A parameter is out of range (the message names it and the allowed range).
    """

    metadata: ClassVar[dict[str, Any]] = {
        **TeamGameEnv.metadata,
        "name": "sokoban_v0",
        "render_fps": 4,
    }

    def __init__(
        self,
        *,
        width: int = 6,
        height: int = 6,
        boxes: int = 1,
        shaping_scale: float = 0.1,
        shaping_gamma: float = 1.0,
        **kwargs: Any,
    ) -> None:
        for name, value in (("width", width), ("height", height)):
            if not isinstance(value, int) or not _MIN_SIDE <= value <= _MAX_SIDE:
                raise ValueError(
                    f"{name} must be an int from {_MIN_SIDE} to {_MAX_SIDE} (the wall ring "
                    f"included), got {value!r}"
                )
        max_boxes = (width - 2) * (height - 2) // 4
        if not isinstance(boxes, int) or not 1 <= boxes <= max_boxes:
            raise ValueError(
                f"boxes must be an int from 1 to {max_boxes} for a {width}x{height} room, "
                f"got {boxes!r}"
            )
        if not (np.isfinite(shaping_scale) and shaping_scale >= 0):
            raise ValueError(f"shaping_scale must be a finite number >= 0, got {shaping_scale!r}")
        if not (np.isfinite(shaping_gamma) and 0 < shaping_gamma <= 1):
            raise ValueError(f"shaping_gamma must be in (0, 1], got {shaping_gamma!r}")
        super().__init__(**kwargs)
        self._code_ask = prompts.code_ask(self.tool_timeout_s)
        self.width, self.height, self.n_boxes = width, height, boxes
        self.reward_table = Rewards(shaping_scale=shaping_scale, shaping_gamma=shaping_gamma)
        self.max_moves = 4 * width * height
        # Game state: immutable values only, so clone() shares them (no _copy_state needed).
        self.board: Board | None = None
        self.player = 0
        self.boxes: frozenset[int] = frozenset()
        self.made: tuple[str, ...] = ()
        # What went wrong with the planner's last answer, as (planner, tool) read it.
        self.note: prompts.Note = prompts.NO_NOTE
        self.proposal: str | None = None  # the tool's latest answer, as the planner sees it
        self.proposed_first: str | None = None
        # tool_mode="code": the tool's latest program and what it printed (immutable).
        self.program: programs.ToolProgram | None = None
        self._solution: tuple[tuple[int, frozenset[int]], tuple[str, ...] | None] | None = None
        # Prompts of the current state; replaced (never cleared in place) whenever the state
        # changes, so a clone sharing it still reads prompts of its own, identical state.
        self._prompts: dict[str, str] = {}
        self._status = (0, False)  # (boxes on goals, stuck) of the real board
        # The prompt's pieces, cached (shared by clones): its start per turn (static per env),
        # its state part per (player, boxes) of the level (a new dict per level), and the list
        # of the moves made, appended to as moves are made.
        self._turn_heads: dict[int, str] = {}
        self._views: dict[tuple[int, frozenset[int]], str] = {}
        self._made_text = prompts.NO_MOVES

    # ------------------------------------------------------------------ TextEnv hooks

    def _load_task(self, task_id: TaskId) -> None:
        if isinstance(task_id, str):
            level = parse_level(task_id)
            if level.board.width > self.width or level.board.height > self.height:
                raise ValueError(
                    f"a custom level of {level.board.width}x{level.board.height} does not fit "
                    f"this env's width={self.width}, height={self.height}; make the env at least "
                    "that large"
                )
            if level.boxes <= level.board.goals:
                raise ValueError("a custom level must not be solved already")
        elif isinstance(task_id, Integral) and not isinstance(task_id, bool) and task_id >= 0:
            rng = np.random.default_rng(int(task_id))
            level = generate_level(rng, self.width, self.height, self.n_boxes)
        else:
            raise ValueError(
                f"a Sokoban task id is a level id (an int >= 0) or a level's ASCII picture (a "
                f"str); got {task_id!r}"
            )
        board = level.board
        self.board, self.player, self.boxes = board, level.player, level.boxes
        # (boxes on goals, stuck); a generated level is never stuck, a hand-made one may be.
        self._status = (len(self.boxes & board.goals), not board.dead.isdisjoint(self.boxes))
        self.made = ()
        self._made_text = prompts.NO_MOVES
        self._views = {}
        self.note = prompts.NO_NOTE
        self.proposal = None
        self.proposed_first = None
        self.program = None
        self._solution = None
        self._prompts = {}

    def _apply(self, agent: str, text: str) -> OutcomeFields:
        # The parsed paths return Outcome's fields as a plain tuple (base.OutcomeFields): the
        # hot path of rollouts, where a NamedTuple costs four times a tuple to build.
        board = self.board
        assert board is not None, "reset() first"
        if self._runner is not None and agent == "tool":
            return self._apply_program(text)
        moves = _ONE_MOVE.get(text)
        reason = ""
        if moves is None:
            moves, reason = read_answer(text, self.max_moves)
        self._prompts = {}
        if not moves:
            if agent == "tool":
                self.proposal = prompts.proposal_line(None, reason)
                self.proposed_first = None
            else:
                self.note = prompts.unparsed_note(reason)
            return Outcome(
                self.format_penalty,
                parsed=False,
                reason=reason,
                info={
                    "boxes_on_goals": len(self.boxes & board.goals),
                    "moves_made": 0,
                    "failed_moves": 0,
                    "stuck": not board.dead.isdisjoint(self.boxes),
                },
            )
        player, boxes, reward, made, invalid, _, on_goals, solved = play_fields(
            board, self.player, self.boxes, moves, self.reward_table
        )
        stuck = not board.dead.isdisjoint(boxes)  # goals are never dead cells
        info = {
            "boxes_on_goals": on_goals,
            "moves_made": len(made),
            "failed_moves": len(invalid),
            "stuck": stuck,
        }
        if agent == "tool":
            # Scored on a copy: the real state stays as it is.
            self.proposal = prompts.proposal_line(moves, "")
            self.proposed_first = moves[0]
            return (reward, 0.0, False, False, True, "", info)
        self.player, self.boxes, self._status = player, boxes, (on_goals, stuck)
        if made:
            shown = ", ".join(made)
            self._made_text = f"{self._made_text}, {shown}" if self.made else shown
            self.made += made
        self.note = failed_note(invalid) if invalid else NO_NOTE
        if solved:
            return (reward, 1.0, True, True, True, "", info)
        return (reward, 0.0, False, False, True, "", info)

    def _apply_program(self, text: str) -> Outcome:
        """``tool_mode="code"``: run the tool's program, score the plan it printed on a copy."""
        board = self.board
        assert board is not None, "reset() first"
        assert self._runner is not None
        self._prompts = {}
        program = programs.tool_program(self._runner, text, self._tool_stdin(), self.turn)
        self.program = program
        info: dict[str, Any] = {
            "boxes_on_goals": len(self.boxes & board.goals),
            "moves_made": 0,
            "failed_moves": 0,
            "stuck": not board.dead.isdisjoint(self.boxes),
            "verdict": program.verdict,
        }
        output = program.output
        if output is None:
            reason = program.reason
            moves: tuple[str, ...] = ()
        else:
            moves, reason = parse_answer(output, self.max_moves)
            if not moves:
                reason = f"the program's output has no plan: {reason}"
        if not moves:
            self.proposal = prompts.program_proposal_line(None, reason)
            self.proposed_first = None
            return self._program_failed(reason, info)
        _, boxes, reward, made, invalid, _, on_goals, _ = play_fields(
            board, self.player, self.boxes, moves, self.reward_table
        )
        info.update(
            boxes_on_goals=on_goals,
            moves_made=len(made),
            failed_moves=len(invalid),
            stuck=not board.dead.isdisjoint(boxes),
        )
        # Scored on a copy: the real state stays as it is.
        self.proposal = prompts.program_proposal_line(moves, "")
        self.proposed_first = moves[0]
        return Outcome(reward, info=info)

    def _tool_stdin(self) -> str:
        board = self.board
        assert board is not None, "reset() first"
        return board.render(self.player, self.boxes)  # the board as the prompt shows it

    def observe(self, agent: str) -> dict[str, str]:
        # TextEnv.observe without its two method calls: observe runs after every step.
        text = self._prompts.get(agent) or self._build_prompt(agent)
        return {"system": self._systems[agent], "prompt": text}

    def _task_key(self) -> tuple[int, int, frozenset[int], frozenset[int], int, frozenset[int]]:
        board = self.board
        assert board is not None, "reset() first"
        # The player's region, not its cell: the same puzzle with the player a few free steps
        # away is the same puzzle (with the exact cell, 905 of 1,000 test levels matched a train
        # level this way against 631 exactly, on 6x6 with one box).
        region = player_region(board, self.player, self.boxes)
        return (board.width, board.height, board.walls, board.goals, region, self.boxes)

    def _generator_key(self) -> tuple[int, int, int]:
        return (self.width, self.height, self.n_boxes)

    def _system_text(self, texts: str, agent: str) -> str:
        return prompts.SYSTEM[texts, agent]

    def _prompt(self, agent: str) -> str:
        return self._prompts.get(agent) or self._build_prompt(agent)

    def _build_prompt(self, agent: str) -> str:
        # prompts.build_prompt's text from cached pieces (a test checks the two agree): the
        # prompt is rebuilt after every step.
        board = self.board
        assert board is not None, "reset() first"
        player, boxes = self.player, self.boxes
        on_goals, stuck = self._status
        key = (player, boxes)
        view = self._views.get(key)
        if view is None:
            row, col = divmod(player, board.width)
            view = prompts.state_text(board.render(player, boxes), on_goals, len(boxes), row, col)
            self._views[key] = view
        turn = self.turn
        head = self._turn_heads.get(turn)
        if head is None:
            shown_turn = min(turn + 1, self.max_turns)
            head = self._turn_heads[turn] = prompts.turn_head(shown_turn, self.max_turns)
        if self._runner is None:
            program, ask = "", prompts.ASK[agent]
        else:
            program, ask = self._program_parts(agent)
            ask = ask or prompts.ASK[agent]
        proposal = self.proposal if agent == "planner" and self._mas else None
        shown = "" if proposal is None else f"\nThe tool agent's proposal: {proposal}\n"
        text = (
            f"{head}{view}Moves made so far ({len(self.made)}): {self._made_text}\n"
            f"{self.note[agent == 'tool']}{prompts.STUCK if stuck else ''}{program}{shown}\n{ask}"
        )
        self._prompts[agent] = text
        return text

    def _program_parts(self, agent: str) -> tuple[str, str]:
        """``(program, ask)`` of :func:`~mas_envs.sokoban.prompts.build_prompt` for ``agent``."""
        if self._runner is None:
            return "", ""
        program = self.program
        own = agent == "tool"
        shown = ""
        # The planner's proposal line already says when the tool's reply had no program.
        if program is not None and (own or program.run is not None):
            report = programs.program_report(program, "Your" if own else "The tool agent's")
            shown = prompts.program_section(report, self.proposal, own)
        return shown, self._code_ask if own else ""

    def _render_text(self) -> str:
        board = self.board
        assert board is not None, "reset() first"
        return board.render(self.player, self.boxes)

    def _render_rgb(self) -> np.ndarray:
        board = self.board
        assert board is not None, "reset() first"
        return render_rgb(board, self.player, self.boxes)

    # ------------------------------------------------------------------ policies

    def solution(self) -> tuple[str, ...] | None:
        """The shortest move list from the current state (``None`` if it cannot be solved)."""
        board = self.board
        assert board is not None, "reset() first"
        key = (self.player, self.boxes)
        if self._solution is None or self._solution[0] != key:
            self._solution = (key, solve(board, self.player, self.boxes))
        return self._solution[1]

    def oracle_action(self, agent: str | None = None) -> str:
        """A shortest plan (``#### U, R``); with ``tool_mode="code"``, the tool's is a program.

        The tool's program is a BFS over (player, boxes) with the board written into it, which
        prints a shortest plan (:func:`~mas_envs.sokoban.prompts.oracle_program`).
        """
        moves = self.solution()
        solvable = bool(moves)
        if not moves:
            # Stuck (or solved): no plan helps; answer a well-formed single move.
            moves = ("U",)
        if self._writes_program(agent):
            board = self.board
            assert board is not None
            if not solvable:
                return programs.print_moves_program(moves)
            free = board.width * board.height - len(board.walls)
            return prompts.oracle_program(self._tool_stdin(), free, len(self.boxes), moves)
        return prompts.answer_text(moves)

    def random_action(self, rng: np.random.Generator, agent: str | None = None) -> str:
        n = int(rng.integers(1, 2 * (self.width + self.height) + 1))
        moves = tuple(_MOVES[i] for i in rng.integers(0, 4, size=n).tolist())
        if self._writes_program(agent):
            return programs.print_moves_program(moves)
        return prompts.answer_text(moves)

    # ------------------------------------------------------------------ numeric view

    def numeric_action_count(self) -> int:
        """Discrete actions per agent: 0-3 = U, D, L, R (one move per action)."""
        return 4

    def numeric_action_text(self, agent: str, action: int) -> str:
        """The answer text of discrete ``action`` (0-3 = U, D, L, R), e.g. ``"#### U"``; with
        ``tool_mode="code"`` the tool's is a program printing it."""
        if not 0 <= int(action) < 4:
            raise ValueError(f"a Sokoban numeric action is 0-3 (U, D, L, R), got {action!r}")
        if self._runner is not None and agent == "tool":  # tool_mode="code": a program
            return programs.print_moves_program((_MOVES[int(action)],))
        return prompts.answer_text((_MOVES[int(action)],))

    def numeric_observation_shape(self) -> tuple[int, ...]:
        """``(8, height, width)``: see :meth:`numeric_observation`."""
        return (8, self.height, self.width)

    def numeric_observation(self, agent: str) -> np.ndarray:
        """Planes (float32, 0/1): wall, goal, box, player, then four constant planes that one-hot
        the first move of the tool's latest proposal (U, D, L, R; all zero for the tool, in
        ``single`` mode, or when the proposal did not parse)."""
        board = self.board
        assert board is not None, "reset() first"
        obs = np.zeros(self.numeric_observation_shape(), dtype=np.float32)
        obs[0] = 1.0  # a smaller custom level sits top left, walled in
        h, w = board.height, board.width
        planes = np.zeros((4, h * w), dtype=np.float32)
        planes[1, list(board.goals)] = 1.0
        planes[2, list(self.boxes)] = 1.0
        planes[3, self.player] = 1.0
        obs[0, :h, :w] = 0.0
        obs[0, :h, :w].flat[list(board.walls)] = 1.0
        obs[1:4, :h, :w] = planes[1:].reshape(3, h, w)
        if agent == "planner" and self.mode == "mas" and self.proposed_first is not None:
            obs[4 + _MOVES.index(self.proposed_first)] = 1.0
        return obs
