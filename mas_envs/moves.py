"""Parsing the move lists that LLMs write for the grid games (Sokoban, Plan-Path).

What models really write, and what this accepts::

    #### U, R, R, D                       ->  the text after the last ``####``
    **Actions List**: ["U", "R", "D"]     ->  a labelled list
    ```\nup right right\n```               ->  the last fenced block
    Moves: LURD                           ->  a run of move letters
    ... prose ... ["L","L"]               ->  the last bracketed list

Moves are ``U D L R`` or ``up down left right`` in any case, separated by anything that is not a
letter or digit. Any other word in the answer is an error with a reason, never a guess.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["MOVES", "MOVE_DELTAS", "ParsedMoves", "format_moves", "parse_moves"]

MOVES = ("U", "D", "L", "R")
MOVE_DELTAS: dict[str, tuple[int, int]] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
"""(row, col) step of each move."""

_WORDS = {"u": "U", "d": "D", "l": "L", "r": "R", "up": "U", "down": "D", "left": "L", "right": "R"}
_LABEL = re.compile(
    r"^\W*(?:final\s+)?(?:answer|actions?(?:\s+list)?|moves?(?:\s+list)?|plan|solution|path)\W*",
    re.IGNORECASE,
)
_LABELLED = re.compile(
    r"(?:actions?\s+list|final\s+answer|answer|actions|moves)\W{0,6}:", re.IGNORECASE
)
_FENCE = re.compile(r"```[a-zA-Z]*\n?(.*?)```", re.DOTALL)
_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_TOKEN = re.compile(r"[A-Za-z]+|\d+")


class ParsedMoves(NamedTuple):
    """Result of :func:`parse_moves`: the moves, or an empty tuple and the reason."""

    moves: tuple[str, ...]
    reason: str

    @property
    def ok(self) -> bool:
        return not self.reason


def _answer_region(text: str) -> str:
    """The part of ``text`` that holds the answer (see the module docstring)."""
    if "####" in text:
        return text.rsplit("####", 1)[1]
    labelled = None
    for labelled in _LABELLED.finditer(text):  # noqa: B007 - we want the last match
        pass
    if labelled is not None:
        rest = text[labelled.end() :]
        line = rest.strip().split("\n", 1)[0]
        return line if line.strip() else rest
    fences = _FENCE.findall(text)
    if fences:
        return fences[-1]
    lists = _BRACKETS.findall(text)
    if lists:
        return lists[-1]
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def parse_moves(text: str, max_moves: int) -> ParsedMoves:
    """Parse a move list out of an LLM's answer.

    Args:
        text: The model's whole answer.
        max_moves: More moves than this is an error (a runaway generation, not a plan).

    Returns:
        ``ParsedMoves(moves, "")`` or ``ParsedMoves((), reason)``.
    """
    region = _LABEL.sub("", _answer_region(text).strip().strip("`").strip(), count=1)
    moves: list[str] = []
    for token in _TOKEN.findall(region):
        move = _WORDS.get(token.lower())
        if move is not None:
            moves.append(move)
        elif token.isalpha() and set(token.upper()) <= set("UDLR"):
            moves.extend(token.upper())
        else:
            shown = token if len(token) <= 20 else token[:20] + "..."
            return ParsedMoves(
                (),
                f"unexpected {shown!r} in the move list; answer with moves U, D, L, R "
                "separated by commas after a '####' line",
            )
        if len(moves) > max_moves:
            return ParsedMoves((), f"more than {max_moves} moves; give a shorter plan")
    if not moves:
        return ParsedMoves(
            (), "no moves found; answer with moves U, D, L, R separated by commas after '####'"
        )
    return ParsedMoves(tuple(moves), "")


def format_moves(moves: tuple[str, ...] | list[str]) -> str:
    """Moves as the env's prompts write them: ``U, R, R, D`` (or ``(none)``)."""
    return ", ".join(moves) if moves else "(none)"
