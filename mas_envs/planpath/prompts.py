"""Plan-Path text: the system texts, the prompt builder and the answer parser.

Every prompt shows the grid with the agent marked, the agent's current position, the goal, the
moves made so far (blocked ones marked) and the answer format; the planner also sees the tool
agent's latest proposal. (The paper's prompt showed only the start, never the current position.)
Prompts stay compact: a tiny byte-level model pays one token per character.
"""

from __future__ import annotations

from mas_envs.moves import ParsedMoves, format_moves, parse_moves

__all__ = ["ANSWER_FORMAT", "canonical_moves", "grid_text", "parse_answer", "prompt", "system_text"]

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
}
_MOVE_SET = frozenset("UDLR")
_LEGEND = "Grid (A = agent, G = goal, # = wall, . = free; row 0 is the top, column 0 the left):"


def system_text(mode: str, agent: str) -> str:
    """The system text of ``agent`` in ``mode`` (static: the env caches it)."""
    return f"{_TASK}\n{_ROLE[mode, agent]}"


def grid_text(walls: tuple[bool, ...], cols: int, goal: int) -> str:
    """The grid without the agent: one line per row, ``#`` walls, ``.`` free, ``G`` goal."""
    cells = ["#" if w else "." for w in walls]
    cells[goal] = "G"
    return "\n".join("".join(cells[i : i + cols]) for i in range(0, len(cells), cols))


def _history(moves: tuple[str, ...], blocked: tuple[int, ...]) -> str:
    if not moves:
        return "Moves made so far: none"
    if not blocked:
        return "Moves made so far: " + ", ".join(moves)
    starred = set(blocked)
    shown = ", ".join(m + "*" if i in starred else m for i, m in enumerate(moves))
    note = " (* = blocked, the agent stayed put)"
    return f"Moves made so far: {shown}{note}"


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
    """
    i = cell + cell // cols  # each row is followed by a newline
    row, col = divmod(cell, cols)
    grow, gcol = divmod(goal, cols)
    lines = [
        _LEGEND,
        grid[:i] + "A" + grid[i + 1 :],
        f"Agent at row {row}, column {col}. Goal at row {grow}, column {gcol}.",
        _history(moves, blocked),
        f"Turn {turn + 1} of {max_turns}.",
    ]
    if show_proposal:
        shown = format_moves(proposal) if proposal else "none (its answer had no valid move list)"
        lines.append(f"Tool agent's proposal: {shown}")
    lines.append(ANSWER_FORMAT)
    return "\n".join(lines)


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
