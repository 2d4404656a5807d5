"""How well a trained tool copies the level into its program on ``mas/PlanPathCode-v2``.

In v2 the tool's program gets no input, so it must write the grid its prompt shows into its
code (``g=\"\"\"`` then the rows, then ``\"\"\".split()``). Success alone hides how far a tool
is from that copy; this probe plays the tool alone greedily on the first ``--episodes`` levels of
a split and compares the grid of each first-turn program with the prompt's, cell by cell:

* ``cells``: grid cells written correctly (a missing cell counts as wrong); writing every cell
  as ``.`` scores 877/1250 = 70% on the first 50 validation levels of 5x5 with 22% walls (every
  free cell; no wall, ``A`` or ``G``);
* ``walls``, ``A``, ``G``: of the level's walls, agents and goals, those at the right place;
* ``grids exact``: programs whose grid is the level's, row for row;
* ``quotes closed``: programs that open and close the string with three quotes;
* ``grid programs``: programs that write a grid at all (``g=`` and a quoted block), against
  programs that only print a move list (the random replies of a warm start whose tool oracle
  share is below 1), and the levels solved by the former;
* ``distinct programs``: how many different first-turn programs the levels got, and on how
  many levels the commonest one was written (one program everywhere = memorised text).

    python experiments/v2_copy_probe.py POLICY [--episodes 50] [--split validation]
        [--env-options '{"rows": 5, "cols": 5, "wall_prob": 0.22}'] [--max-new-tokens 96]
        [--threads 1]

POLICY: a ``mas-train`` run folder (its latest checkpoint; the run's ``tool`` or ``shared``
policy plays the tool), a checkpoint's policy folder, or ``oracle``. Measured figures:
docs/results.md, section "The default on mas/PlanPathCode-v2".
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

_GRID_IN_PROMPT = re.compile(r"Grid \(.*?\):\n(.*?)\nAgent at", re.S)
_GRID_IN_PROGRAM = re.compile(r'g=("+)\n(.*?)\n("+)', re.S)


def copy_stats(prompt: str, program: str) -> Counter[str]:
    """The copy counts of one first-turn ``program`` against the grid of its ``prompt``."""
    shown = _GRID_IN_PROMPT.search(prompt)
    if shown is None:
        raise ValueError("the prompt shows no grid: is this a mas/PlanPathCode-v2 tool prompt?")
    truth = shown.group(1).split("\n")
    written = _GRID_IN_PROGRAM.search(program)
    rows = written.group(2).split("\n") if written else []
    n: Counter[str] = Counter(programs=1)
    n["grid programs"] += written is not None
    n["quotes closed"] += bool(written and written.group(1) == written.group(3) == '"""')
    n["grids exact"] += rows == truth
    for r, row in enumerate(truth):
        for c, cell in enumerate(row):
            ok = r < len(rows) and c < len(rows[r]) and rows[r][c] == cell
            n["cells"] += 1
            n["cells ok"] += ok
            kind = {"#": "walls", "A": "A", "G": "G"}.get(cell)
            if kind:
                n[kind] += 1
                n[kind + " ok"] += ok
    return n


class Levels(NamedTuple):
    """The levels of ``mas/PlanPathCode-v2`` a v2 probe plays, and each answer's token limit."""

    episodes: int
    """How many levels to play: the first of the split, in order (``--episodes``)."""
    split: str
    """The split to play (``--split``)."""
    env_options: dict[str, Any]
    """The env's constructor arguments (``--env-options``, parsed from JSON)."""
    max_new_tokens: int
    """Token limit of each answer, the run's ``rollout.max_new_tokens`` (``--max-new-tokens``)."""


