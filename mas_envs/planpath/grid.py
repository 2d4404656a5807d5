"""Plan-Path rules: the grid, moves, BFS, rewards and level generation (pure, no env state).

A level is a ``rows x cols`` grid of free cells and walls with a start and a goal cell. Cells are
numbered row-major, ``cell = row * cols + col``. Everything a step needs is precomputed once per
level in a :class:`Level` of tuples (immutable, so env clones share it for free):

* ``step[cell * 4 + m]``: where move ``m`` (index into ``MOVES`` = U, D, L, R) leads, or ``-1``
  when a wall or the edge blocks it (the agent stays put);
* ``dist[cell]``: BFS distance to the goal (``-1``: unreachable);
* ``phi[cell]``: the shaping potential, ``-Manhattan(cell, goal)``.

Rewards of one move list (the paper's numbers):

=====================================  =========================================
event                                   reward
=====================================  =========================================
each move that is made                  ``-0.01``
a blocked move (wall or edge)           ``-0.10`` instead (the agent stays put)
shaping, each move that moves          ``+ GAMMA * phi(next) - phi(cell)``
reaching the goal                       ``+1.0``; later moves are ignored
...on a shortest path                   ``+0.5`` when the episode's move count equals the
                                        BFS distance from the start
=====================================  =========================================

Why blocked moves get no shaping: with a negative potential, staying put would earn
``(GAMMA - 1) * phi(cell) = 0.01 * distance``, up to +0.18 on a 10x10 grid, more than the blocked
penalty, so bumping into walls far from the goal would pay. Shaping telescopes along a path: a move
list that reaches the goal from Manhattan distance ``d`` earns about ``d`` in shaping.
"""

from __future__ import annotations

import functools
from collections import deque
from typing import NamedTuple

import numpy as np

__all__ = [
    "BLOCKED_COST",
    "GAMMA",
    "GOAL_REWARD",
    "MOVES",
    "MOVE_COST",
    "OPTIMAL_BONUS",
    "Level",
    "Result",
    "bfs",
    "generate",
    "make_level",
    "run_moves",
    "shortest_path",
]

MOVES = ("U", "D", "L", "R")
MOVE_INDEX = {m: i for i, m in enumerate(MOVES)}
_DELTAS = ((-1, 0), (1, 0), (0, -1), (0, 1))

MOVE_COST = -0.01
BLOCKED_COST = -0.10
GOAL_REWARD = 1.0
OPTIMAL_BONUS = 0.5
GAMMA = 0.99
"""Discount of the potential-based shaping term ``GAMMA * phi(s') - phi(s)``."""

_MAX_TRIES = 1000


class Level(NamedTuple):
    """One Plan-Path level and its precomputed tables (see the module docstring)."""

    rows: int
    cols: int
    walls: tuple[bool, ...]
    start: int
    goal: int
    optimum: int
    """BFS length of a shortest path from the start to the goal."""
    step: tuple[int, ...]
    dist: tuple[int, ...]
    phi: tuple[int, ...]
    moves: tuple[dict[str, tuple[int, float]], ...]
    """Per cell, per move letter: ``(next cell, reward of the move without the goal terms)``.
    Read-only (shared by every clone of an env), it makes a move one lookup."""

    def rc(self, cell: int) -> tuple[int, int]:
        """``(row, col)`` of ``cell``."""
        return divmod(cell, self.cols)


Result = tuple[int, float, tuple[str, ...], tuple[int, ...], bool]
"""What :func:`run_moves` returns: ``(cell, reward, made, blocked, reached)``, where ``made`` are
the moves actually made (it stops at the goal), ``blocked`` the indices into ``made`` of the moves
a wall or the edge blocked, and ``reached`` whether the goal was reached. A plain tuple: it is
built on every env step, and a NamedTuple's constructor would cost a third of ``run_moves``."""


@functools.lru_cache(maxsize=64)
def _neighbours(rows: int, cols: int) -> tuple[int, ...]:
    """Per cell and move, the neighbouring cell, or ``-1`` off the grid (walls not applied)."""
    out = []
    for cell in range(rows * cols):
        r, c = divmod(cell, cols)
        for dr, dc in _DELTAS:
            nr, nc = r + dr, c + dc
            out.append(nr * cols + nc if 0 <= nr < rows and 0 <= nc < cols else -1)
    return tuple(out)


def _transitions(walls: tuple[bool, ...], rows: int, cols: int) -> tuple[int, ...]:
    return tuple(-1 if n < 0 or walls[n] else n for n in _neighbours(rows, cols))


