"""Where a trained Plan-Path team wins and fails: the tool's programs, the planner's copies.

Plays a ``mas-train`` run of ``mas/PlanPathCode-v1`` (its latest checkpoint, each role by the
policy that trained it, greedy) on the first ``--episodes`` test levels and prints, per run:

* **success** and how many planner turns the episodes took (a team can reach the goal in a later
  turn after a wrong first answer: the tool's program runs again from where the agent stands);
* **tool programs**: how many distinct programs the tool wrote, and the most common one's share
  of all its turns (one program for every level: the tool's best answer does not depend on the
  level, it is a search that reads the grid from its stdin);
* **the planner** per turn: turns whose program printed a move list; how many of those the
  planner's answer ended at the goal; how many answers were that line exactly, and how many
  started with its moves (moves after the goal are ignored, so a copy with extra moves also wins).

docs/results.md ("Why the tree does not beat parallel sampling here") quotes it::

    python experiments/team_anatomy.py runs/compare4/plan-path-tiny/seed-*/mas-per-role \\
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
    from mas_trainer.eval.actors import resolve_policy
    from mas_trainer.eval.play import play
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
        printed: collections.Counter[int] = collections.Counter()
        reached: collections.Counter[int] = collections.Counter()
        exact: collections.Counter[int] = collections.Counter()
        prefix: collections.Counter[int] = collections.Counter()
        turns: collections.Counter[tuple[int, bool]] = collections.Counter()
        for ep in episodes:
            planner_turns = [s for s in ep.transcript if s["agent"] == "planner"]
            turns[(len(planner_turns), bool(ep.success))] += 1
            programs.update(s["action"] for s in ep.transcript if s["agent"] == "tool")
            for n, s in enumerate(planner_turns, 1):
                line = s["prompt"].rstrip().rsplit("\n", 1)[-1].strip()
                if not line.startswith("####"):  # the program's output is the prompt's last line
                    continue
                answer = s["action"].strip()
                printed[s["turn"]] += 1
                reached[s["turn"]] += bool(ep.success) and n == len(planner_turns)
                exact[s["turn"]] += answer == line
                prefix[s["turn"]] += answer.startswith(line)
        wins = sum(bool(ep.success) for ep in episodes)
        top = programs.most_common(1)[0][1] if programs else 0
        by_turns = ", ".join(
            f"{n} turn{'s' * (n != 1)}: {turns[(n, True)]} won, {turns[(n, False)]} lost"
            for n in sorted({n for n, _ in turns})
        )
        planner = "; ".join(
            f"turn {t + 1}: {printed[t]} printed a path, {reached[t]} answers reached the goal, "
            f"{exact[t]} were the line, {prefix[t]} started with its moves"
            for t in sorted(printed)
        )
        print(
            f"{run}: success {wins}/{len(episodes)} ({by_turns}); tool programs "
            f"{len(programs)} distinct, the commonest {top}/{sum(programs.values())} of its turns; "
            f"planner: {planner}",
            flush=True,
        )


if __name__ == "__main__":
    main()
