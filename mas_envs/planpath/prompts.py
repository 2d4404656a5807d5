"""Plan-Path text: the system texts, the prompt builder and the answer parser.

Every prompt shows the grid with the agent marked, the agent's current position, the goal, the
moves made so far (blocked ones marked) and the answer format; the planner also sees the tool
agent's latest proposal. (The paper's prompt showed only the start, never the current position.)
Prompts stay compact: a tiny byte-level model pays one token per character.
"""

from __future__ import annotations

from mas_envs import programs
from mas_envs.moves import ParsedMoves, format_moves, parse_moves
from mas_envs.spaces import clean_text

__all__ = [
    "ANSWER_FORMAT",
    "BLOCKED_NOTE",
    "CODE_ASK_V1",
    "CODE_ASK_V2",
    "HISTORY",
    "NO_HISTORY",
    "PLANNER_ASK_V1",
    "canonical_moves",
    "code_ask",
    "code_prompt_v1",
    "grid_text",
    "history_line",
    "oracle_program",
    "oracle_program_v1",
    "oracle_program_v2",
    "parse_answer",
    "planner_report_v1",
    "planner_tail_v1",
    "program_section",
    "prompt",
    "system_text",
]

ANSWER_FORMAT = "Answer with your moves after '####', e.g.\n#### U, R, R"

_TASK = (
    "You move an agent on a grid from its position to the goal. Moves: U = up, D = down, "
    "L = left, R = right. A move into a wall (#) or off the grid is blocked: the agent stays put "
    "and you lose reward. Reaching the goal on a shortest path earns a bonus."
)
_ROLE = {
    ("mas", "tool"): (
        "You are the tool agent: propose the full list of moves from the current position to "
        "the goal. A planner sees your proposal and decides the moves that are made."
    ),
    ("mas", "planner"): (
        "You are the planner: your moves are the ones made. A tool agent proposed a plan; check "
        "it against the grid and correct it if needed."
    ),
    ("single", "planner"): "Give the moves from the current position to the goal.",
    ("code", "tool"): (
        "You are the tool agent: write a short Python program that finds the moves from the "
        "current position to the goal and prints them. It runs in a sandbox; a planner sees your "
        "program, its output and the moves it printed, and decides the moves that are made."
    ),
    ("code", "planner"): (
        "You are the planner: your moves are the ones made. A tool agent wrote a program that "
        "searches for a plan; check the plan it printed against the grid and correct it if "
        "needed."
    ),
    ("code-v1", "tool"): (
        "You are the tool agent: write a short Python program that reads the grid from its "
        "standard input, finds the moves from the agent to the goal and prints them. It runs in a "
        "sandbox; a planner sees what it printed and decides the moves that are made."
    ),
    ("code-v2", "tool"): (
        "You are the tool agent: write a short Python program that holds the grid, finds the "
        "moves from the agent to the goal and prints them. It runs in a sandbox with no input; a "
        "planner sees what it printed and decides the moves that are made."
    ),
    ("code-alone-v2", "tool"): (
        "You are the tool agent, alone: write a short Python program that holds the grid, finds "
        "the moves from the agent to the goal and prints them. It runs in a sandbox with no "
        "input, and the moves it prints are made."
    ),
    ("code-alone", "tool"): (
        "You are the tool agent, alone: write a short Python program that reads the grid from "
        "its standard input, finds the moves from the agent to the goal and prints them. It runs "
        "in a sandbox, and the moves it prints are made."
    ),
}
_MOVE_SET = frozenset("UDLR")
_LEGEND = "Grid (A = agent, G = goal, # = wall, . = free; row 0 is the top, column 0 the left):"


def system_text(mode: str, agent: str, version: int = 0) -> str:
    """The system text of ``agent`` in ``mode`` (static: the env caches it); mode ``"code"`` is
    the team with ``tool_mode="code"``, ``"code-alone"`` the tool alone (``mode="tool"``).
    Version 1 changes only the code team's tool text (its planner does not see the program's
    code); version 2 the code tool's (its program gets no input)."""
    if version >= 2 and agent == "tool" and mode in ("code", "code-alone"):
        mode += "-v2"
    elif version >= 1 and (mode, agent) == ("code", "tool"):
        mode = "code-v1"
    return f"{_TASK}\n{_ROLE[mode, agent]}"


