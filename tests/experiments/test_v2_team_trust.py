"""experiments/v2_team_trust.py: which first reports of a v2 tool win the level."""

from __future__ import annotations

from functools import partial

from benchmark_scripts import load

import mas_envs

make_env = partial(
    mas_envs.make, "mas/PlanPathCode-v2", mode="mas", split="validation",
    rows=5, cols=5, wall_prob=0.22, max_turns=3,
)  # fmt: skip


def _oracle_report() -> tuple[object, str, str]:
    """A level, the oracle's program and the line it printed for the planner."""
    env = make_env()
    task_id = env.task_ids("validation")[0]
    env.reset(options={"task_id": task_id})
    program = env.oracle_action("tool")
    env.step(program)
    return task_id, program, env.observe("planner")["prompt"].rstrip().rsplit("\n", 1)[-1]


def test_the_oracle_report_is_right_and_its_reverse_is_wrong():
    kind = load("v2_team_trust").report_kind
    task_id, program, report = _oracle_report()
    assert report.startswith("#### ")
    assert kind(make_env, task_id, program, report) == "right"
    flip = str.maketrans("UDLR", "DURL")
    assert kind(make_env, task_id, program, report.translate(flip)) == "wrong"


def test_a_failed_program_prints_no_report():
    kind = load("v2_team_trust").report_kind
    task_id, _, _ = _oracle_report()
    env = make_env()
    env.reset(options={"task_id": task_id})
    env.step("no program")
    line = env.observe("planner")["prompt"].rstrip().rsplit("\n", 1)[-1]
    assert kind(make_env, task_id, "no program", line) == "none"


def test_the_oracle_team_gets_right_reports_and_its_planner_copies_them():
    trust = load("v2_team_trust")
    levels = load("v2_copy_probe").Levels(
        2, "validation", {"rows": 5, "cols": 5, "wall_prob": 0.22, "max_turns": 3}, 96
    )
    n = trust.trust("oracle", levels)
    assert n == {"right": 2, ("right", "won"): 2, ("right", "copied"): 2}
