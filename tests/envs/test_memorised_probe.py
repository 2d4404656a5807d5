"""The memorised-text probe (mas_envs.policies.memorised_team): issue 29, claim 1."""

from __future__ import annotations

import pytest

import mas_envs
from mas_envs.planpath import prompts
from mas_envs.policies import copy_last_answer, memorised_success, memorised_team

SIZE = {"rows": 5, "cols": 5, "wall_prob": 0.22, "max_turns": 3}


def _maker(env_id: str):
    return lambda: mas_envs.make(env_id, **SIZE)


def test_copy_last_answer_takes_the_last_answer_line():
    env = mas_envs.make("mas/PlanPathCode-v1", **SIZE)
    env.reset(options={"task_id": env.task_ids("test")[0]})
    env.step("```python\nprint('#### R')\nprint('#### D, D')\n```")
    assert env.agent_selection == "planner"
    assert copy_last_answer(env, "planner") == "#### D, D"
    env.step("#### U")
    assert env.agent_selection == "tool"  # its prompt's last #### line is not an answer line
    assert copy_last_answer(env, "tool") == "####"


def test_memorised_team_answers_the_training_oracle_text():
    make = _maker("mas/PlanPathCode-v1")
    team = memorised_team(make, make().task_ids("train")[0])
    assert set(team) == {"tool", "planner"}
    env = make()
    env.reset(options={"task_id": env.task_ids("test")[3]})
    assert team["tool"](env, "tool") == prompts.oracle_program_v1()


def test_the_probe_finds_that_a_constant_program_solves_plan_path_code_v1():
    # v1's oracle program reads the grid from stdin: the same text solves every level (issue 29).
    assert memorised_success(_maker("mas/PlanPathCode-v1"), 20) == 1.0


def test_a_constant_move_list_solves_few_plan_path_levels():
    assert memorised_success(_maker("mas/PlanPath-v1"), 50) <= 0.2


def test_plan_path_code_v2_programs_get_no_input():
    env = mas_envs.make("mas/PlanPathCode-v2", **SIZE)
    env.reset(options={"task_id": env.task_ids("test")[0]})
    env.step(prompts.oracle_program_v1())  # reads the grid from stdin: there is none in v2
    assert not env.infos["tool"]["parsed"] and env.infos["tool"]["verdict"] == "runtime_error"
    env.step("#### U")
    env.step(env.oracle_action("tool"))  # the grid written into the program
    assert env.infos["tool"]["proposal_reaches_goal"]


@pytest.mark.parametrize("size", [5, 7])
def test_memorised_text_solves_at_most_a_fifth_of_plan_path_code_v2(size):
    # Issue 29, claim 1, on the 200 test levels a run reports (5x5: 38/200, 7x7: 30/200).
    def make():
        return mas_envs.make("mas/PlanPathCode-v2", rows=size, cols=size, max_turns=3)

    assert memorised_success(make, 200) <= 0.2


def test_the_tool_alone_answers_the_constant_program():
    def make(version):
        return lambda: mas_envs.make(f"mas/PlanPathCode-v{version}", mode="tool", **SIZE)

    team = memorised_team(make(1), make(1)().task_ids("train")[0])
    assert list(team) == ["tool"]
    assert memorised_success(make(1), 20) == 1.0  # v1: one program solves every level alone
    assert memorised_success(make(2), 200) <= 0.2  # v2: 38 of 200