def grid_text(walls: tuple[bool, ...], cols: int, goal: int) -> str:
    """The grid without the agent: one line per row, ``#`` walls, ``.`` free, ``G`` goal."""
    cells = ["#" if w else "." for w in walls]
    cells[goal] = "G"
    return "\n".join("".join(cells[i : i + cols]) for i in range(0, len(cells), cols))


NO_HISTORY = "Moves made so far: none"
"""The prompt's history line before any move is made."""
HISTORY = "Moves made so far: "
"""The history line's start, before the first move."""
BLOCKED_NOTE = " (* = blocked, the agent stayed put)"
"""Follows the history line once some move was blocked."""


def extend_history(
    line: str, moves: tuple[str, ...], made: tuple[str, ...], blocked: tuple[int, ...]
) -> str:
    """The history line after ``made`` (non-empty; ``blocked``: indices into it) follow ``moves``.

    ``line`` is the history line of ``moves`` without :data:`BLOCKED_NOTE` (the prompt adds the
    note after it when some move was blocked). The env keeps the line this way, appending instead
    of rebuilding it from the whole history per prompt; the text is :func:`prompt`'s.
    """
    if blocked:
        marked = list(made)
        for i in blocked:
            marked[i] += "*"
        shown = ", ".join(marked)
    else:
        shown = ", ".join(made)
    return f"{line}, {shown}" if moves else HISTORY + shown


def head(grid: str, cols: int, cell: int, goal: int) -> str:
    """The start of :func:`prompt`: the legend, the grid with ``A`` at ``cell``, the agent's and
    the goal's positions, up to the history line (static per level and cell: the env caches it)."""
    i = cell + cell // cols  # each row is followed by a newline
    row, col = divmod(cell, cols)
    grow, gcol = divmod(goal, cols)
    return (
        f"{_LEGEND}\n{grid[:i]}A{grid[i + 1 :]}\n"
        f"Agent at row {row}, column {col}. Goal at row {grow}, column {gcol}.\n"
    )


def proposal_text(proposal: tuple[str, ...] | None) -> str:
    """The tool agent's proposal as the planner's prompt shows it."""
    return format_moves(proposal) if proposal else "none (its answer had no valid move list)"


def history_line(moves: tuple[str, ...], blocked: tuple[int, ...]) -> str:
    """The prompt's history line of ``moves`` (``blocked``: indices of the blocked ones), with
    :data:`BLOCKED_NOTE` when a move was blocked."""
    if not moves:
        return NO_HISTORY
    if not blocked:
        return HISTORY + ", ".join(moves)
    # Star the blocked moves in a copy of the list: a per-move generator here would cost more
    # than the rest of the prompt, as the history grows through an episode.
    marked = list(moves)
    n = len(marked)
    for i in blocked:
        if 0 <= i < n and marked[i] is moves[i]:  # each index once, negative ones never
            marked[i] += "*"
    return f"{HISTORY}{', '.join(marked)}{BLOCKED_NOTE}"


def prompt(
    grid: str,
    cols: int,
    cell: int,
    goal: int,
    moves: tuple[str, ...],
    blocked: tuple[int, ...],
    turn: int,
    max_turns: int,
    show_proposal: bool,
    proposal: tuple[str, ...] | None,
    program: str = "",
    ask: str = "",
) -> str:
    """The user prompt for the current state.

    Args:
        grid: :func:`grid_text` of the level.
        cols: Grid width.
        cell: The agent's cell (row-major index).
        goal: The goal cell.
        moves: Every move made so far this episode.
        blocked: Indices into ``moves`` of the blocked moves.
        turn: The current turn, 0-based.
        max_turns: Turns in an episode.
        show_proposal: Add the tool agent's proposal (the planner in mode ``"mas"``).
        proposal: The tool agent's parsed moves, ``None`` when its answer did not parse.
        program: ``tool_mode="code"``: the tool's program, its output and the plan it gave
            (:func:`program_section`), instead of the proposal line; ``""`` otherwise.
        ask: Replaces :data:`ANSWER_FORMAT` (``tool_mode="code"``: the tool's :func:`code_ask`).
    """
    extra = f"\nTool agent's proposal: {proposal_text(proposal)}" if show_proposal else ""
    if program:
        extra += "\n" + program
    return (
        f"{head(grid, cols, cell, goal)}{history_line(moves, blocked)}\n"
        f"Turn {turn + 1} of {max_turns}.{extra}\n{ask or ANSWER_FORMAT}"
    )


