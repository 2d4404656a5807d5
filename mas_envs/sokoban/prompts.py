"""Every text of the Sokoban env: system texts, the prompt builder, the answer parser and format.

The prompt always shows the live board, the boxes on goals, the player's position and the moves
made so far (a pitfall of the reference prompt was to hide the current state); the planner also
sees the tool agent's latest proposal. With ``tool_mode="code"`` the tool agent writes a program
that prints its plan (:mod:`mas_envs.programs`): it gets its own system text and instructions, the
planner also sees the program and its output, and the ``single`` texts stay as they are.
"""

from __future__ import annotations

from mas_envs import programs
from mas_envs.moves import ParsedMoves, format_moves, parse_moves
from mas_envs.spaces import clean_text

__all__ = [
    "ASK",
    "NO_MOVES",
    "NO_NOTE",
    "STUCK",
    "SYSTEM",
    "Note",
    "answer_text",
    "build_prompt",
    "code_ask",
    "failed_note",
    "oracle_program",
    "parse_answer",
    "program_proposal_line",
    "proposal_line",
    "read_answer",
    "state_text",
    "turn_head",
    "unparsed_note",
]

SYSTEM: dict[tuple[str, str], str] = {
    ("single", "planner"): (
        "You are an expert Sokoban player. Solve the puzzle with as few moves as you can. "
        "Think briefly, then give your moves after a line '####'."
    ),
    ("mas", "tool"): (
        "You are the tool agent of a two-agent team that solves Sokoban puzzles. Work out a "
        "complete plan of moves that puts every box on a goal. The planner agent reads your "
        "plan and decides the moves actually made; your plan does not move anything by itself."
    ),
    ("mas", "planner"): (
        "You are the planner of a two-agent team that solves Sokoban puzzles. A tool agent "
        "proposes a plan of moves; check it against the board, fix it if it is wrong, and give "
        "the moves to make now. Only your moves change the board."
    ),
    ("code", "tool"): (
        "You are the tool agent of a two-agent team that solves Sokoban puzzles. You write a "
        "short Python program that searches for a complete plan of moves that puts every box on "
        "a goal, and prints it. The program runs in a sandbox; the planner agent reads your "
        "program, its output and the plan it printed, and decides the moves actually made. Your "
        "plan does not move anything by itself."
    ),
    ("code", "planner"): (
        "You are the planner of a two-agent team that solves Sokoban puzzles. A tool agent "
        "writes a program that searches for a plan of moves; you see the program, its output and "
        "the plan it printed. Check the plan against the board, fix it if it is wrong, and give "
        "the moves to make now. Only your moves change the board."
    ),
}
"""System text per (mode, role); ``("code", role)`` is the team with ``tool_mode="code"``."""

_RULES = (
    "Sokoban: push every box onto a goal.\n\n"
    "Legend: # wall, _ floor, . goal, $ box, * box on a goal, @ you, + you on a goal.\n"
    "Moves: U (up), D (down), L (left), R (right), one square each. Walking into a box pushes it "
    "one square if the square behind it is free (floor or goal); boxes cannot be pulled. A move "
    "into a wall, or a push into a wall or another box, fails and you stay put. A box pushed "
    "into a corner that is not a goal can never be moved out of it.\n\n"
)
ASK = {
    "tool": "Give your complete plan, in order, after a line '####', for example:\n#### U, R, R, D",
    "planner": (
        "Give the moves to make now, in order, after a line '####', for example:\n#### U, R, R, D"
    ),
}
STUCK = (
    "Warning: a box is stuck where it can never reach a goal; the puzzle cannot be solved any "
    "more.\n"
)
_LETTERS = frozenset("UDLR")
_new_parsed = tuple.__new__


