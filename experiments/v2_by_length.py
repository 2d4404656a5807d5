"""Where a ``mas/PlanPathCode-v2`` policy wins: levels by shortest-path length and detour.

Plays a policy (the single agent, the tool alone or the team: ``--mode``) greedily on the first
``--episodes`` levels of a split and counts the levels won per kind of level:

* ``<=4``, ``5-8``, ``9+``: the length of the level's shortest path from the start;
* ``direct`` or ``detour``: whether that length is the Manhattan distance from start to goal, or
  longer (walls force a detour).

A tool that copies the level into its program solves every kind alike when its copy is right;
a planner that answers from the grid loses the long and the detour levels first. Comparing the
rows of one split shows on which levels a team's members add to each other.

    python experiments/v2_by_length.py POLICY [--mode mas] [--episodes 100]
        [--split validation] [--env-options '{"rows": 7, "cols": 7, "wall_prob": 0.22}']
        [--max-new-tokens 128] [--threads 1]

Measured figures: docs/v2-exploration.md, section "Designs E to H on 7x7".
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from v2_copy_probe import Levels, parse_args, play_first_levels  # a script beside this one

LENGTHS = ("<=4", "5-8", "9+")


def level_kind(level: Any) -> tuple[str, str]:
    """``(length, route)`` of a Plan-Path level: its shortest path's length bucket, and
    ``"detour"`` when that path is longer than the Manhattan distance, else ``"direct"``."""
    (r0, c0), (r1, c1) = level.rc(level.start), level.rc(level.goal)
    length = "<=4" if level.optimum <= 4 else "5-8" if level.optimum <= 8 else "9+"
    return length, "detour" if level.optimum > abs(r0 - r1) + abs(c0 - c1) else "direct"


def by_length(policy: str, mode: str, levels: Levels) -> Counter[Any]:
    """Play ``policy`` on ``levels`` in ``mode``; per level kind, the levels and those won
    (``(kind, "won")``)."""
    make_env, tasks, played = play_first_levels(policy, mode, levels)
    env = make_env()
    n: Counter[Any] = Counter()
    for task_id, ep in zip(tasks, played, strict=True):
        env.reset(options={"task_id": task_id})
        kind = level_kind(env.level)
        n[kind] += 1
        n[kind, "won"] += bool(ep.success)
    return n


def main() -> None:
    args, levels = parse_args(
        __doc__, "a mas-train run folder, a policy folder, or oracle", 100, "mas"
    )
    n = by_length(args.policy, args.mode, levels)
    kinds = [(length, route) for route in ("direct", "detour") for length in LENGTHS]
    cells = "; ".join(f"{a} {b}: {n[(a, b), 'won']}/{n[(a, b)]}" for a, b in kinds)
    won = sum(n[k, "won"] for k in kinds)
    print(f"{args.policy} ({args.mode}): solved {won}/{sum(n[k] for k in kinds)}; {cells}")


if __name__ == "__main__":
    main()