def bfs(step: tuple[int, ...], n_cells: int, source: int) -> tuple[int, ...]:
    """BFS distances from ``source`` over the transition table ``step`` (``-1``: unreachable).

    Moves are reversible (a free neighbour is reachable both ways), so distances *from* the goal
    are distances *to* the goal.
    """
    dist = [-1] * n_cells
    dist[source] = 0
    queue = deque([source])
    while queue:
        cell = queue.popleft()
        for nxt in step[cell * 4 : cell * 4 + 4]:
            if nxt >= 0 and dist[nxt] < 0:
                dist[nxt] = dist[cell] + 1
                queue.append(nxt)
    return tuple(dist)


def make_level(
    rows: int,
    cols: int,
    walls: tuple[bool, ...],
    start: int,
    goal: int,
    step: tuple[int, ...] | None = None,
) -> Level:
    """Build a :class:`Level` (with its tables) from a wall mask and two free cells.

    Raises:
        ValueError: when the mask has the wrong size, start or goal is a wall, or the goal is not
            reachable from the start.
    """
    if len(walls) != rows * cols:
        raise ValueError(f"walls has {len(walls)} cells, expected rows*cols = {rows * cols}")
    for name, cell in (("start", start), ("goal", goal)):
        if not 0 <= cell < rows * cols or walls[cell]:
            raise ValueError(f"{name} cell {cell} is outside the grid or a wall")
    if step is None:
        step = _transitions(walls, rows, cols)
    dist = bfs(step, rows * cols, goal)
    if dist[start] < 0:
        raise ValueError(f"goal {goal} is not reachable from start {start}")
    gr, gc = divmod(goal, cols)
    phi = tuple(-(abs(r - gr) + abs(c - gc)) for r in range(rows) for c in range(cols))
    table = []
    for cell in range(rows * cols):
        entry = {}
        for m, move in enumerate(MOVES):
            nxt = step[cell * 4 + m]
            if nxt < 0:  # blocked: stay put, no shaping (see the module docstring)
                entry[move] = (cell, BLOCKED_COST)
            else:
                entry[move] = (nxt, MOVE_COST + GAMMA * phi[nxt] - phi[cell])
        table.append(entry)
    return Level(rows, cols, walls, start, goal, dist[start], step, dist, phi, tuple(table))


def generate(rng: np.random.Generator, rows: int, cols: int, wall_prob: float) -> Level:
    """Draw a level: each cell is a wall with probability ``wall_prob``; start != goal, connected.

    Like the paper, a draw whose start cannot reach any other cell is redrawn (the goal is drawn
    among the cells reachable from the start). After many failed draws (only possible at extreme
    densities) the walls are dropped, so a valid config always yields a level.
    """
    n = rows * cols
    for _ in range(_MAX_TRIES):
        walls = tuple(bool(w) for w in rng.random(n) < wall_prob)
        free = [i for i in range(n) if not walls[i]]
        if len(free) < 2:
            continue
        start = free[int(rng.integers(len(free)))]
        step = _transitions(walls, rows, cols)
        dist = bfs(step, n, start)
        reachable = [i for i in range(n) if dist[i] > 0]
        if reachable:
            goal = reachable[int(rng.integers(len(reachable)))]
            return make_level(rows, cols, walls, start, goal, step)
    start, goal = (int(x) for x in rng.choice(n, size=2, replace=False))
    return make_level(rows, cols, (False,) * n, start, goal)


def run_moves(level: Level, cell: int, moves: tuple[str, ...], moves_before: int) -> Result:
    """Apply ``moves`` from ``cell``; stops at the goal. Returns ``(cell, reward, made, blocked,
    reached)`` (see :data:`Result`).

    Args:
        level: The level.
        cell: Where the agent is.
        moves: Move letters (``U D L R``).
        moves_before: Moves already made this episode (for the shortest-path bonus).
    """
    table, goal = level.moves, level.goal
    reward = 0.0
    blocked: list[int] = []
    for i, move in enumerate(moves):
        nxt, r = table[cell][move]
        reward += r
        if nxt == cell:
            blocked.append(i)
            continue
        cell = nxt
        if cell == goal:
            reward += GOAL_REWARD
            if moves_before + i + 1 == level.optimum:
                reward += OPTIMAL_BONUS
            return cell, reward, moves[: i + 1], tuple(blocked), True
    return cell, reward, moves, tuple(blocked), False


def shortest_path(level: Level, cell: int) -> tuple[str, ...]:
    """A shortest move list from ``cell`` to the goal (empty at the goal or when unreachable).

    Follows strictly decreasing BFS distance; ties go to the first of U, D, L, R, so the path is
    deterministic.
    """
    step, dist = level.step, level.dist
    path: list[str] = []
    if dist[cell] < 0:
        return ()
    while dist[cell] > 0:
        for m in range(4):
            nxt = step[cell * 4 + m]
            if nxt >= 0 and dist[nxt] == dist[cell] - 1:
                path.append(MOVES[m])
                cell = nxt
                break
    return tuple(path)