def play_first_levels(
    policy: str, mode: str, levels: Levels
) -> tuple[Callable[[], Any], list[Any], list[Any]]:
    """Play ``policy`` (each role by the policy that trained it) greedily on ``levels`` in
    ``mode``: the env factory, the levels' task ids and their episodes, in order."""
    from mas_trainer.eval.actors import resolve_policy
    from mas_trainer.eval.play import play
    from mas_trainer.rollout import env_factory

    make_env = env_factory(
        "mas/PlanPathCode-v2", mode=mode, split=levels.split, **levels.env_options
    )
    env = make_env()
    setup = resolve_policy(
        policy,
        list(env.possible_agents),
        max_new_tokens=levels.max_new_tokens,
        system_message=False,
        hash_weights=False,
    )
    tasks = list(env.task_ids(levels.split)[: levels.episodes])
    return make_env, tasks, play(make_env, tasks, setup.act)


def parse_args(
    doc: str,
    policy_help: str,
    episodes: int,
    mode: str | None = None,
    second_help: str | None = None,
    modes: tuple[str, str] | None = None,
) -> tuple[argparse.Namespace, Levels]:
    """The command line of a v2 probe (a policy, the levels, the env's options, torch's
    threads; with ``mode`` given the env mode, that its default; with ``second_help`` a second
    policy, ``second``; with ``modes`` the two policies' env modes, those their defaults), with
    torch's threads set: the parsed arguments and the levels they name."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("policy", help=policy_help)
    if second_help is not None:
        parser.add_argument("second", help=second_help)
    parser.add_argument(
        "--episodes", type=int, default=episodes, help="levels of the split to play"
    )
    parser.add_argument("--split", default="validation", help="split to play")
    if mode is not None:
        parser.add_argument(
            "--mode",
            default=mode,
            choices=("single", "tool", "mas"),
            help="who plays: the planner alone, the tool alone, or the team",
        )
    if modes is not None:
        parser.add_argument(
            "--modes",
            nargs=2,
            default=list(modes),
            choices=("single", "tool", "mas"),
            help="the env mode of each policy: the planner alone, the tool alone, or the team",
        )
    parser.add_argument(
        "--env-options",
        default='{"rows": 5, "cols": 5, "wall_prob": 0.22}',
        help="env constructor arguments as JSON",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=96,
        help="token limit of each answer, the run's rollout.max_new_tokens (7x7 runs: 128)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    levels = Levels(args.episodes, args.split, json.loads(args.env_options), args.max_new_tokens)
    return args, levels


def probe(policy: str, levels: Levels) -> Counter[str]:
    """Play the tool alone on ``levels``; the summed copy counts of their first-turn programs,
    the levels solved, those of them whose first program wrote a grid, and how many distinct
    first programs there were (and the commonest's count)."""
    played = play_first_levels(policy, "tool", levels)[2]
    total: Counter[str] = Counter()
    firsts = Counter(ep.transcript[0]["action"] for ep in played)
    total["distinct programs"] = len(firsts)
    total["commonest program"] = max(firsts.values(), default=0)
    for ep in played:
        first = ep.transcript[0]
        n = copy_stats(first["prompt"], first["action"])
        n["solved"] += ep.success
        n["solved by grid programs"] += ep.success and n["grid programs"]
        total += n
    return total


def main() -> None:
    args, levels = parse_args(
        __doc__, "a mas-train run folder, a policy folder, or oracle", episodes=50
    )
    n = probe(args.policy, levels)
    share = {k: f"{n[k + ' ok']}/{n[k]}" for k in ("cells", "walls", "A", "G")}
    print(
        f"{args.policy}: solved {n['solved']}/{n['programs']}; cells {share['cells']}, walls "
        f"{share['walls']}, A {share['A']}, G {share['G']}; grids exact "
        f"{n['grids exact']}/{n['programs']}; quotes closed {n['quotes closed']}/{n['programs']}; "
        f"grid programs {n['grid programs']}/{n['programs']} "
        f"(solved {n['solved by grid programs']}); "
        f"distinct programs {n['distinct programs']} (the commonest on {n['commonest program']})"
    )


if __name__ == "__main__":
    main()
