"""Sudoku rules and solver on immutable boards (pure, no env, no randomness).

A board of size ``n`` (4 or 9; boxes of ``sqrt(n) x sqrt(n)``) is a ``bytes`` of length ``n * n``
in row-major order: cell ``i`` is row ``i // n``, column ``i % n`` (0-based inside the code; the
prompts number rows and columns from 1), value ``0`` is an empty cell and ``1..n`` a digit.
``bytes`` keeps boards hashable, comparable in one C call and free to share between env clones.

The solver is constraint propagation by candidate bitmasks (bit ``v - 1`` of a mask is digit
``v``) with backtracking on the cell with the fewest candidates; it counts solutions up to a limit,
which is all that puzzle generation needs (unique = exactly one).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from math import isqrt
from operator import itemgetter
from typing import NamedTuple

__all__ = [
    "SIZES",
    "Geometry",
    "conflict",
    "conflict_at",
    "count_solutions",
    "format_grid",
    "geometry",
    "has_other_solution",
    "solve",
]

SIZES = (4, 9)
"""Supported board sizes (rows = columns = digits)."""


class Geometry(NamedTuple):
    """Static tables of one board size, computed once per size (constants, not state).

    Attributes:
        n: Rows, columns and digits.
        box: Side of a box (``isqrt(n)``).
        rcb: ``(row, col, box)`` of each cell.
        units: Cell indices of every row, then column, then box.
        unit_getters: One ``itemgetter`` per unit, reading that unit's values in one C call.
        peer_getters: One ``itemgetter`` per cell over the cells sharing its row, column or box.
        popcount: Number of set bits of every candidate mask ``0 .. 2**n - 1``.
    """

    n: int
    box: int
    rcb: tuple[tuple[int, int, int], ...]
    units: tuple[tuple[int, ...], ...]
    unit_getters: tuple[itemgetter, ...]
    peer_getters: tuple[itemgetter, ...]
    popcount: tuple[int, ...]


@cache
def geometry(n: int) -> Geometry:
    """The tables of size ``n``; raises ``ValueError`` for a size that is not a square."""
    box = isqrt(n)
    if n < 1 or box * box != n:
        raise ValueError(f"a Sudoku size must be a perfect square such as 4 or 9, got {n!r}")
    rcb = tuple((i // n, i % n, (i // n) // box * box + (i % n) // box) for i in range(n * n))
    rows = tuple(tuple(range(r * n, (r + 1) * n)) for r in range(n))
    cols = tuple(tuple(range(c, n * n, n)) for c in range(n))
    boxes = tuple(tuple(i for i in range(n * n) if rcb[i][2] == b) for b in range(n))
    units = rows + cols + boxes
    peers = [sorted({j for u in units if i in u for j in u} - {i}) for i in range(n * n)]
    return Geometry(
        n,
        box,
        rcb,
        units,
        tuple(itemgetter(*u) for u in units),
        tuple(itemgetter(*p) for p in peers),
        tuple(bin(m).count("1") for m in range(1 << n)),
    )


_UNIT_KIND = ("row", "column", "box")


def conflict(board: bytes, n: int) -> str:
    """Describe the first repeated digit in a row, column or box of ``board``; ``""`` if none.

    Rows, columns and boxes are numbered from 1 (boxes left to right, top to bottom), as in the
    prompts, so the text can be shown to the agent as is.
    """
    geo = geometry(n)
    for k, get in enumerate(geo.unit_getters):
        values = get(board)
        blanks = values.count(0)
        if len(set(values)) - (blanks > 0) != n - blanks:
            seen: set[int] = set()
            for v in values:
                if v and v in seen:
                    return f"{_UNIT_KIND[k // n]} {k % n + 1} has the digit {v} twice"
                seen.add(v)
    return ""


def conflict_at(board: bytes, n: int, cells: Iterable[int]) -> str:
    """:func:`conflict`, when only ``cells`` can clash (the rest of ``board`` is known clean).

    Checks each cell against its peers (one C call per cell) and names the row, column or box of
    the first clash, which is what a move of a few fills on a valid board needs.
    """
    geo = geometry(n)
    for i in cells:
        v = board[i]
        if v and v in geo.peer_getters[i](board):
            r, c, b = geo.rcb[i]
            for unit in (r, n + c, 2 * n + b):
                if geo.unit_getters[unit](board).count(v) > 1:
                    return f"{_UNIT_KIND[unit // n]} {unit % n + 1} has the digit {v} twice"
    return ""


def _state(board: bytes, geo: Geometry) -> tuple[list[int], list[int], list[int], list[int]] | None:
    """Used-digit masks of rows, columns and boxes, and the empty cells; ``None`` on a conflict."""
    n = geo.n
    rows, cols, boxes = [0] * n, [0] * n, [0] * n
    empty = []
    for i, v in enumerate(board):
        if not v:
            empty.append(i)
            continue
        bit = 1 << (v - 1)
        r, c, b = geo.rcb[i]
        if (rows[r] | cols[c] | boxes[b]) & bit:
            return None
        rows[r] |= bit
        cols[c] |= bit
        boxes[b] |= bit
    return rows, cols, boxes, empty


def _search(
    empty: list[int],
    rows: list[int],
    cols: list[int],
    boxes: list[int],
    geo: Geometry,
    limit: int,
    found: list[bytes] | None,
    board: bytearray,
) -> int:
    """Count solutions (up to ``limit``) of the empty cells; store the first in ``found``."""
    if not empty:
        if found is not None and not found:
            found.append(bytes(board))
        return 1
    full = (1 << geo.n) - 1
    rcb, popcount = geo.rcb, geo.popcount
    best, best_mask, best_count = 0, 0, geo.n + 1
    for k, i in enumerate(empty):
        r, c, b = rcb[i]
        mask = full & ~(rows[r] | cols[c] | boxes[b])
        count = popcount[mask]
        if count < best_count:
            if count == 0:
                return 0  # a dead end: prune before branching anywhere else
            best, best_mask, best_count = k, mask, count
            if count == 1:
                break  # a forced cell: propagate it first
    i = empty[best]
    rest = empty[:best] + empty[best + 1 :]
    r, c, b = rcb[i]
    total = 0
    while best_mask and total < limit:
        bit = best_mask & -best_mask
        best_mask ^= bit
        rows[r] |= bit
        cols[c] |= bit
        boxes[b] |= bit
        board[i] = bit.bit_length()
        total += _search(rest, rows, cols, boxes, geo, limit - total, found, board)
        rows[r] ^= bit
        cols[c] ^= bit
        boxes[b] ^= bit
    board[i] = 0
    return total


def count_solutions(board: bytes, n: int, limit: int = 2) -> int:
    """Solutions of ``board``, counted up to ``limit`` (2 is enough to test uniqueness)."""
    geo = geometry(n)
    state = _state(board, geo)
    if state is None:
        return 0
    rows, cols, boxes, empty = state
    return _search(empty, rows, cols, boxes, geo, limit, None, bytearray(board))


def solve(board: bytes, n: int) -> bytes | None:
    """One solution of ``board`` (the only one for a proper puzzle), or ``None`` if it has none."""
    geo = geometry(n)
    state = _state(board, geo)
    if state is None:
        return None
    rows, cols, boxes, empty = state
    found: list[bytes] = []
    _search(empty, rows, cols, boxes, geo, 1, found, bytearray(board))
    return found[0] if found else None


def has_other_solution(board: bytes, n: int, cell: int, value: int) -> bool:
    """Whether ``board`` has a solution whose ``cell`` (empty in ``board``) is not ``value``.

    When ``board`` with ``value`` written into ``cell`` has exactly one solution, this is the
    uniqueness test of ``board`` itself, at about half the cost of counting to 2: the search
    branches on ``cell`` first and skips ``value``.
    """
    geo = geometry(n)
    state = _state(board, geo)
    if state is None:
        return False
    rows, cols, boxes, empty = state
    r, c, b = geo.rcb[cell]
    mask = ((1 << n) - 1) & ~(rows[r] | cols[c] | boxes[b]) & ~(1 << (value - 1))
    rest = [i for i in empty if i != cell]
    work = bytearray(board)
    while mask:
        bit = mask & -mask
        mask ^= bit
        rows[r] |= bit
        cols[c] |= bit
        boxes[b] |= bit
        work[cell] = bit.bit_length()
        if _search(rest, rows, cols, boxes, geo, 1, None, work):
            return True
        rows[r] ^= bit
        cols[c] ^= bit
        boxes[b] ^= bit
    return False


_CHARS = bytes.maketrans(bytes(range(10)), b".123456789")


@cache
def _template(n: int, boxes: bool) -> str:
    """A ``%`` template with one ``%s`` per cell (a constant per size; faster than format)."""
    row = " ".join(["%s"] * n)
    if not boxes:
        return "\n".join([row] * n)
    b = isqrt(n)
    row = " | ".join([" ".join(["%s"] * b)] * b)
    rule = "-+-".join(["-" * (2 * b - 1)] * b)
    bands = ["\n".join([row] * b)] * b
    return ("\n" + rule + "\n").join(bands)


def format_grid(board: bytes, n: int, *, boxes: bool = False) -> str:
    """``board`` as text, one row per line, digits separated by spaces, ``.`` for empty.

    Args:
        board: The board.
        n: Its size.
        boxes: Draw ``|`` and ``-`` lines between boxes (for people and prompts; the parser
            accepts answers with or without them).
    """
    return _template(n, boxes) % tuple(board.translate(_CHARS).decode("ascii"))
