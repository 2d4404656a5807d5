"""Sudoku puzzle generation from a ``np.random.Generator``: a random full grid, then clue removal.

1. A full grid by randomised backtracking: cells in fewest-candidates order, each cell's digits
   tried in an order drawn from the generator. Every valid grid can come out (unlike a fixed
   pattern permuted), and the whole draw is one generator call, so a seed is one grid.
2. Clues are removed in an order drawn from the generator; a removal is kept only while the puzzle
   keeps exactly one solution (:func:`~mas_envs.sudoku.rules.has_other_solution`), until the
   requested number of clues is left. If a pass stops above it (no cell can go without a second
   solution), a new grid is drawn from the same generator. That happens only near the low ends of
   :data:`CLUE_RANGE` (never at the defaults), which are chosen to keep a reset fast.

The same generator state always gives the same puzzle: nothing is cached between calls.
"""

from __future__ import annotations

import numpy as np

from mas_envs.sudoku.rules import SIZES, geometry, has_other_solution

__all__ = ["CLUE_RANGE", "DEFAULT_CLUES", "check_config", "generate", "random_full_grid"]

DEFAULT_CLUES = {4: 6, 9: 30}
"""Default number of given clues per size (4x4: 10 of 16 cells to fill; 9x9: 51 of 81)."""

CLUE_RANGE = {4: (4, 15), 9: (25, 80)}
"""Allowed clue counts per size, inclusive. The low ends: 4 is the fewest clues any 4x4 puzzle
with a unique solution has (2 in 3 removal passes reach it); 17 is the proven minimum for 9x9, but
a removal pass from a random grid ends at 22-27 clues (47% of passes reach 24, 86% reach 25), and
a 9x9 reset at 24 clues took 23 ms median, 83 ms p90 here, against 9 ms and 20 ms at 25. The high
ends leave at least one cell to fill."""

MAX_ATTEMPTS = 200
"""Full grids drawn before giving up on reaching the clue count (reached within a few)."""


def check_config(size: int, clues: int | None) -> int:
    """Validate a (size, clues) config and return the clue count to use.

    Raises:
        ValueError: naming the parameter, the value and the allowed values.
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}, got {size!r}")
    if clues is None:
        return DEFAULT_CLUES[int(size)]
    low, high = CLUE_RANGE[int(size)]
    if (
        isinstance(clues, bool)
        or not isinstance(clues, (int, np.integer))
        or not low <= clues <= high
    ):
        raise ValueError(
            f"clues must be an int from {low} to {high} for size {size} (fewer clues do not "
            f"give a puzzle with a unique solution reliably, more leave no cell to fill), "
            f"got {clues!r}"
        )
    return int(clues)


def random_full_grid(rng: np.random.Generator, n: int) -> bytes:
    """A random valid full grid of size ``n`` drawn from ``rng``."""
    geo = geometry(n)
    rcb, popcount = geo.rcb, geo.popcount
    # One draw: the order in which each cell tries its digits.
    orders = rng.permuted(np.tile(np.arange(1, n + 1), (n * n, 1)), axis=1).tolist()
    rows, cols, boxes = [0] * n, [0] * n, [0] * n
    grid = bytearray(n * n)
    full = (1 << n) - 1

    def fill(empty: list[int]) -> bool:
        if not empty:
            return True
        best, best_mask, best_count = 0, 0, n + 1
        for k, i in enumerate(empty):
            r, c, b = rcb[i]
            mask = full & ~(rows[r] | cols[c] | boxes[b])
            count = popcount[mask]
            if count < best_count:
                if count == 0:
                    return False
                best, best_mask, best_count = k, mask, count
                if count == 1:
                    break
        i = empty[best]
        rest = empty[:best] + empty[best + 1 :]
        r, c, b = rcb[i]
        for v in orders[i]:
            bit = 1 << (v - 1)
            if best_mask & bit:
                rows[r] |= bit
                cols[c] |= bit
                boxes[b] |= bit
                grid[i] = v
                if fill(rest):
                    return True
                rows[r] ^= bit
                cols[c] ^= bit
                boxes[b] ^= bit
        grid[i] = 0
        return False

    if not fill(list(range(n * n))):  # pragma: no cover - an empty board always has a filling
        raise RuntimeError(f"no full {n}x{n} grid found; this is a bug in the generator")
    return bytes(grid)


def generate(
    rng: np.random.Generator, size: int = 4, clues: int | None = None
) -> tuple[bytes, bytes]:
    """A puzzle with exactly one solution and exactly ``clues`` given digits.

    Args:
        rng: The generator every random choice is drawn from (``np.random.default_rng(level_id)``
            for a level).
        size: 4 or 9.
        clues: Given digits; ``None`` for :data:`DEFAULT_CLUES`. Checked by :func:`check_config`.

    Returns:
        ``(puzzle, solution)`` as boards (see :mod:`mas_envs.sudoku.rules`).
    """
    target = check_config(size, clues)
    cells = size * size
    for _ in range(MAX_ATTEMPTS):
        solution = random_full_grid(rng, size)
        puzzle = bytearray(solution)
        left = cells
        for i in rng.permutation(cells).tolist():
            if left == target:
                break
            value = puzzle[i]
            puzzle[i] = 0
            if has_other_solution(bytes(puzzle), size, i, value):
                puzzle[i] = value  # this clue is needed for uniqueness
            else:
                left -= 1
        if left == target:
            return bytes(puzzle), solution
    raise RuntimeError(  # pragma: no cover - CLUE_RANGE keeps this out of reach
        f"no {size}x{size} puzzle with {target} clues after {MAX_ATTEMPTS} grids; "
        f"use more clues (see CLUE_RANGE)"
    )
