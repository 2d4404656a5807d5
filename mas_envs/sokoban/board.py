"""Sokoban rules: the board, moves and pushes, rewards, text rendering. Pure and immutable.

A level is a grid of ``height`` rows and ``width`` columns whose outer ring is wall. Cells are flat
indices ``row * width + col``; a move adds ``MOVE_STEPS`` scaled to the width (``U`` is ``-width``),
and the wall ring means a move never leaves the grid. The moving parts are two immutable values,
the player's cell (``int``) and the boxes' cells (``frozenset``), so a state is shared for free
between clones and a simulated plan never touches the real one.

Symbols (the prompt's legend)::

    #  wall     _  floor    .  goal     $  box     *  box on a goal
    @  player   +  player on a goal
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "Board",
    "Level",
    "Play",
    "Rewards",
    "parse_level",
    "play",
    "play_fields",
    "player_region",
]

WALL, FLOOR, GOAL, BOX, BOX_ON_GOAL, PLAYER, PLAYER_ON_GOAL = "#", "_", ".", "$", "*", "@", "+"
_BOX, _BOX_ON_GOAL, _PLAYER, _PLAYER_ON_GOAL = (ord(c) for c in "$*@+")
_READ = {
    WALL: (True, False, False, False),  # wall, goal, box, player
    FLOOR: (False, False, False, False),
    " ": (False, False, False, False),
    GOAL: (False, True, False, False),
    BOX: (False, False, True, False),
    BOX_ON_GOAL: (False, True, True, False),
    PLAYER: (False, False, False, True),
    PLAYER_ON_GOAL: (False, True, False, True),
}


@dataclass(frozen=True)
class Rewards:
    """Per-move rewards of a plan (the paper's numbers), summed over its moves.

    Attributes:
        move: Every move that is made.
        invalid: A move that fails (into a wall, or a push into a wall or a box); it replaces
            ``move`` and the player stays put.
        box_on_goal: A push that puts a box onto a goal.
        box_off_goal: A push that takes a box off a goal.
        solved: The move that puts the last box onto a goal.
        shaping_scale: Potential ``phi(s) = -shaping_scale * D(s)``, ``D`` the sum over boxes of
            the Manhattan distance to the nearest goal; each move adds ``gamma * phi(s') - phi(s)``.
        shaping_gamma: Discount of the shaping term. The default 1.0 keeps shaping a pure
            telescoping sum: with gamma < 1 every move far from the goals would earn
            ``(1 - gamma) * shaping_scale * D``, which beats the move cost on large boards.
    """

    move: float = -0.01
    invalid: float = -0.05
    box_on_goal: float = 1.0
    box_off_goal: float = -0.5
    solved: float = 10.0
    shaping_scale: float = 0.1
    shaping_gamma: float = 1.0


class Level(NamedTuple):
    """A Sokoban position: the static board and the moving parts."""

    board: Board
    player: int
    boxes: frozenset[int]


class Play(NamedTuple):
    """What a list of moves did, from :func:`play`.

    Attributes:
        player: The player's cell afterwards.
        boxes: The boxes' cells afterwards.
        reward: Sum of the per-move rewards (:class:`Rewards`).
        made: Moves that were made (valid ones), in order.
        invalid: Moves that failed, as ``(index in the list, move)``.
        used: Moves read from the list; moves after the one that solves the level are ignored.
        on_goals: Boxes on goals afterwards.
        solved: Every box is on a goal.
    """

    player: int
    boxes: frozenset[int]
    reward: float
    made: tuple[str, ...]
    invalid: tuple[tuple[int, str], ...]
    used: int
    on_goals: int
    solved: bool


class Board:
    """The static part of a level (walls, goals, size) with tables precomputed for speed.

    Args:
        width: Columns, including the wall ring.
        height: Rows, including the wall ring.
        walls: Wall cells; must contain the whole outer ring.
        goals: Goal cells (not walls).

    Raises:
        ValueError: The outer ring is not all wall, or a goal is on a wall.
    """

    __slots__ = (
        "_picture",
        "_slot",
        "dead",
        "goal_dist",
        "goals",
        "height",
        "push",
        "steps",
        "walls",
        "width",
    )

    def __init__(self, width: int, height: int, walls: frozenset[int], goals: frozenset[int]):
        last = (height - 1) * width
        ring = {*range(width), *range(last, last + width)}
        ring.update(range(0, last, width), range(width - 1, last, width))
        if not ring <= walls:
            raise ValueError("the outer ring of a Sokoban board must be all wall ('#')")
        if goals & walls or not goals:
            raise ValueError("a Sokoban board needs at least one goal, none on a wall")
        self.width = width
        self.height = height
        self.walls = walls
        self.goals = goals
        self.steps = {"U": -width, "D": width, "L": -1, "R": 1}
        per_goal = [
            [abs(r - gr) + abs(c - gc) for r in range(height) for c in range(width)]
            for gr, gc in (divmod(g, width) for g in goals)
        ]
        self.goal_dist = tuple(map(min, *per_goal)) if len(per_goal) > 1 else tuple(per_goal[0])
        self.push = self._push_dist()
        """Pushes that bring a box from each cell to its nearest goal on an otherwise empty board
        (read-only). Cells missing here are dead: a box there can never reach a goal (a corner
        that is not a goal, for instance)."""
        self.dead = frozenset(range(width * height)) - walls - self.push.keys()
        # The static picture (ASCII bytes, a newline after each row) and each cell's place in it:
        # render() copies it and writes the moving parts in, the cheapest way to draw in Python.
        self._slot = tuple(i + i // width for i in range(width * height))
        cells = [FLOOR] * (width * height)
        for i in walls:
            cells[i] = WALL
        for i in goals:
            cells[i] = GOAL
        rows = ("".join(cells[r * width : (r + 1) * width]) for r in range(height))
        self._picture = "\n".join(rows).encode("ascii")

    def _push_dist(self) -> dict[int, int]:
        # Pull a box back from every goal, breadth first.
        dist = dict.fromkeys(self.goals, 0)
        frontier = list(self.goals)
        while frontier:
            nxt = []
            for cell in frontier:
                for step in self.steps.values():
                    # A box at cell+step is pushed to cell by a player standing at cell+2*step.
                    back, stand = cell + step, cell + 2 * step
                    if back in dist or back in self.walls or stand in self.walls:
                        continue
                    dist[back] = dist[cell] + 1
                    nxt.append(back)
            frontier = nxt
        return dist

    def distance(self, boxes: frozenset[int]) -> int:
        """Sum over boxes of the Manhattan distance to the nearest goal (the shaping's ``D``)."""
        gd = self.goal_dist
        return sum(gd[b] for b in boxes)

    def render(self, player: int, boxes: frozenset[int]) -> str:
        """The ASCII picture, one row per line (see the module docstring for the symbols)."""
        cells = bytearray(self._picture)
        slot, goals = self._slot, self.goals
        for b in boxes:
            cells[slot[b]] = _BOX_ON_GOAL if b in goals else _BOX
        cells[slot[player]] = _PLAYER_ON_GOAL if player in goals else _PLAYER
        return cells.decode("ascii")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Board) and (
            self.width,
            self.height,
            self.walls,
            self.goals,
        ) == (other.width, other.height, other.walls, other.goals)

    def __hash__(self) -> int:
        return hash((self.width, self.height, self.walls, self.goals))

    def __repr__(self) -> str:
        return f"Board(width={self.width}, height={self.height}, goals={sorted(self.goals)})"


# NamedTuple's own constructor goes through a Python-level __new__; this is the C one (as
# namedtuple's _make uses): the same object, built in a third of the time on the hot path.
_new_play = tuple.__new__


def player_region(board: Board, player: int, boxes: frozenset[int]) -> int:
    """The smallest cell the player can walk to without pushing a box.

    Two positions with the same walls, goals and boxes and the same region are one puzzle: the
    player walks from one spot to the other for free. A level's identity (e.g. to keep a test
    level out of training) uses this instead of the exact player cell.
    """
    blocked = board.walls | boxes
    steps = tuple(board.steps.values())
    seen = {player}
    todo = [player]
    while todo:
        cell = todo.pop()
        for step in steps:
            nxt = cell + step
            if nxt not in seen and nxt not in blocked:
                seen.add(nxt)
                todo.append(nxt)
    return min(seen)


def parse_level(text: str) -> Level:
    """Read a level from its ASCII picture (rows of equal length; ``' '`` also means floor).

    Raises:
        ValueError: Ragged rows, an unknown symbol, not exactly one player, fewer goals than
            boxes, or no box, with what was found.
    """
    rows = [row for row in text.strip("\n").split("\n") if row.strip()]
    width = len(rows[0]) if rows else 0
    if not rows or any(len(row) != width for row in rows):
        raise ValueError(
            f"a level needs rows of equal length, got lengths {[len(r) for r in rows]}"
        )
    walls: set[int] = set()
    goals: set[int] = set()
    boxes: set[int] = set()
    players: list[int] = []
    for i, ch in enumerate("".join(rows)):
        if ch not in _READ:
            raise ValueError(f"unknown symbol {ch!r} in a level; use one of {''.join(_READ)}")
        wall, goal, box, player = _READ[ch]
        for flag, into in ((wall, walls), (goal, goals), (box, boxes)):
            if flag:
                into.add(i)
        if player:
            players.append(i)
    if len(players) != 1 or not boxes or len(goals) < len(boxes):
        raise ValueError(
            f"a level needs one player, at least one box and as many goals as boxes; got "
            f"{len(players)} players, {len(boxes)} boxes, {len(goals)} goals"
        )
    board = Board(width, len(rows), frozenset(walls), frozenset(goals))
    return Level(board, players[0], frozenset(boxes))


def play(
    board: Board, player: int, boxes: frozenset[int], moves: tuple[str, ...], rewards: Rewards
) -> Play:
    """Apply ``moves`` (each ``U``, ``D``, ``L`` or ``R``) in order; see :class:`Rewards`.

    A failed move leaves the player where it is; the moves after it are still made. Moves after
    the one that solves the level are not read (``used`` counts the ones that were).
    """
    return _new_play(Play, play_fields(board, player, boxes, moves, rewards))


PlayFields = tuple[
    int, frozenset[int], float, tuple[str, ...], tuple[tuple[int, str], ...], int, int, bool
]
""":class:`Play`'s fields as a plain tuple, in the same order."""


def play_fields(
    board: Board, player: int, boxes: frozenset[int], moves: tuple[str, ...], rewards: Rewards
) -> PlayFields:
    """:func:`play` as a plain tuple of :class:`Play`'s fields (the env's hot path: a tuple is
    built in a quarter of a NamedTuple's time, and the env unpacks it at once)."""
    walls, goals, steps, gd = board.walls, board.goals, board.steps, board.goal_dist
    n_boxes = len(boxes)
    on_goal = len(boxes & goals)
    scale, gamma = rewards.shaping_scale, rewards.shaping_gamma
    # With gamma == 1 only pushes change the shaping, by the moved box's distance change, so the
    # total distance is tracked only when gamma < 1 adds a term to every move.
    dist = board.distance(boxes) if gamma != 1.0 else 0
    leak = scale * (1.0 - gamma)
    move_r, invalid_r = rewards.move, rewards.invalid
    reward = 0.0
    made: list[str] = []
    invalid: list[tuple[int, str]] = []
    used = 0
    for move in moves:
        if on_goal == n_boxes:
            break
        used += 1
        step = steps[move]
        nxt = player + step
        if nxt in boxes:
            dest = nxt + step
            if dest in walls or dest in boxes:
                invalid.append((used - 1, move))
                reward += invalid_r + leak * dist
                continue
            boxes = (boxes - {nxt}) | {dest}
            new_dist = dist - gd[nxt] + gd[dest]
            reward += scale * (dist - gamma * new_dist)
            dist = new_dist
            if nxt in goals:
                on_goal -= 1
                reward += rewards.box_off_goal
            if dest in goals:
                on_goal += 1
                reward += rewards.box_on_goal
                if on_goal == n_boxes:
                    reward += rewards.solved
        elif nxt in walls:
            invalid.append((used - 1, move))
            reward += invalid_r + leak * dist
            continue
        elif leak:
            reward += leak * dist
        player = nxt
        reward += move_r
        made.append(move)
    return player, boxes, reward, tuple(made), tuple(invalid), used, on_goal, on_goal == n_boxes
