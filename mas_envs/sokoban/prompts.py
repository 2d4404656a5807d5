"""Every text of the Sokoban env: system texts, the prompt builder, the answer parser and format.

The prompt always shows the live board, the boxes on goals, the player's position and the moves
made so far (a pitfall of the reference prompt was to hide the current state); the planner also
sees the tool agent's latest proposal. A later tool variant that writes plan code can add its own
system text and instructions here without touching the ``single`` texts.
"""

from __future__ import annotations

from mas_envs.moves import ParsedMoves, format_moves, parse_moves
from mas_envs.spaces import clean_text

__all__ = [
    "NO_NOTE",
    "SYSTEM",
    "Note",
    "answer_text",
    "build_prompt",
    "failed_note",
    "parse_answer",
    "proposal_line",
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
}
"""System text per (mode, role)."""

_RULES = (
    "Sokoban: push every box onto a goal.\n\n"
    "Legend: # wall, _ floor, . goal, $ box, * box on a goal, @ you, + you on a goal.\n"
    "Moves: U (up), D (down), L (left), R (right), one square each. Walking into a box pushes it "
    "one square if the square behind it is free (floor or goal); boxes cannot be pulled. A move "
    "into a wall, or a push into a wall or another box, fails and you stay put. A box pushed "
    "into a corner that is not a goal can never be moved out of it.\n\n"
)
_ASK = {
    "tool": "Give your complete plan, in order, after a line '####', for example:\n#### U, R, R, D",
    "planner": (
        "Give the moves to make now, in order, after a line '####', for example:\n#### U, R, R, D"
    ),
}
_STUCK = (
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
    """
    shown = "" if proposal is None else f"\nThe tool agent's proposal: {proposal}\n"
    # One f-string: the prompt is rebuilt after every step, so it is built in one pass.
    return (
        f"{_RULES}Current state (turn {turn} of {max_turns}; boxes on goals: {on_goals}/{n_boxes}; "
        f"you are at row {row}, column {col}, counting from 0 at the top left):\n{board_text}\n\n"
        f"Moves made so far ({len(made)}): {', '.join(made) if made else '(none)'}\n"
        f"{note}{_STUCK if stuck else ''}"
        f"{shown}\n{_ASK[role]}"
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
    _, sep, tail = text.rpartition("####")
    if sep:
        parts = tail.replace(",", " ").split()
        if parts and len(parts) <= max_moves and _LETTERS.issuperset(parts):
            return _new_parsed(ParsedMoves, (tuple(parts), ""))  # ParsedMoves(...), faster
    return parse_moves(text, max_moves)


def answer_text(moves: tuple[str, ...]) -> str:
    """An answer in the exact format the prompt asks for: ``#### U, R, R``."""
    return f"#### {', '.join(moves)}"
