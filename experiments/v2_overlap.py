"""Do a v2 tool alone and a single agent fail on the same levels? The team's ceiling.

Plays the tool alone (``env.mode=tool``) and the single agent without code
(``env.mode=single``) greedily on the same first ``--episodes`` levels of a split and counts the
levels each solves, both solve and either solves. "Either" is what a team of the two could
reach if its planner always knew when to follow the tool's report and when to answer itself:
the ceiling of the paper's "two partial solvers whose errors do not coincide". A team below
"either" is losing levels to arbitration, not to its members' skill.

    python experiments/v2_overlap.py TOOL SINGLE [--episodes 100] [--split validation]
        [--env-options '{"rows": 7, "cols": 7, "wall_prob": 0.22}'] [--max-new-tokens 128]
        [--threads 1]

TOOL and SINGLE: run folders or policy folders (the tool alone's, the single agent's).
Measured figures: docs/v2-exploration.md, section "Designs E to H on 7x7".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from v2_copy_probe import parse_args, play_first_levels  # a script beside this one


def overlap(tool: Sequence[bool], single: Sequence[bool]) -> Counter[str]:
    """Per-level successes of the two, paired by level: each's count, both, either."""
    if len(tool) != len(single):
        raise ValueError(f"{len(tool)} tool levels against {len(single)} single-agent levels")
    n: Counter[str] = Counter()
    for t, s in zip(tool, single, strict=True):
        n["tool"] += t
        n["single"] += s
        n["both"] += t and s
        n["either"] += t or s
    n["levels"] = len(tool)
    return n


def main() -> None:
    args, levels = parse_args(
        __doc__,
        "the tool alone's run or policy folder",
        episodes=100,
        second_help="the single agent's run or policy folder",
    )
    wins = {}
    for policy, mode in ((args.policy, "tool"), (args.second, "single")):
        played = play_first_levels(policy, mode, levels)[2]
        wins[mode] = [bool(ep.success) for ep in played]
    n = overlap(wins["tool"], wins["single"])
    print(
        f"{n['levels']} levels: tool alone {n['tool']}, single agent {n['single']}, both "
        f"{n['both']}, either {n['either']} (a team that always knew whom to follow)"
    )


if __name__ == "__main__":
    main()