def build_prompt(
    role: str,
    board_text: str,
    turn: int,
    max_turns: int,
    on_goals: int,
    n_boxes: int,
    row: int,
    col: int,
    made: tuple[str, ...],
    note: str,
    stuck: bool,
    proposal: str | None,
    program: str = "",
    ask: str = "",
) -> str:
    """The user prompt for ``role`` (``"tool"`` or ``"planner"``) now.

    Args:
        role: Which instructions end the prompt.
        board_text: The ASCII board.
        turn: The current turn, counted from 1.
        max_turns: Turns in an episode.
        on_goals: Boxes on goals now.
        n_boxes: Boxes in the level.
        row: The player's row, counted from 0 at the top.
        col: The player's column, counted from 0 at the left.
        made: Moves made so far in the episode.
        note: What went wrong with the planner's last answer, as ``role`` reads it (a line from
            :func:`failed_note` or :func:`unparsed_note`), or ``""``.
        stuck: A box can never reach a goal any more.
        proposal: For the planner in the team: the tool agent's latest proposal, as a line of
            text (already cleaned); ``None`` for everyone else.
        program: ``tool_mode="code"``: the tool's latest program and its output
            (:func:`mas_envs.programs.program_report`, cleaned), shown before the proposal;
            ``""`` otherwise.
        ask: Replaces the role's answer instructions (``tool_mode="code"``: :func:`code_ask`).
    """
    shown = "" if proposal is None else f"\nThe tool agent's proposal: {proposal}\n"
    return (
        f"{turn_head(turn, max_turns)}{state_text(board_text, on_goals, n_boxes, row, col)}"
        f"Moves made so far ({len(made)}): {', '.join(made) if made else NO_MOVES}\n"
        f"{note}{STUCK if stuck else ''}{program}{shown}\n{ask or ASK[role]}"
    )


NO_MOVES = "(none)"
"""The moves line's list before any move is made."""


def turn_head(turn: int, max_turns: int) -> str:
    """:func:`build_prompt`'s start, up to the state (static per turn: the env caches it)."""
    return f"{_RULES}Current state (turn {turn} of {max_turns}; "


def state_text(board_text: str, on_goals: int, n_boxes: int, row: int, col: int) -> str:
    """:func:`build_prompt`'s state part: counts, position and the board (the env caches it per
    state of a level)."""
    return (
        f"boxes on goals: {on_goals}/{n_boxes}; you are at row {row}, column {col}, counting "
        f"from 0 at the top left):\n{board_text}\n\n"
    )


Note = tuple[str, str]
"""A prompt line about the planner's last answer: (as the planner reads it, as the tool does)."""
NO_NOTE: Note = ("", "")


def failed_note(invalid: tuple[tuple[int, str], ...]) -> Note:
    """The prompt line on failed moves, from ``(index in the answer, move)`` pairs."""
    shown = ", ".join(f"{m} (move {i + 1})" for i, m in invalid)
    return (
        f"Failed moves of your last answer (you stayed put): {shown}\n",
        f"Failed moves of the planner's last answer (the player stayed put): {shown}\n",
    )


def unparsed_note(reason: str) -> Note:
    """The prompt line on a last answer of the planner that did not parse."""
    why = clean_text(reason)
    return (
        f"Your last answer did not parse, nothing moved: {why}\n",
        f"The planner's last answer did not parse, nothing moved: {why}\n",
    )


def proposal_line(moves: tuple[str, ...] | None, reason: str) -> str:
    """How the planner sees the tool agent's latest answer."""
    if moves is None:
        return f"none (its answer did not parse: {clean_text(reason)})"
    return f"{format_moves(moves)} ({len(moves)} moves)"


def parse_answer(text: str, max_moves: int) -> ParsedMoves:
    """Parse a move list; see :func:`mas_envs.moves.parse_moves` for what is accepted.

    The plain form the prompt asks for, ``#### U, R, D`` (single capital letters separated by
    commas or white space after the last ``####``), is read directly; anything else goes to the
    general parser, which reads the plain form the same way (a property test checks it).
    """
    parsed = read_answer(text, max_moves)
    return parsed if type(parsed) is ParsedMoves else _new_parsed(ParsedMoves, parsed)


