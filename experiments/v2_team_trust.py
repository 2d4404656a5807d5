"""Does a ``mas/PlanPathCode-v2`` team's planner follow its tool's report, right or wrong?

Plays a team (a ``mas-train`` run folder or one of its checkpoints, each role by the policy that
trained it) greedily on the first ``--episodes`` levels of a split and sorts the levels by the
tool's first report, the line its first program printed for the planner:

* **right**: the report, answered as the planner's first move list, reaches the goal (the env
  replays it on the same level);
* **wrong**: it prints a move list that does not;
* **none**: the program printed no ``####`` line (it failed, or wrote no program).

For each kind it counts the levels the team solved and the first answers that were the report
exactly (the planner copied it). A planner that copies every report solves the "right" levels
and no "wrong" one at the first turn; a planner that checks the report solves some of both.

    python experiments/v2_team_trust.py RUN [--episodes 100] [--split validation]
        [--env-options '{"rows": 5, "cols": 5, "wall_prob": 0.22}'] [--max-new-tokens 96]
        [--threads 1]

Measured figures: docs/results.md, section "Design D: a planner that solves beside the copying
tool".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from v2_copy_probe import Levels, parse_args, play_first_levels  # a script beside this one

KINDS = ("right", "wrong", "none")


def report_kind(make_env: Callable[[], Any], task_id: Any, program: str, report: str) -> str:
    """``right``, ``wrong`` or ``none``: whether ``report`` (the last line of the planner's first
    prompt), played as the planner's first answer after the tool's ``program``, wins the level."""
    if not report.startswith("####"):
        return "none"
    env = make_env()
    env.reset(options={"task_id": task_id})
    env.step(program)
    env.step(report)
    return "right" if env.success else "wrong"


def trust(policy: str, levels: Levels) -> Counter[Any]:
    """Play the team on ``levels``; per report kind, the levels, the team's wins and the
    planner's exact copies of the report in its first answer."""
    make_env, tasks, played = play_first_levels(policy, "mas", levels)
    n: Counter[Any] = Counter()
    for task_id, ep in zip(tasks, played, strict=True):
        tool, planner = ep.transcript[0], ep.transcript[1]
        report = planner["prompt"].rstrip().rsplit("\n", 1)[-1].strip()
        kind = report_kind(make_env, task_id, tool["action"], report)
        n[kind] += 1
        n[kind, "won"] += bool(ep.success)
        n[kind, "copied"] += planner["action"].strip() == report
    return n


def main() -> None:
    args, levels = parse_args(
        __doc__, "a mas-train run folder or one of its checkpoints", episodes=100
    )
    n = trust(args.policy, levels)
    wins = sum(n[k, "won"] for k in KINDS)
    kinds = "; ".join(
        f"report {k} {n[k]} (team won {n[k, 'won']}, planner copied {n[k, 'copied']})"
        for k in KINDS
    )
    print(f"{args.policy}: team solved {wins}/{sum(n[k] for k in KINDS)}; {kinds}")


if __name__ == "__main__":
    main()
