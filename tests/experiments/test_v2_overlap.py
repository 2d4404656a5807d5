"""experiments/v2_overlap.py: the levels two players solve, paired, and the paired test."""

from __future__ import annotations

import pytest
from benchmark_scripts import load


def test_overlap_pairs_levels_and_either_is_the_union():
    script = load("v2_overlap")
    n = script.overlap([True, True, False, False], [True, False, True, False])
    assert (n["first"], n["second"], n["both"], n["either"], n["levels"]) == (2, 2, 1, 3, 4)
    assert (n["first only"], n["second only"]) == (1, 1)
    with pytest.raises(ValueError, match="3 levels of the first player against 2"):
        script.overlap([True] * 3, [True] * 2)


def test_the_line_names_the_players_and_tests_the_levels_only_one_solves():
    script = load("v2_overlap")
    # a team that solves 9 levels its tool misses and loses 1 it solves: p = 22/1024
    n = script.overlap([True] * 10 + [False], [False] * 9 + [True, True])
    assert script.line(n, ("mas", "tool")) == (
        "11 levels: team 10, tool alone 2, both 1, either 11; team only 9, tool alone only 1: "
        "exact McNemar p = 0.0215"
    )
    assert "(a team that always knew whom to follow)" in script.line(n, ("tool", "single"))
    two_teams = script.line(n, ("mas", "mas"))
    assert two_teams.startswith(
        "11 levels: team 1 10, team 2 2, both 1, either 11; team 1 only 9, team 2 only 1:"
    )
    # v2_chain reads the stored lines back: the names' digits are not counts
    match = load("v2_chain")._COUNTS.match(two_teams)
    assert match and match.groups() == ("11", "10", "2", "9", "1", "0.0215")
