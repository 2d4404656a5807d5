"""Sokoban level generation by reverse play from a solved room (gym-sokoban's method).

1. Room topology: a random walk of ``WALK_STEPS`` steps (the direction changes with probability
   ``P_CHANGE_DIRECTION`` = 0.35 per step) stamps one of five small floor masks around each
   position; the outer ring stays wall. The floor is connected by construction.
2. Goals and player: boxes are placed on random floor cells, each on its own goal (the solved
   state), and the player on another floor cell.
3. Reverse play: ``PULL_RUNS`` pull runs per box. A run walks the player to a random box it can
   reach and pulls the box one or more cells (a geometric number, stopped by walls and boxes) in
   one direction, the player stepping back ahead of it. Every reverse move undoes a legal forward
   move, so every state on the way can be solved by replaying the walk forwards. The level is the
   state after the run with the largest total displacement of the boxes from their own goals
   that is not solved (gym-sokoban's score, found by sampling instead of its exhaustive search),
   with the player walked off to a random cell it can reach.

Random reverse steps (tried first: a step or a step-and-pull at random, 60 of them) mostly
shuffle the player about: two in three 6x6 one-box levels were then solved by a single move. Pull
runs give 6x6 one-box levels whose optimal solutions are 1-15 moves, median 6.

A room whose play never leaves the solved state is discarded and another one drawn, so no level
is solved at the start. All randomness comes from the generator passed in, drawn in batches (a
Python float per draw is far cheaper than a call into the generator), which keeps a 6x6 level
near 0.15 ms.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import numpy as np

from mas_envs.sokoban.board import Board, Level

__all__ = ["MAX_ROOMS", "PULL_RUNS", "P_CHANGE_DIRECTION", "WALK_STEPS", "generate_level"]

P_CHANGE_DIRECTION = 0.35
WALK_STEPS = 25
"""Steps of the topology walk on a 6x6 room; larger rooms walk 1.7 * (width + height) steps."""
PULL_RUNS = 4
"""Pull runs of the reverse play per box."""
MAX_ROOMS = 200
"""Rooms drawn before giving up on a configuration (too many boxes for the room)."""

_DIRS = ((-1, 0), (1, 0), (0, -1), (0, 1))
# gym-sokoban's five masks, as (row, col) offsets around the walk's position.
_MASKS = (
    ((0, -1), (0, 0), (0, 1)),
    ((-1, 0), (0, 0), (1, 0)),
    ((0, -1), (0, 0), (1, 0)),
    ((0, -1), (0, 0), (1, -1), (1, 0)),
    ((0, 0), (0, 1), (1, 0)),
)


def _draws(rng: np.random.Generator) -> Callable[[], float]:
    """A function returning uniform floats from ``rng``, drawn 256 at a time.

    One Python float per call (a C-level ``next``) is far cheaper than a call into the generator.
    """
    batches = iter(lambda: rng.random(256).tolist(), None)
    return itertools.chain.from_iterable(batches).__next__


@functools.lru_cache(maxsize=64)
def _walk_tables(
    width: int, height: int
) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[tuple[int, ...], ...], ...]]:
    """Per interior cell: the next cell in each direction (clamped to the interior), and the
    floor cells each mask stamps there (the wall ring left out)."""
    n = width * height
    step: list[tuple[int, ...]] = [()] * n
    stamp: list[tuple[tuple[int, ...], ...]] = [()] * n
    for r in range(1, height - 1):
        for c in range(1, width - 1):
            step[r * width + c] = tuple(
                min(max(r + dr, 1), height - 2) * width + min(max(c + dc, 1), width - 2)
                for dr, dc in _DIRS
            )
            stamp[r * width + c] = tuple(
                tuple(
                    (r + mr) * width + c + mc
                    for mr, mc in mask
                    if 0 < r + mr < height - 1 and 0 < c + mc < width - 1
                )
                for mask in _MASKS
            )
    return tuple(step), tuple(stamp)


def _topology(u: Callable[[], float], width: int, height: int, steps: int) -> list[int]:
    """Floor cells of a random-walk room, sorted."""
    step, stamp = _walk_tables(width, height)
    floor: set[int] = set()
    pos = (1 + int(u() * (height - 2))) * width + 1 + int(u() * (width - 2))
    d = int(u() * 4)
    for _ in range(steps):
        if u() < P_CHANGE_DIRECTION:
            d = int(u() * 4)
        pos = step[pos][d]
        floor.update(stamp[pos][int(u() * 5)])
    return sorted(floor)


def _reach(start: int, floor: set[int], occupied: set[int], deltas: tuple[int, ...]) -> list[int]:
    """Cells the player can walk to from ``start`` without moving a box, in visiting order."""
    seen = {start}
    order = [start]
    for cell in order:  # the list grows while it is read: a breadth-first flood fill
        for d in deltas:
            n = cell + d
            if n in floor and n not in seen and n not in occupied:
                seen.add(n)
                order.append(n)
    return order


def _reverse_play(
    u: Callable[[], float], width: int, floor: set[int], goals: list[int], player: int, runs: int
) -> tuple[int, list[int]] | None:
    """Pull boxes away from their goals; return the most displaced unsolved state, or None.

    Each of ``runs`` pull runs walks the player to a box (within its reachable area) and pulls
    the box one to several cells in one direction. The state after each run scores the boxes'
    total Manhattan displacement from their own goals; the best unsolved one, with the player
    walked to a random reachable cell, is returned.
    """
    deltas = (-width, width, -1, 1)
    boxes = list(goals)  # box k starts on goal k
    occupied = set(boxes)
    goal_set = set(goals)
    best: tuple[int, list[int]] | None = None
    best_score = 0
    for _ in range(runs):
        region = _reach(player, floor, occupied, deltas)
        reachable = set(region)
        # (box index, direction): the player stands at box+d and can step back to box+2d.
        pulls = [
            (k, d)
            for k, b in enumerate(boxes)
            for d in deltas
            if b + d in reachable and b + 2 * d in floor and b + 2 * d not in occupied
        ]
        if not pulls:
            break
        k, d = pulls[int(u() * len(pulls))]
        length = 1
        while u() < 0.5:  # geometric run length, stopped by walls and boxes
            nxt = boxes[k] + (length + 2) * d
            if nxt not in floor or nxt in occupied:
                break
            length += 1
        occupied.discard(boxes[k])
        boxes[k] += length * d
        occupied.add(boxes[k])
        player = boxes[k] + d
        score = sum(_manhattan(b, g, width) for b, g in zip(boxes, goals, strict=True))
        if score > best_score and not occupied <= goal_set:
            best_score, best = score, (player, boxes[:])
    if best is None:
        return None
    # The player walks off to a random cell it can reach (still a reverse of legal play).
    region = _reach(best[0], floor, set(best[1]), deltas)
    return region[int(u() * len(region))], best[1]


def _manhattan(a: int, b: int, width: int) -> int:
    ar, ac = divmod(a, width)
    br, bc = divmod(b, width)
    return abs(ar - br) + abs(ac - bc)


def generate_level(
    rng: np.random.Generator, width: int = 6, height: int = 6, boxes: int = 1
) -> Level:
    """A random, solvable, unsolved level drawn from ``rng``.

    Args:
        rng: The only source of randomness (seed it with the level id).
        width: Columns, including the wall ring.
        height: Rows, including the wall ring.
        boxes: Number of boxes (and goals).

    Raises:
        ValueError: No room in ``MAX_ROOMS`` draws could hold the boxes (too many for the size).
    """
    u = _draws(rng)
    walk = max(WALK_STEPS, int(1.7 * (width + height)))
    for _ in range(MAX_ROOMS):
        floor = _topology(u, width, height, walk)
        if len(floor) < boxes + 2:  # the player needs a cell and a box needs room to move
            continue
        free = floor[:]
        placed = []
        for _ in range(boxes + 1):
            placed.append(free.pop(int(u() * len(free))))
        player, goals = placed[0], placed[1:]
        found = _reverse_play(u, width, set(floor), goals, player, PULL_RUNS * boxes)
        if found is None:
            continue
        start, box_cells = found
        floor_set = frozenset(floor)
        walls = frozenset(range(width * height)) - floor_set
        return Level(Board(width, height, walls, frozenset(goals)), start, frozenset(box_cells))
    raise ValueError(
        f"could not fit {boxes} boxes into a {width}x{height} room in {MAX_ROOMS} tries; "
        "use fewer boxes or a larger room"
    )