def canonical_moves(text: str, max_moves: int) -> tuple[str, ...] | None:
    """The moves of an answer in the canonical form ``#### U, R, R``, else ``None``.

    The fast path for what the oracle and a trained model write; :func:`parse_answer` gives the
    same moves for such text (and handles everything else).
    """
    if text.startswith("#### "):
        parts = text[5:].split(", ")
        if len(parts) <= max_moves and _MOVE_SET.issuperset(parts):
            return tuple(parts)
    return None


def parse_answer(text: str, max_moves: int) -> ParsedMoves:
    """Parse a move list out of a model's answer (see :mod:`mas_envs.moves` for what passes)."""
    moves = canonical_moves(text, max_moves)
    if moves is not None:
        return ParsedMoves(moves, "")
    return parse_moves(text, max_moves)


# ---------------------------------------------------------------------------- tool_mode="code"


def code_ask(timeout_s: float) -> str:
    """The tool agent's answer instructions with ``tool_mode="code"``."""
    return programs.code_instructions(
        "finds the moves from the agent (A) to the goal (G) (for example a breadth-first search)",
        'print("####", ", ".join(moves))  # prints: #### U, R, R, D',
        "the grid exactly as shown above, with A at the agent's position, one row per line",
        timeout_s,
    )


def program_section(program: programs.ToolProgram, moves: tuple[str, ...] | None, own: bool) -> str:
    """The tool's latest program, its output and the moves it gave, for a prompt.

    ``own``: for the tool itself (``Your program``), else for the planner, for whom it replaces
    the proposal line (so the reason is shown when no moves came out).
    """
    if own:
        report = programs.program_report(program, "Your")
        plan = f"\nThe moves it gave: {format_moves(moves)}" if moves else ""
        return report + plan
    if moves:
        shown = format_moves(moves)
    else:
        shown = f"none ({clean_text(program.reason or 'its output had no valid move list')})"
    proposal = f"Tool agent's proposal: {shown}"
    if program.run is None:  # no program at all: the reason says so
        return proposal
    return programs.program_report(program, "Tool agent's") + "\n" + proposal


def oracle_program(grid_with_agent: str) -> str:
    """The oracle tool reply: a BFS from the agent to the goal over ``grid_with_agent`` (the grid
    with ``A`` marked) that prints a shortest move list."""
    return _BFS.replace("GRID_TEXT", grid_with_agent)


_BFS = '''```python
import sys
from collections import deque

GRID = """
GRID_TEXT
"""
rows = GRID.strip("\\n").split("\\n")
for r, line in enumerate(rows):
    for c, ch in enumerate(line):
        if ch == "A":
            start = (r, c)
        if ch == "G":
            goal = (r, c)
steps = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
came = {start: None}
queue = deque([start])
while queue:
    cell = queue.popleft()
    if cell == goal:
        break
    for move, (dr, dc) in steps.items():
        r, c = cell[0] + dr, cell[1] + dc
        if 0 <= r < len(rows) and 0 <= c < len(rows[r]) and rows[r][c] != "#":
            if (r, c) not in came:
                came[r, c] = (cell, move)
                queue.append((r, c))
else:
    sys.exit("no path found")
moves = []
while came[cell]:
    cell, move = came[cell]
    moves.append(move)
print("####", ", ".join(reversed(moves)))
```'''


# ---------------------------------------------------------------------------- version 1 (code)
# mas/PlanPathCode-v1: short prompts (a tiny model pays for every token), a tool program that
# reads the grid from its stdin, and a planner prompt whose last line is the program's output.

