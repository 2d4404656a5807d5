"""Where a trained Plan-Path team wins and fails: the tool's programs, the planner's copies.

Plays a ``mas-train`` run of ``mas/PlanPathCode-v1`` (its latest checkpoint, each role by the
policy that trained it, greedy) on the first ``--episodes`` test levels and prints, per run:

* **success** and how many planner turns the episodes took (a team can reach the goal in a later
  turn after a wrong first answer: the tool's program runs again from where the agent stands);
* **tool programs**: how many distinct programs the tool wrote, and the most common one's share
  of all its turns (one program for every level: the tool's best answer does not depend on the
  level, it is a search that reads the grid from its stdin);
* **planner copies** per turn: turns whose program printed a move list, and how many of those
  the planner answered with exactly that line.

docs/results.md ("Why the tree does not beat parallel sampling here") quotes it::

    python benchmarks/team_anatomy.py runs/compare4/plan-path-tiny/seed-*/mas-per-role \\
        runs/compare4/plan-path-tiny/seed-*/mas-parallel
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="mas-train run folders")
    parser.add_argument("--episodes", type=int, default=200, help="first N test levels")
    args = parser.parse_args()
    if args.episodes < 1:
        parser.error("--episodes must be at least 1")

    import torch

    from mas_trainer.config import config_from_dict
    from mas_trainer.eval.play import play
    from mas_trainer.eval.policies import resolve_policy
    from mas_trainer.rollout import env_factory

    torch.set_num_threads(1)
    for run in args.runs:
        cfg = config_from_dict(json.loads((run / "config.json").read_text()))
        if cfg.env.id != "mas/PlanPathCode-v1":
            parser.error(f"{run} trained {cfg.env.id}; this script reads mas/PlanPathCode-v1 runs")
        make_env = env_factory(cfg.env.id, mode="mas", split="test", **cfg.env.options)
        probe = make_env()
        setup = resolve_policy(
            str(run), list(probe.possible_agents), max_new_tokens=cfg.rollout.max_new_tokens,
            seed=0, system_message=cfg.rollout.system_message, hash_weights=False,
        )  # fmt: skip
        episodes = play(make_env, probe.task_ids("test")[: args.episodes], setup.act)
        programs: collections.Counter[str] = collections.Counter()
        printed_moves: collections.Counter[int] = collections.Counter()
        copied: collections.Counter[int] = collections.Counter()
        turns: collections.Counter[tuple[int, bool]] = collections.Counter()
        for ep in episodes:
            planner_turns = [s for s in ep.transcript if s["agent"] == "planner"]
            turns[(len(planner_turns), bool(ep.success))] += 1
            programs.update(s["action"] for s in ep.transcript if s["agent"] == "tool")
            for s in planner_turns:
                line = s["prompt"].rstrip().rsplit("\n", 1)[-1].strip()
                if line.startswith("####"):  # the program's output is the prompt's last line
                    printed_moves[s["turn"]] += 1
                    copied[s["turn"]] += s["action"].strip() == line
        wins = sum(bool(ep.success) for ep in episodes)
        top = programs.most_common(1)[0][1] if programs else 0
        by_turns = ", ".join(
            f"{n} turn{'s' * (n != 1)}: {turns[(n, True)]} won, {turns[(n, False)]} lost"
            for n in sorted({n for n, _ in turns})
        )
        copies = ", ".join(
            f"turn {t + 1} {copied[t]}/{printed_moves[t]}" for t in sorted(printed_moves)
        )
        print(
            f"{run}: success {wins}/{len(episodes)} ({by_turns}); tool programs "
            f"{len(programs)} distinct, the commonest {top}/{sum(programs.values())} of its turns; "
            f"planner copied the printed moves: {copies}",
            flush=True,
        )


if __name__ == "__main__":
    main()
