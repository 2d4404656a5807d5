"""An optimal Sokoban solver: A* over (player, boxes) with unit move costs and dead-square pruning.

The heuristic is the sum over boxes of the pushes each needs to reach its nearest goal on an
empty board (:attr:`Board.push`). One move pushes at most one box by one cell, so the sum
drops by at most one per move: the heuristic is consistent, and the first solution A* pops is one
with the fewest moves (not merely the fewest pushes). A box on a dead cell (one from which no goal
can be reached, such as a corner that is not a goal) prunes the state: that is the simple deadlock
detection, exact for single boxes and a safe under-approximation with several.
"""

from __future__ import annotations

import heapq

from mas_envs.sokoban.board import Board

__all__ = ["DEFAULT_MAX_STATES", "is_deadlocked", "solve"]

DEFAULT_MAX_STATES = 200_000
"""States the search may visit before it gives up (a 6x6 level with one box has under 300)."""

_MOVES = ("U", "D", "L", "R")


def is_deadlocked(board: Board, boxes: frozenset[int]) -> bool:
    """A box sits on a dead cell: the level can no longer be solved."""
    return not board.dead.isdisjoint(boxes)  # goals are never dead


def solve(
    board: Board, player: int, boxes: frozenset[int], max_states: int = DEFAULT_MAX_STATES
) -> tuple[str, ...] | None:
    """The shortest move list that puts every box on a goal.

    Args:
        board: The static board.
        player: The player's cell.
        boxes: The boxes' cells.
        max_states: Give up after visiting this many states.

    Returns:
        The moves (``()`` when already solved), or ``None`` when the level cannot be solved from
        here or the search gave up.
    """
    goals, walls = board.goals, board.walls
    if boxes <= goals:
        return ()
    if is_deadlocked(board, boxes):
        return None
    pdist = board.push
    dead = board.dead
    steps = [(m, board.steps[m]) for m in _MOVES]

    def h(bs: frozenset[int]) -> int:
        return sum(pdist[b] for b in bs)

    start = (player, boxes)
    parent: dict[tuple[int, frozenset[int]], tuple[tuple[int, frozenset[int]], str] | None] = {
        start: None
    }
    cost = {start: 0}
    tie = 0  # FIFO among equal f keeps the search deterministic and breadth-like
    heap: list[tuple[int, int, int, frozenset[int]]] = [(h(boxes), tie, player, boxes)]
    while heap:
        f, _, p, bs = heapq.heappop(heap)
        state = (p, bs)
        g = cost[state]
        if f > g + h(bs):  # a stale entry: the state was reached more cheaply since
            continue
        if bs <= goals:
            return _path(parent, state)
        for move, step in steps:
            nxt = p + step
            if nxt in walls:
                continue
            nbs = bs
            if nxt in bs:
                dest = nxt + step
                if dest in walls or dest in bs or dest in dead:
                    continue
                nbs = (bs - {nxt}) | {dest}
            child = (nxt, nbs)
            if child in cost and cost[child] <= g + 1:
                continue
            if len(cost) >= max_states:
                return None
            cost[child] = g + 1
            parent[child] = (state, move)
            tie += 1
            heapq.heappush(heap, (g + 1 + h(nbs), tie, nxt, nbs))
    return None


def _path(
    parent: dict[tuple[int, frozenset[int]], tuple[tuple[int, frozenset[int]], str] | None],
    state: tuple[int, frozenset[int]],
) -> tuple[str, ...]:
    moves = []
    link = parent[state]
    while link is not None:
        state, move = link
        moves.append(move)
        link = parent[state]
    return tuple(reversed(moves))