def read_answer(text: str, max_moves: int) -> tuple[tuple[str, ...], str]:
    """:func:`parse_answer` as a plain ``(moves, reason)`` tuple (the env's hot path: a tuple is
    built in a quarter of a NamedTuple's time, and the env unpacks it at once)."""
    _, sep, tail = text.rpartition("####")
    if sep:
        parts = tail.replace(",", " ").split()
        if parts and len(parts) <= max_moves and _LETTERS.issuperset(parts):
            return tuple(parts), ""
    return parse_moves(text, max_moves)


def answer_text(moves: tuple[str, ...]) -> str:
    """An answer in the exact format the prompt asks for: ``#### U, R, R``."""
    return f"#### {', '.join(moves)}"


# ---------------------------------------------------------------------------- tool_mode="code"

_CODE_EXAMPLE = 'print("####", ", ".join(moves))  # prints: #### U, R, R, D'
_BFS_LIMIT = 300_000
"""Largest state-space bound (free cells x placements of the boxes) the oracle program searches
with a plain BFS; larger levels get a program that prints the solver's plan."""


def code_ask(timeout_s: float) -> str:
    """The tool agent's answer instructions with ``tool_mode="code"``."""
    return programs.code_instructions(
        "searches for the complete plan of moves that puts every box on a goal (for example a "
        "breadth-first search over the positions of the player and the boxes)",
        _CODE_EXAMPLE,
        "the current board exactly as shown above, one row per line",
        timeout_s,
    )


def program_proposal_line(moves: tuple[str, ...] | None, reason: str) -> str:
    """How the planner sees the plan a tool program printed (or why there is none)."""
    if moves is None:
        return f"none ({clean_text(reason)})"
    return f"{format_moves(moves)} ({len(moves)} moves)"


def program_section(report: str, proposal: str | None, own: bool) -> str:
    """The tool's program block of a prompt: the report, and for the tool itself its plan."""
    if not own:
        return f"\n{report}\n"
    plan = f"\nThe plan it gave: {proposal}" if proposal is not None else ""
    return f"\n{report}{plan}\n"


def oracle_program(board_text: str, n_free: int, n_boxes: int, moves: tuple[str, ...]) -> str:
    """The oracle tool reply: a BFS over (player, boxes) that prints a shortest plan.

    ``moves`` (the env solver's shortest plan) is printed directly instead when the state space
    bound ``n_free * C(n_free, n_boxes)`` is above :data:`_BFS_LIMIT` (a plain BFS in the sandbox
    could run out of time there).
    """
    from math import comb

    if n_free * comb(n_free, n_boxes) > _BFS_LIMIT:
        return (
            "```python\n# Too large for a plain BFS in the time limit: a shortest plan found by "
            f'A* search.\nprint("#### {format_moves(moves)}")\n```'
        )
    return _BFS.replace("LEVEL_TEXT", board_text)


_BFS = '''```python
import sys
from collections import deque

LEVEL = """
LEVEL_TEXT
"""
free, goals, boxes = set(), set(), set()
for r, line in enumerate(LEVEL.strip("\\n").split("\\n")):
    for c, ch in enumerate(line):
        if ch != "#":
            free.add((r, c))
        if ch in ".*+":
            goals.add((r, c))
        if ch in "$*":
            boxes.add((r, c))
        if ch in "@+":
            player = (r, c)
steps = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
start = (player, frozenset(boxes))
came = {start: None}
queue = deque([start])
while queue:
    state = queue.popleft()
    (r, c), placed = state
    if placed <= goals:
        break
    for move, (dr, dc) in steps.items():
        to = (r + dr, c + dc)
        if to not in free:
            continue
        after = placed
        if to in placed:
            beyond = (r + 2 * dr, c + 2 * dc)
            if beyond not in free or beyond in placed:
                continue
            after = placed - {to} | {beyond}
        if (to, after) not in came:
            came[to, after] = (state, move)
            queue.append((to, after))
else:
    sys.exit("no plan found")
moves = []
while came[state]:
    state, move = came[state]
    moves.append(move)
print("####", ", ".join(reversed(moves)))
```'''
