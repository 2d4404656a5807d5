"""Plan-Path (``mas/PlanPath-v0``, ``-v1``; ``mas/PlanPathCode-v0`` .. ``-v2``): a grid path game.

Env card
========

**Task.** A ``rows x cols`` grid (default 10x10); each cell is a wall with probability
``wall_prob`` (default 0.22, the paper's). Start and goal are distinct free cells, and the goal is
always reachable from the start (BFS); the shortest path length is known to the env.

**Roles** (turn order; one turn = one cycle):

* ``mode="mas"`` (default): ``tool`` proposes a full move list; its moves are only *simulated* on a
  copy of the state. Then ``planner`` sees the tool agent's proposal and gives the moves that are
  actually made.
* ``mode="single"``: one ``planner`` does the whole task (the single-agent baseline).
* ``mode="tool"`` (code ids only): the ``tool`` alone, its program's moves are made (see Tool
  alone below).

**Observation.** ``{"system": str, "prompt": str}``. The prompt always shows the grid with the
agent marked (``A``), the agent's current row/column, the goal's, every move made so far (blocked
ones starred), the turn, for the planner the tool agent's latest proposal, and the answer format.
Example: the planner's prompt on the 5x5 test level 2000000000, turn 2, after the planner moved
``L, U, R`` (``R`` hit a wall)::

    Grid (A = agent, G = goal, # = wall, . = free; row 0 is the top, column 0 the left):
    G...#
    ..###
    #...#
    ..A#.
    ....#
    Agent at row 3, column 2. Goal at row 0, column 0.
    Moves made so far: L, U, R* (* = blocked, the agent stayed put)
    Turn 2 of 3.
    Tool agent's proposal: U, L, U, U, L
    Answer with your moves after '####', e.g.
    #### U, R, R

**Action.** Text with a list of moves ``U D L R`` (or ``up/down/left/right``), applied in order;
moves after the goal is reached are ignored. The text after the last ``####`` is read; labelled
lists (``**Actions List**: ["U","R"]``), code fences, bracketed lists and runs like ``URRD`` are
also accepted (:func:`mas_envs.moves.parse_moves`). More than ``4 * rows * cols`` moves, or any
other word, is a format error (local reward -1.0, ``parsed=False``, ``reason`` says why).

**Rewards** (per move of a move list; the paper's numbers; tables in
:mod:`mas_envs.planpath.grid`):

=========================================  ===============================================
event                                       local reward
=========================================  ===============================================
each move made                              -0.01
a blocked move (wall/edge; agent stays)     -0.10 instead, no shaping
shaping, each move that moves               ``0.99 * phi(next) - phi(cell)``,
                                            ``phi = -Manhattan(cell, goal)``
reaching the goal                           +1.0
... with the episode's move count equal     +0.5
to the BFS optimum from the start
unparseable answer                          -1.0 (``format_penalty``)
=========================================  ===============================================

``planner``: the reward of its moves on the real env. ``tool``: the reward its proposal *would*
earn from the current state (simulated on a copy; the real env never moves). Team reward: 1.0 when
the goal is reached on the real env by this action, else 0.0; in v1 the tool's team reward is the
one its proposal would bring: 1.0 when following it reaches the goal (v0: always 0.0, so the
tool's reward had no team term). Each agent gets ``alpha * team + local``.

**Success.** The agent stands on the goal (``infos[agent]["success"]``).

**Termination.** Terminated when the goal is reached; truncated after ``max_turns`` turns
(default 3, the paper's: a full path fits in one answer, so three turns leave two corrections).

**Seeds and splits.** A level id seeds ``np.random.default_rng(level_id)``, which draws the level
for the env's ``rows``, ``cols`` and ``wall_prob``; ids per split are ``GAME_SPLITS`` (disjoint).
Levels are disjoint too: a train reset, by seed or by id, redraws any level that is also a
validation or test level (tiny grids repeat levels across ids; ``docs/envs/planpath.md``).

**Difficulty.** ``rows``, ``cols`` (2..32 each) and ``wall_prob`` (0.0..0.5). Small grids (4x4,
5x5) are first-class: the trainer's default task is Plan-Path on a small grid.

**Numeric view** (:mod:`mas_envs.numeric`): 4 discrete actions (``#### U`` .. ``#### R``, one
move each) and a ``(4, rows, cols)`` float32 observation: wall, agent, goal, and the cells the tool
agent's latest proposal would visit (planner only; zeros otherwise).

**Plan code** (``tool_mode="code"``, the id ``mas/PlanPathCode-v0``). The tool answers with a
```` ```python ```` block instead; the program runs in the sandbox (``tool_timeout_s``, default
5 s; ``tool_memory_mb``, default 512) with the grid (``A`` at the agent) on its stdin, and its
output is parsed like a plan-mode answer and scored the same way. No program, a failed program or
an output without moves: -1.0 with a ``reason``; a failure of the sandbox itself: 0.0. The
planner sees the program, its output and the parsed moves in place of the proposal line;
``infos`` add ``verdict``. Runs are cached per (program, stdin), shared by clones;
``prefetch(texts)`` runs K candidates in one pooled call. ``mode="single"`` is the same in both
tool modes.

**Tool alone** (``mode="tool"``, code ids only: ``mas/PlanPathCode-v0``, ``-v1``): the paper's
SA-code ablation (its Table 3). One role, ``tool``, writes a program each turn as in the team
(the same prompt and stdin; its system text says the moves it prints are made); the moves the
program prints are made on the real env, scored like the planner's (local reward per move, team
reward 1.0 when the goal is reached). A failed program or one without moves: -1.0, no move.
Added 2026-12-06 as a new mode; the team and single-agent modes are unchanged.

**Plan code v1** (``mas/PlanPathCode-v1``): short prompts for small models. The tool's prompt is
the state and one line of instructions (:data:`~mas_envs.planpath.prompts.CODE_ASK_V1`; no sandbox
details, no previous program); the oracle program reads the grid from its stdin and is the same
text on every level (~270 characters; v0's embeds the grid: ~900 characters on 4x4); the
planner's prompt is the state, the answer format, and what the program printed as its last line
(:func:`~mas_envs.planpath.prompts.planner_report_v1`; the code itself is not shown).

**Plan code v2** (``mas/PlanPathCode-v2``): v1, except that the tool's program runs with no
input (an empty stdin), so it must hold the level: its prompt ends with
:data:`~mas_envs.planpath.prompts.CODE_ASK_V2` and the oracle program writes the grid into v1's
search (:func:`~mas_envs.planpath.prompts.oracle_program_v2`; the paper's design, where the tool
writes the grid into its code). In v1 one text, the stdin-reading search, solves every level, and
a planner that copies what it printed solves them all (issue 29; ``experiments/memorised_probe.py``
measures it: 200/200 test levels on 5x5); in v2 that team solves only the levels where the
training level's path happens to work. The planner's texts and every reward are v1's.

**Version history.** v0: first version. ``mas/PlanPathCode-v0``: first version of the plan-code
variant; within v0 (2026-12-01) a tool program's MemoryError is a runtime_error, not memory_limit
(same reward). Both, split fix within v0 (no new version): ``reset(options={"task_id": i})`` of a
train or validation id whose level is held out serves a redrawn level, as seeded resets always did;
prompts, rules, rewards, the test split and the golden transcripts are unchanged
(``docs/envs/planpath.md``).
v1 (``version=1``; ``mas/PlanPath-v1``, ``mas/PlanPathCode-v1``): the tool's reward has
its team term (see Rewards); the planner's oracle answer keeps the tool's proposal when it is a
shortest path; the plan-code texts above. Plan-mode and single-agent texts are v0's.
v2 (``version=2``; ``mas/PlanPathCode-v2`` only): the tool's program gets no input and must hold
the grid (Plan code v2 above); ``mode="tool"`` (the tool alone) has its own system text there.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from mas_envs import programs
from mas_envs.base import Outcome, OutcomeFields, TaskId
from mas_envs.games import TeamGameEnv
from mas_envs.planpath import grid, prompts

__all__ = ["PlanPathEnv"]

_NUMERIC_TEXT = tuple(f"#### {m}" for m in grid.MOVES)
_ONE_MOVE = {text: move for text, move in zip(_NUMERIC_TEXT, grid.MOVES, strict=True)}
"""The canonical one-move answers (what the numeric view sends), for :meth:`_make_move`."""
_SHOWN = {move: (move, move + "*") for move in grid.MOVES}
"""A move as the history line shows it: made, blocked."""
_CELL_PX = 16
VERSIONS = (0, 1, 2)
"""Env versions (the card's version history): 0, 1 and 2 (2: the code ids only)."""


class PlanPathEnv(TeamGameEnv):
    """Grid path planning with a tool agent and a planner (see the module docstring: the card).

    Args:
        rows: Grid height, 2..32.
        cols: Grid width, 2..32.
        wall_prob: Probability that a cell is a wall, 0.0..0.5.
        version: ``0`` or ``1`` (the card's version history; ``mas/PlanPath-v1``,
            ``mas/PlanPathCode-v1``).
        **kwargs: ``tool_mode`` (the tool answers with moves, or with a program that prints
            them), ``tool_timeout_s``, ``tool_memory_mb`` (see
            :class:`~mas_envs.games.TeamGameEnv`); ``mode``, ``alpha``, ``max_turns``, ``split``,
            ``render_mode``, ``max_action_chars`` (see :class:`~mas_envs.base.TextEnv`).
    """

    metadata: ClassVar[dict[str, Any]] = {
        **TeamGameEnv.metadata,
        "name": "planpath_v0",
        "render_fps": 4,
    }
    roles: ClassVar[dict[str, tuple[str, ...]]] = {**TeamGameEnv.roles, "tool": ("tool",)}
    """``mode="tool"``: the tool agent alone (code ids only; the card's Plan code section)."""

    def __init__(
        self,
        *,
        rows: int = 10,
        cols: int = 10,
        wall_prob: float = 0.22,
        version: int = 0,
        **kwargs: Any,
    ) -> None:
        if version not in VERSIONS:
            raise ValueError(
                f"version must be one of {list(VERSIONS)} (mas/PlanPath-v0 and -v1, "
                f"mas/PlanPathCode-v0, -v1 and -v2), got {version!r}"
            )
        if version >= 2 and kwargs.get("tool_mode") != "code":
            raise ValueError(
                "version 2 changes only the tool's program (mas/PlanPathCode-v2): pass "
                "tool_mode='code', or use version 1 (mas/PlanPath-v1)"
            )
        for name, value in (("rows", rows), ("cols", cols)):
            if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 32:
                raise ValueError(f"{name} must be an int in [2, 32], got {value!r}")
        if (
            isinstance(wall_prob, bool)
            or not isinstance(wall_prob, int | float)
            or not 0.0 <= wall_prob <= 0.5
        ):
            raise ValueError(f"wall_prob must be a number in [0.0, 0.5], got {wall_prob!r}")
        self.version = version
        super().__init__(**kwargs)
        self.rows, self.cols, self.wall_prob = rows, cols, float(wall_prob)
        self._max_moves = 4 * rows * cols
        self._code_ask = prompts.code_ask(self.tool_timeout_s)
        # Game state: immutable values only, so clone() shares them and needs no _copy_state.
        self._level: grid.Level | None = None
        self._grid_text = ""
        self._static_obs: np.ndarray | None = None  # never mutated, copied per observation
        self._cell = 0
        self._moves: tuple[str, ...] = ()
        self._blocked: tuple[int, ...] = ()  # indices into _moves of the blocked moves
        self._proposal: tuple[str, ...] | None = None
        # The prompt's history line, kept as moves are made (appended, never rebuilt), and per
        # level the prompt's head for each agent cell seen (grid with ``A``, both positions):
        # static data of the level, so a new dict per level, shared by clones.
        self._history = prompts.NO_HISTORY
        self._heads: dict[int, str] = {}
        # Static per config (shared by clones): each cell's (row, col), the prompt's turn lines.
        self._positions = tuple(divmod(cell, cols) for cell in range(rows * cols))
        self._tails: dict[int, str] = {}
        # tool_mode="code": the tool's latest program and what it printed (immutable).
        self._program: programs.ToolProgram | None = None

    # ------------------------------------------------------------------ TextEnv hooks

    def _load_task(self, task_id: TaskId) -> None:
        if not isinstance(task_id, int | np.integer) or isinstance(task_id, bool) or task_id < 0:
            raise ValueError(
                f"a Plan-Path task id is a non-negative int (a level seed), got {task_id!r}"
            )
        self._set_level(
            grid.generate(np.random.default_rng(int(task_id)), self.rows, self.cols, self.wall_prob)
        )

    def _set_level(self, level: grid.Level) -> None:
        """Start ``level`` from its start cell (``_load_task``'s second half; tests use it too)."""
        self._level = level
        self._grid_text = prompts.grid_text(level.walls, level.cols, level.goal)
        static = np.zeros((4, level.rows, level.cols), np.float32)
        static[0] = np.reshape(level.walls, (level.rows, level.cols))
        static[2].flat[level.goal] = 1.0
        self._static_obs = static
        self._cell = level.start
        self._moves = ()
        self._blocked = ()
        self._history = prompts.NO_HISTORY
        self._heads = {}
        self._proposal = None
        self._program = None

    def _apply(self, agent: str, text: str) -> OutcomeFields:
        # The parsed paths return Outcome's fields as a plain tuple (base.OutcomeFields): the
        # hot path of rollouts, where a NamedTuple costs four times a tuple to build.
        is_tool = agent == "tool"
        if not is_tool:
            move = _ONE_MOVE.get(text)
            if move is not None:
                return self._make_move(move)
        elif self._runner is not None:
            return self._apply_program(text)
        moves = prompts.canonical_moves(text, self._max_moves)
        if moves is None:
            parsed = prompts.parse_answer(text, self._max_moves)
            if parsed.reason:
                if is_tool:
                    self._proposal = None
                return Outcome(self.format_penalty, parsed=False, reason=parsed.reason)
            moves = parsed.moves
        cell, reward, made, blocked, reached = grid.run_moves(
            self._level,  # type: ignore[arg-type]
            self._cell,
            moves,
            len(self._moves),
        )
        if is_tool:  # simulated only: the real state stays as it is
            self._proposal = moves
            team = 1.0 if reached and self.version >= 1 else 0.0
            return (reward, team, False, False, True, "", {"proposal_reaches_goal": reached})
        return self._play(cell, reward, made, blocked, reached)

    def _play(
        self,
        cell: int,
        reward: float,
        made: tuple[str, ...],
        blocked: tuple[int, ...],
        reached: bool,
    ) -> OutcomeFields:
        """Make the moves that :func:`grid.run_moves` scored (``made``, ending on ``cell``)."""
        if made:
            self._history = prompts.extend_history(self._history, self._moves, made, blocked)
        if blocked:
            before = len(self._moves)
            self._blocked += tuple([before + i for i in blocked])  # a list: no generator
        self._cell = cell
        self._moves += made
        info = {"position": self._positions[cell], "moves_made": len(made)}
        team = 1.0 if reached else 0.0
        return (reward, team, reached, reached, True, "", info)

    def _make_move(self, move: str) -> OutcomeFields:
        """The planner's answer is one move: :func:`grid.run_moves` and
        :func:`prompts.extend_history` for a one-move list, inlined. A numeric-view step (one move
        per action) takes this path; a test checks it against the general one."""
        level = self._level
        assert level is not None, "call reset() first"
        cell = self._cell
        nxt, reward = level.moves[cell][move]
        before = len(self._moves)
        self._moves += (move,)
        shown = _SHOWN[move][nxt == cell]
        self._history = f"{self._history}, {shown}" if before else prompts.HISTORY + shown
        info = {"position": self._positions[nxt], "moves_made": 1}
        if nxt == cell:  # blocked: the agent stays put
            self._blocked += (before,)
            return (reward, 0.0, False, False, True, "", info)
        self._cell = nxt
        if nxt != level.goal:
            return (reward, 0.0, False, False, True, "", info)
        reward += grid.GOAL_REWARD
        if before + 1 == level.optimum:
            reward += grid.OPTIMAL_BONUS
        return (reward, 1.0, True, True, True, "", info)

    def _apply_program(self, text: str) -> Outcome:
        """``tool_mode="code"``: run the tool's program, score the moves it printed on a copy."""
        assert self._runner is not None and self._level is not None, "call reset() first"
        program = self._program = programs.tool_program(
            self._runner, text, self._tool_stdin(), self.turn
        )
        self._proposal = None
        info: dict[str, Any] = {"proposal_reaches_goal": False, "verdict": program.verdict}
        output = program.output
        if output is None:
            return self._program_failed(program.reason, info)
        parsed = prompts.parse_answer(output, self._max_moves)
        if parsed.reason:
            reason = f"the program's output has no move list: {parsed.reason}"
            self._program = program._replace(reason=reason)
            return Outcome(self.format_penalty, parsed=False, reason=reason, info=info)
        cell, reward, made, blocked, reached = grid.run_moves(
            self._level, self._cell, parsed.moves, len(self._moves)
        )
        info["proposal_reaches_goal"] = reached
        if not self._mas:  # mode="tool": the tool alone, its printed moves are made
            local, team, success, done, _, _, played = self._play(
                cell, reward, made, blocked, reached
            )
            return Outcome(local, team, success, done, info={**info, **(played or {})})
        self._proposal = parsed.moves  # simulated only: the real state stays as it is
        team = 1.0 if reached and self.version >= 1 else 0.0
        return Outcome(reward, team, info=info)

    def _tool_stdin(self) -> str:
        """The grid as the prompt shows it, ``A`` at the agent; in v2 nothing (the program holds
        the grid)."""
        return "" if self.version >= 2 else self._grid_with_agent()

    def _grid_with_agent(self, text: str | None = None) -> str:
        """The grid as the prompt shows it (or ``text``, a grid of the same size), ``A`` at the
        agent."""
        text = self._grid_text if text is None else text
        i = self._cell + self._cell // self.cols
        return text[:i] + "A" + text[i + 1 :]

    def _task_key(self) -> tuple[int, int, tuple[bool, ...], int, int]:
        level = self._level
        assert level is not None, "reset() first"
        return (level.rows, level.cols, level.walls, level.start, level.goal)

    def _generator_key(self) -> tuple[int, int, float]:
        return (self.rows, self.cols, self.wall_prob)

    def _system_text(self, texts: str, agent: str) -> str:
        return prompts.system_text(texts, agent, self.version)

    def observe(self, agent: str) -> dict[str, str]:
        # TextEnv.observe without its two method calls: observe runs after every step.
        return {"system": self._systems[agent], "prompt": self._prompt(agent)}

    def _prompt(self, agent: str) -> str:
        if self._runner is not None:
            return self._code_prompt(agent)
        # prompts.prompt's text, from the cached head, the kept history line and the cached turn
        # line (the golden transcripts and a test check the two agree): the prompt is rebuilt
        # after every step.
        cell = self._cell
        head = self._heads.get(cell)
        if head is None:
            level = self._level
            assert level is not None, "call reset() first"
            head = self._heads[cell] = prompts.head(self._grid_text, self.cols, cell, level.goal)
        turn = self.turn
        tail = self._tails.get(turn)
        if tail is None:
            shown = min(turn, self.max_turns - 1) + 1
            tail = self._tails[turn] = f"\nTurn {shown} of {self.max_turns}."
        note = prompts.BLOCKED_NOTE if self._blocked else ""
        if self._mas and agent == "planner":
            return (
                f"{head}{self._history}{note}{tail}\n"
                f"Tool agent's proposal: {prompts.proposal_text(self._proposal)}\n"
                f"{prompts.ANSWER_FORMAT}"
            )
        return f"{head}{self._history}{note}{tail}\n{prompts.ANSWER_FORMAT}"

    def _code_prompt(self, agent: str) -> str:
        """``tool_mode="code"``: the plan-mode prompt with the tool's program in place of the
        proposal line, and for the tool the instructions to answer with a program."""
        own = agent == "tool"
        program = self._program
        if self.version >= 1:
            level = self._level
            assert level is not None, "call reset() first"
            head = prompts.head(self._grid_text, self.cols, self._cell, level.goal)
            history = prompts.history_line(self._moves, self._blocked)
            ask = prompts.CODE_ASK_V2 if self.version >= 2 else prompts.CODE_ASK_V1
            tail = ask if own else prompts.planner_tail_v1(program)
            turn = min(self.turn, self.max_turns - 1)
            return prompts.code_prompt_v1(head, history, turn, self.max_turns, tail)
        if program is not None:
            section = prompts.program_section(program, self._proposal, own)
        else:
            section = "" if own else "Tool agent's proposal: none yet"
        return prompts.prompt(
            self._grid_text,
            self.cols,
            self._cell,
            self._goal,
            self._moves,
            self._blocked,
            min(self.turn, self.max_turns - 1),
            self.max_turns,
            False,
            None,
            program=section,
            ask=self._code_ask if own else "",
        )

    @property
    def _goal(self) -> int:
        assert self._level is not None, "call reset() first"
        return self._level.goal

    def oracle_action(self, agent: str | None = None) -> str:
        """A shortest move list (``#### U, R``); with ``tool_mode="code"`` the tool's is a BFS
        program that prints one (:func:`~mas_envs.planpath.prompts.oracle_program`)."""
        level = self._level
        assert level is not None, "call reset() first"
        if self._writes_program(agent):
            if self.version >= 2:
                return prompts.oracle_program_v2(self._grid_with_agent())
            if self.version >= 1:
                return prompts.oracle_program_v1()
            return prompts.oracle_program(self._grid_with_agent())
        agent = agent or self.agent_selection
        proposal = self._proposal
        if self.version >= 1 and self._mas and agent == "planner" and proposal:
            # v1: the team's best answer keeps the tool's proposal when it is a shortest path.
            _, _, made, blocked, reached = grid.run_moves(level, self._cell, proposal, 0)
            if reached and not blocked and len(made) == level.dist[self._cell]:
                return "#### " + ", ".join(made)
        return "#### " + ", ".join(grid.shortest_path(level, self._cell))

    def random_action(self, rng: np.random.Generator, agent: str | None = None) -> str:
        n = int(rng.integers(1, self.rows + self.cols + 1))
        moves = [grid.MOVES[int(i)] for i in rng.integers(0, 4, size=n)]
        if self._writes_program(agent):
            return programs.print_moves_program(moves)
        return "#### " + ", ".join(moves)

    def near_miss_action(
        self, rng: np.random.Generator, agent: str | None = None, *, wall_miss: float = 0.3
    ) -> str:
        """A wrong answer of the kind a learning tool gives: the oracle's answer on the level as
        misread, each wall missed (read as free) with probability ``wall_miss``. Its path may
        cross a wall the real level has, or still be right when the missed walls are off it.

        The warm start plays it (``optim.warmstart_near_miss``) so that the planner sees reports
        that look like the tool's mistakes, with the level's own answer as its target.
        """
        level = self._level
        assert level is not None, "call reset() first"
        missed = rng.random(len(level.walls)) < wall_miss
        walls = tuple(w and not m for w, m in zip(level.walls, missed, strict=True))
        if self._writes_program(agent) and self.version >= 2:  # the program holds the grid
            return prompts.oracle_program_v2(
                self._grid_with_agent(prompts.grid_text(walls, level.cols, level.goal))
            )
        misread = grid.make_level(level.rows, level.cols, walls, self._cell, level.goal)
        moves = grid.shortest_path(misread, self._cell)
        if self._writes_program(agent):
            return programs.print_moves_program(moves)
        return "#### " + ", ".join(moves)

    # ------------------------------------------------------------------ queries

    @property
    def position(self) -> tuple[int, int]:
        """The agent's ``(row, col)``."""
        return divmod(self._cell, self.cols)

    @property
    def level(self) -> grid.Level:
        """The current level (immutable; includes the BFS table ``dist`` and ``optimum``)."""
        assert self._level is not None, "call reset() first"
        return self._level

    @property
    def moves(self) -> tuple[str, ...]:
        """Every move made on the real env this episode (blocked ones included)."""
        return self._moves

    # ------------------------------------------------------------------ numeric view hooks

    def numeric_action_count(self) -> int:
        """4 discrete actions: one move each, U, D, L, R."""
        return 4

    def numeric_action_text(self, agent: str, action: int) -> str:
        """The answer text of discrete ``action`` (0..3): ``"#### U"`` .. ``"#### R"``; with
        ``tool_mode="code"`` the tool's is a program printing it."""
        if not 0 <= action < 4:
            raise ValueError(f"Plan-Path numeric action must be in [0, 4), got {action!r}")
        if self._runner is not None and agent == "tool":  # tool_mode="code": a program
            return programs.print_moves_program([grid.MOVES[action]])
        return _NUMERIC_TEXT[action]

    def numeric_observation_shape(self) -> tuple[int, ...]:
        """``(4, rows, cols)``: wall, agent, goal, tool proposal planes."""
        return (4, self.rows, self.cols)

    def numeric_observation(self, agent: str) -> np.ndarray:
        """Planes (float32, 0/1): wall, agent, goal, and the cells the tool agent's latest
        proposal visits from the current cell (``planner`` in mode ``"mas"`` only)."""
        assert self._static_obs is not None and self._level is not None, "call reset() first"
        obs = self._static_obs.copy()
        obs[1].flat[self._cell] = 1.0
        if self._mas and agent == "planner" and self._proposal:
            step, cell = self._level.step, self._cell
            for move in self._proposal:
                nxt = step[cell * 4 + grid.MOVE_INDEX[move]]
                if nxt >= 0:
                    cell = nxt
                    obs[3].flat[cell] = 1.0
                    if cell == self._level.goal:
                        break
        return obs

    # ------------------------------------------------------------------ render

    def _render_text(self) -> str:
        if self._level is None:
            return "(not reset)"
        row, col = self.position
        return (
            self._grid_with_agent()
            + f"\nagent ({row}, {col})  goal {self._level.rc(self._level.goal)}  "
            f"moves {len(self._moves)}  turn {self.turn}/{self.max_turns}"
            + ("  solved" if self.success else "")
        )

    def _render_rgb(self) -> np.ndarray:
        """An ``(rows*16, cols*16, 3)`` uint8 image: walls dark, visited cells light blue,
        goal green, agent a blue disc."""
        if self._level is None:
            return np.zeros((self.rows * _CELL_PX, self.cols * _CELL_PX, 3), np.uint8)
        lv = self._level
        colors = np.full((lv.rows * lv.cols, 3), (235, 235, 230), np.uint8)
        colors[np.asarray(lv.walls)] = (60, 60, 70)
        cell = lv.start
        for move in self._moves:  # the path so far
            colors[cell] = (190, 215, 245)
            nxt = lv.step[cell * 4 + grid.MOVE_INDEX[move]]
            cell = nxt if nxt >= 0 else cell
        colors[lv.goal] = (80, 180, 90)
        img = np.repeat(np.repeat(colors.reshape(lv.rows, lv.cols, 3), _CELL_PX, 0), _CELL_PX, 1)
        img[::_CELL_PX, :] = img[:, ::_CELL_PX] = (150, 150, 150)  # grid lines
        yy, xx = np.mgrid[:_CELL_PX, :_CELL_PX] - (_CELL_PX - 1) / 2
        disc = yy**2 + xx**2 <= (_CELL_PX * 0.35) ** 2
        r, c = self.position
        img[r * _CELL_PX : (r + 1) * _CELL_PX, c * _CELL_PX : (c + 1) * _CELL_PX][disc] = (
            40,
            90,
            200,
        )
        return img