CODE_ASK_V1 = (
    "Write a Python program in one ```python block. It reads the grid above on its stdin "
    "(A = agent) and prints '####' and the moves, e.g. print('####', 'U, R')."
)
"""The tool agent's answer instructions in ``mas/PlanPathCode-v1`` (the end of its prompt)."""
PLANNER_ASK_V1 = "Answer with your moves after '####'."
"""The planner's answer instructions in ``mas/PlanPathCode-v1``; the program's report follows."""
MAX_OUTPUT_ECHO_V1 = 200
"""Characters of the program's output (its tail) in a v1 planner prompt."""


def planner_report_v1(program: programs.ToolProgram | None) -> str:
    """What the tool's program did, for a v1 planner prompt: its output is the last line.

    The program's code is not shown (v0 shows it): the planner acts on what the program printed,
    and a short prompt is what a tiny model can learn to read. Example::

        The tool agent's program printed:
        #### U, R
    """
    if program is None:
        return "The tool agent has not answered yet."
    run = program.run
    if run is None:
        return "The tool agent wrote no program (its answer had no ```python block)."
    if run.verdict != "ok":
        why = programs.failure_text(run.verdict)
        return f"The tool agent's program failed ({run.verdict}): {why}."
    out = clean_text(run.stdout.strip())
    if not out:
        return "The tool agent's program printed nothing."
    if len(out) > MAX_OUTPUT_ECHO_V1:
        out = "... " + out[-(MAX_OUTPUT_ECHO_V1 - 4) :]
    return f"The tool agent's program printed:\n{out}"


def planner_tail_v1(program: programs.ToolProgram | None) -> str:
    """The end of a v1 planner prompt: :data:`PLANNER_ASK_V1`, then :func:`planner_report_v1`
    (so its last line is what the program printed)."""
    return f"{PLANNER_ASK_V1}\n{planner_report_v1(program)}"


def code_prompt_v1(head_text: str, history: str, turn: int, max_turns: int, tail: str) -> str:
    """A ``mas/PlanPathCode-v1`` prompt: the state (:func:`head`, the history line, the turn),
    then ``tail``: :data:`CODE_ASK_V1` for the tool, :func:`planner_tail_v1` for the planner."""
    return f"{head_text}{history}\nTurn {turn + 1} of {max_turns}.\n{tail}"


def oracle_program_v1() -> str:
    """The v1 oracle tool reply: a breadth-first search that reads the grid (``A`` marked) from
    its stdin and prints a shortest move list. The same text on every level (~260 characters):
    the grid's rows are joined and framed with walls, so no move needs a bounds check."""
    return _BFS_STDIN


_BFS_STDIN = """```python
import sys
g=sys.stdin.read().split()
w=len(g[0])+1
s='#'*w+'#'.join(g)+'#'*w
a=s.find('A')
p={a:''}
q=[a]
for c in q:
 for m,d in zip('UDLR',(-w,w,-1,1)):
  if s[c+d]!='#' and c+d not in p:
   p[c+d]=p[c]+m
   q+=[c+d]
print('####',', '.join(p[s.find('G')]))
```"""


# ---------------------------------------------------------------------------- version 2 (code)
# mas/PlanPathCode-v2: v1's prompts, but the tool's program runs with no input, so it must hold the
# level (the paper's design: its tool writes the grid into its code). One text cannot solve every
# level, as v1's stdin program did (issue 29).

CODE_ASK_V2 = (
    "Write a Python program in one ```python block. It gets no input: write the grid above in it "
    "(A = agent); it prints '####' and the moves, e.g. print('####', 'U, R')."
)
"""The tool agent's answer instructions in ``mas/PlanPathCode-v2`` (the end of its prompt)."""


def oracle_program_v2(grid_with_agent: str) -> str:
    """The v2 oracle tool reply: :func:`oracle_program_v1`'s search over the grid written into the
    program (``grid_with_agent``: the rows, ``A`` at the agent), as the program gets no input."""
    rows = "\n".join(grid_with_agent.split())
    return _BFS_STDIN.replace("import sys\n", "").replace(
        "g=sys.stdin.read().split()", f'g="""\n{rows}\n""".split()'
    )
