"""Do two v2 players fail on the same levels? The team's ceiling, and a paired test.

Plays two players greedily on the same first ``--episodes`` levels of a split, each in its own
env mode (``--modes``; by default the tool alone, ``env.mode=tool``, and the single agent without
code, ``env.mode=single``), and counts the levels each solves, both solve, either solves and
only one solves, with the exact McNemar test on those last two counts (the levels pair up, so
their own difficulty leaves the comparison; ``paired_episodes.mcnemar_exact``).

For the tool alone against the single agent, "either" is what a team of the two could reach if
its planner always knew when to follow the tool's report and when to answer itself: the ceiling
of the paper's "two partial solvers whose errors do not coincide". A team below "either" is
losing levels to arbitration, not to its members' skill. With ``--modes mas tool`` (or ``mas
single``) the first player is a team, and the test says whether it beats that control level by
level. With one mode twice (``--modes mas mas``: two teams trained two ways, such as the tree
against parallel sampling) the players are named "team 1" and "team 2".

    python experiments/v2_overlap.py FIRST SECOND [--modes tool single] [--episodes 100]
        [--split validation] [--env-options '{"rows": 7, "cols": 7, "wall_prob": 0.22}']
        [--max-new-tokens 128] [--threads 1]

FIRST and SECOND: run folders or policy folders.
Measured figures: docs/v2-exploration.md, sections "Designs E to H on 7x7" and "Designs I to L
on 7x7".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from paired_episodes import mcnemar_exact  # scripts beside this one
from v2_copy_probe import parse_args, play_first_levels

NAMES = {"tool": "tool alone", "single": "single agent", "mas": "team"}


def overlap(first: Sequence[bool], second: Sequence[bool]) -> Counter[str]:
    """Per-level successes of the two, paired by level: each's count, both, either, each alone."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} levels of the first player against {len(second)}")
    n: Counter[str] = Counter()
    for a, b in zip(first, second, strict=True):
        n["first"] += a
        n["second"] += b
        n["both"] += a and b
        n["either"] += a or b
        n["first only"] += a and not b
        n["second only"] += b and not a
    n["levels"] = len(first)
    return n


def line(n: Counter[str], modes: tuple[str, str]) -> str:
    """The printed result: the counts, named by the players' modes, and the test."""
    a, b = (NAMES[m] for m in modes)
    if a == b:  # two runs of one mode (a team against another team): first and second
        a, b = f"{a} 1", f"{b} 2"
    both_members = set(modes) == {"tool", "single"}
    ceiling = " (a team that always knew whom to follow)" if both_members else ""
    p = mcnemar_exact(n["first only"], n["second only"])
    return (
        f"{n['levels']} levels: {a} {n['first']}, {b} {n['second']}, both {n['both']}, either "
        f"{n['either']}{ceiling}; {a} only {n['first only']}, {b} only {n['second only']}: "
        f"exact McNemar p = {p:.3g}"
    )


def main() -> None:
    args, levels = parse_args(
        __doc__,
        "the first player's run or policy folder (the tool alone's, by default)",
        episodes=100,
        second_help="the second player's run or policy folder (the single agent's, by default)",
        modes=("tool", "single"),
    )
    wins = []
    for policy, mode in zip((args.policy, args.second), args.modes, strict=True):
        played = play_first_levels(policy, mode, levels)[2]
        wins.append([bool(ep.success) for ep in played])
    print(line(overlap(*wins), tuple(args.modes)))


if __name__ == "__main__":
    main()
