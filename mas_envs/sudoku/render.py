"""An ``rgb_array`` picture of a Sudoku board, drawn with numpy (no pygame, no matplotlib).

Given clues are black, digits the agents filled are blue, box lines are thicker than cell lines.
"""

from __future__ import annotations

from math import isqrt

import numpy as np

__all__ = ["render_board"]

# 5x7 bitmaps of the digits 1-9 (row strings, '#' = ink).
_GLYPHS = {
    1: ["..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."],
    2: [".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"],
    3: ["####.", "....#", "....#", ".###.", "....#", "....#", "####."],
    4: ["...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."],
    5: ["#####", "#....", "####.", "....#", "....#", "#...#", ".###."],
    6: [".###.", "#....", "#....", "####.", "#...#", "#...#", ".###."],
    7: ["#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."],
    8: [".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."],
    9: [".###.", "#...#", "#...#", ".####", "....#", "....#", ".###."],
}
_MASKS = {d: np.array([[c == "#" for c in row] for row in g]) for d, g in _GLYPHS.items()}

_CELL = 36  # pixels per cell
_SCALE = 3  # glyph pixel size: 15x21 digits
_PAPER = np.array([255, 255, 255], np.uint8)
_CLUE_INK = np.array([20, 20, 20], np.uint8)
_FILL_INK = np.array([30, 90, 200], np.uint8)
_THIN = np.array([170, 170, 170], np.uint8)
_THICK = np.array([20, 20, 20], np.uint8)


def render_board(board: bytes, puzzle: bytes, n: int) -> np.ndarray:
    """An ``(H, W, 3)`` uint8 image of ``board``; cells set in ``puzzle`` are drawn as clues."""
    box = isqrt(n)
    side = n * _CELL + 3
    img = np.empty((side, side, 3), np.uint8)
    img[:] = _PAPER
    for k in range(n + 1):
        at = k * _CELL
        color, width = (_THICK, 3) if k % box == 0 else (_THIN, 1)
        img[at : at + width, :] = color
        img[:, at : at + width] = color
    gh, gw = 7 * _SCALE, 5 * _SCALE
    for i, v in enumerate(board):
        if not v:
            continue
        top = (i // n) * _CELL + (_CELL - gh) // 2 + 2
        left = (i % n) * _CELL + (_CELL - gw) // 2 + 2
        glyph = np.kron(_MASKS[v], np.ones((_SCALE, _SCALE), bool))
        img[top : top + gh, left : left + gw][glyph] = _CLUE_INK if puzzle[i] else _FILL_INK
    return img
