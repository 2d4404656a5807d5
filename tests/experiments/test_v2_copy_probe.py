"""experiments/v2_copy_probe.py: the cell-by-cell copy counts of a v2 tool program."""

from __future__ import annotations

import sys
from unittest import mock

import torch
from benchmark_scripts import load

import mas_envs

SIZE = {"rows": 5, "cols": 5, "wall_prob": 0.22, "max_turns": 3}


def _first_prompt_and_oracle() -> tuple[str, str]:
    env = mas_envs.make("mas/PlanPathCode-v2", mode="tool", **SIZE)
    env.reset(options={"task_id": env.task_ids("validation")[0]})
    return env.observe("tool")["prompt"], env.oracle_action("tool")


def test_the_oracle_program_copies_every_cell():
    prompt, oracle = _first_prompt_and_oracle()
    n = load("v2_copy_probe").copy_stats(prompt, oracle)
    assert n["cells"] == n["cells ok"] == 25
    assert (n["A ok"], n["G ok"], n["grids exact"], n["quotes closed"]) == (1, 1, 1, 1)
    assert n["walls"] == n["walls ok"]
    assert n["grid programs"] == 1


def test_a_program_that_prints_moves_writes_no_grid():
    prompt, _ = _first_prompt_and_oracle()
    n = load("v2_copy_probe").copy_stats(prompt, '```python\nprint("#### U, R")\n```')
    assert n["grid programs"] == n["cells ok"] == n["grids exact"] == 0
    assert n["cells"] == 25


def test_a_grid_of_dots_gets_only_the_free_cells_and_a_short_close_counts():
    prompt, oracle = _first_prompt_and_oracle()
    grid = oracle.split('"""')[1]
    dots = "".join("\n" if ch == "\n" else "." for ch in grid)
    program = oracle.replace(grid, dots).replace('"""', '""', 2).replace('g=""', 'g="""', 1)
    n = load("v2_copy_probe").copy_stats(prompt, program)
    assert n["walls ok"] == n["A ok"] == n["G ok"] == n["grids exact"] == 0
    assert n["cells ok"] == n["cells"] - n["walls"] - 2  # every free cell but A and G
    assert n["quotes closed"] == 0  # opened with three quotes, closed with two


def test_the_oracle_tool_copies_every_cell_of_the_levels_it_plays():
    probe = load("v2_copy_probe")
    n = probe.probe("oracle", probe.Levels(2, "validation", SIZE, max_new_tokens=96))
    assert n["programs"] == n["solved"] == n["grids exact"] == n["distinct programs"] == 2
    assert n["cells ok"] == n["cells"] == 50


def test_the_command_line_names_the_levels_and_keeps_the_rest():
    probe = load("v2_copy_probe")
    threads = ["--threads", str(torch.get_num_threads())]  # leave this process's threads as is
    with mock.patch.object(sys, "argv", ["prog", "oracle", *threads]):
        args, levels = probe.parse_args("doc", "policy", episodes=50)
    assert args.policy == "oracle"
    assert levels == probe.Levels(50, "validation", {"rows": 5, "cols": 5, "wall_prob": 0.22}, 96)
    flags = ["--episodes", "3", "--split", "train", "--env-options", '{"rows": 7}']
    argv = ["prog", "run", "other", *flags, "--max-new-tokens", "128", "--mode", "tool", *threads]
    with mock.patch.object(sys, "argv", argv):
        args, levels = probe.parse_args("doc", "policy", 100, mode="mas", second_help="second")
    assert (args.policy, args.second, args.mode) == ("run", "other", "tool")
    assert levels == probe.Levels(3, "train", {"rows": 7}, 128)
