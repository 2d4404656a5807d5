"""experiments/v2_overlap.py: the levels a tool and a single agent solve, paired."""

from __future__ import annotations

import pytest
from benchmark_scripts import load


def test_overlap_pairs_levels_and_either_is_the_union():
    overlap = load("v2_overlap").overlap
    n = overlap([True, True, False, False], [True, False, True, False])
    assert (n["tool"], n["single"], n["both"], n["either"], n["levels"]) == (2, 2, 1, 3, 4)
    with pytest.raises(ValueError, match="3 tool levels against 2"):
        overlap([True] * 3, [True] * 2)
