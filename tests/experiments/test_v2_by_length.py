"""experiments/v2_by_length.py: the kinds of Plan-Path levels a policy wins."""

from __future__ import annotations

from benchmark_scripts import load

from mas_envs.planpath import grid


def hand_level(rows: list[str]) -> grid.Level:
    """A level drawn as rows: ``S`` start, ``G`` goal, ``#`` wall."""
    cells = "".join(rows)
    walls = tuple(ch == "#" for ch in cells)
    return grid.make_level(len(rows), len(rows[0]), walls, cells.index("S"), cells.index("G"))


def test_a_level_is_sorted_by_its_shortest_path_and_whether_walls_force_a_detour():
    level_kind = load("v2_by_length").level_kind
    # A wall between start and goal: 6 moves where the Manhattan distance is 2.
    assert level_kind(hand_level(["S#G.", ".#..", "...."])) == ("5-8", "detour")
    direct = hand_level(["S.G.", "....", "...."])
    assert level_kind(direct) == ("<=4", "direct")
    far = hand_level(["S...", "....", "....", "....", "....", "...G"])
    assert far.optimum == 8 and level_kind(far) == ("5-8", "direct")
    longest = hand_level(["S....", ".....", ".....", ".....", ".....", "....G"])
    assert level_kind(longest) == ("9+", "direct")
