"""The ``rgb_array`` picture of a Sokoban board, drawn with numpy (no pygame).

Each cell is a ``TILE`` x ``TILE`` tile: grey bricks for walls, sand floor, a red diamond on goals,
brown crates, green crates on goals, a blue player (with the goal's diamond under it when it
stands on one).
"""

from __future__ import annotations

import functools

import numpy as np

from mas_envs.sokoban.board import Board

__all__ = ["TILE", "render_rgb"]

TILE = 16
"""Pixels per cell side."""

_WALL, _FLOOR, _GOAL, _BOX, _BOX_ON_GOAL, _PLAYER, _PLAYER_ON_GOAL = range(7)


@functools.cache
def _tiles() -> np.ndarray:
    """The seven tiles, ``(7, TILE, TILE, 3)`` uint8, in the order of the codes above."""
    t = TILE
    yy, xx = np.mgrid[0:t, 0:t]
    centre = (t - 1) / 2
    floor = np.array([236, 224, 196], np.uint8)
    tiles = np.empty((7, t, t, 3), np.uint8)
    tiles[:] = floor
    # Wall: grey bricks with dark mortar lines, half a brick offset every other row.
    wall = np.full((t, t, 3), (128, 128, 136), np.uint8)
    mortar = (yy % (t // 2) == 0) | (((xx + (yy // (t // 2)) * (t // 2)) % t) == 0)
    wall[mortar] = (72, 72, 80)
    tiles[_WALL] = wall
    diamond = (np.abs(yy - centre) + np.abs(xx - centre)) <= t * 0.22
    crate = (np.maximum(np.abs(yy - centre), np.abs(xx - centre))) <= t * 0.40
    rim = crate & ((np.maximum(np.abs(yy - centre), np.abs(xx - centre))) >= t * 0.30)
    disc = ((yy - centre) ** 2 + (xx - centre) ** 2) <= (t * 0.36) ** 2
    for code in (_GOAL, _PLAYER_ON_GOAL):
        tiles[code][diamond] = (214, 48, 49)
    tiles[_BOX][crate] = (176, 112, 48)
    tiles[_BOX][rim] = (112, 64, 24)
    tiles[_BOX_ON_GOAL][crate] = (64, 176, 80)
    tiles[_BOX_ON_GOAL][rim] = (24, 104, 40)
    for code in (_PLAYER, _PLAYER_ON_GOAL):
        ring = disc & ~diamond if code == _PLAYER_ON_GOAL else disc
        tiles[code][ring] = (40, 96, 200)
    tiles.setflags(write=False)
    return tiles


def render_rgb(board: Board, player: int, boxes: frozenset[int]) -> np.ndarray:
    """The board as a ``(height * TILE, width * TILE, 3)`` uint8 image."""
    codes = np.full(board.width * board.height, _FLOOR, np.intp)
    codes[list(board.walls)] = _WALL
    goals = list(board.goals)
    codes[goals] = _GOAL
    for b in boxes:
        codes[b] = _BOX_ON_GOAL if b in board.goals else _BOX
    codes[player] = _PLAYER_ON_GOAL if player in board.goals else _PLAYER
    tiles = _tiles()[codes.reshape(board.height, board.width)]  # (H, W, T, T, 3)
    return tiles.transpose(0, 2, 1, 3, 4).reshape(board.height * TILE, board.width * TILE, 3)
