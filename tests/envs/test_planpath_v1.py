"""Plan-Path v1 (mas/PlanPath-v1, mas/PlanPathCode-v1): the tool's team term, the stdin oracle
program, the short code prompts whose planner prompt ends with the program's output."""

from __future__ import annotations

import numpy as np
import pytest
from test_plan_code import fenced, run_in_process
from test_planpath import hand_level

import mas_envs
from mas_envs import sandbox
from mas_envs.planpath import PlanPathEnv, grid, prompts
from mas_envs.planpath.env import VERSIONS
from mas_envs.sandbox import ExecResult, Verdict


def hand_env(env_id: str, **kwargs) -> PlanPathEnv:
    """The hand level of test_planpath (3 x 4, start (0, 0), goal (0, 2), optimum 6)."""
    env = mas_envs.make(env_id, rows=3, cols=4, **kwargs)
    env.reset(seed=0)
    env._set_level(hand_level())
    return env


@pytest.fixture
def fake_sandbox(monkeypatch):
    def install(stdout: str, verdict: Verdict = Verdict.ok) -> None:
        result = ExecResult(verdict, 0, stdout, "", 0.01)
        monkeypatch.setattr(sandbox, "run_python", lambda code, **kw: result)
        monkeypatch.setattr(sandbox, "run_many", lambda jobs, **kw: [result for _ in jobs])

    return install


# ---------------------------------------------------------------------------- rewards


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_v1_tool_reward_has_the_team_term(alpha, fake_sandbox):
    fake_sandbox("#### D, D, R, R, U, U\n")
    best = "#### D, D, R, R, U, U"
    for plan_id, code_id in (("mas/PlanPath-v0", "mas/PlanPathCode-v0"),
                             ("mas/PlanPath-v1", "mas/PlanPathCode-v1")):  # fmt: skip
        for env_id, action in ((plan_id, best), (code_id, fenced("print('x')"))):
            env = hand_env(env_id, alpha=alpha)
            env.step(action)
            info = env.infos["tool"]
            assert info["local_reward"] == pytest.approx(3.57), env_id  # the optimal path
            v1 = env_id.endswith("-v1")
            assert info["team_reward"] == (1.0 if v1 else 0.0), env_id
            assert env.rewards["tool"] == pytest.approx(3.57 + (alpha if v1 else 0.0)), env_id
            assert not env.success and env.position == (0, 0)  # the real env never moved


def test_v1_tool_team_term_only_when_the_proposal_reaches_the_goal():
    env = hand_env("mas/PlanPath-v1")
    env.step("#### D, D, R")
    assert env.infos["tool"]["team_reward"] == 0.0
    assert env.rewards["tool"] == pytest.approx(env.infos["tool"]["local_reward"])


def test_planner_rewards_and_single_mode_are_the_same_in_v0_and_v1():
    for mode in ("mas", "single"):
        a, b = (
            mas_envs.make(i, mode=mode, rows=5, cols=5)
            for i in ("mas/PlanPath-v0", "mas/PlanPath-v1")
        )
        for env in (a, b):
            env.reset(options={"task_id": 11})
        if mode == "mas":
            for env in (a, b):
                env.step("#### U")
        assert a.observe("planner") == b.observe("planner")
        action = a.oracle_action("planner")
        a.step(action)
        b.step(action)
        assert a.infos["planner"] == b.infos["planner"]


def test_bad_version_is_a_clear_error():
    with pytest.raises(ValueError, match=r"version must be one of \[0, 1, 2\]"):
        PlanPathEnv(version=3)
    with pytest.raises(ValueError, match="tool_mode='code'"):
        PlanPathEnv(version=2)  # v2 is the code variant only (mas/PlanPathCode-v2)
    assert VERSIONS == (0, 1, 2)


# ---------------------------------------------------------------------------- the oracle program


@pytest.mark.parametrize(("rows", "cols"), [(4, 4), (5, 5), (10, 10), (3, 7)])
def test_v1_oracle_program_reads_stdin_and_finds_shortest_paths(rows, cols):
    env = mas_envs.make("mas/PlanPathCode-v1", rows=rows, cols=cols)
    texts = set()
    for task_id in range(60):
        env.reset(options={"task_id": task_id})
        reply = env.oracle_action("tool")
        texts.add(reply)
        out = run_in_process(reply, env._tool_stdin())
        moves = tuple(out.split("####")[-1].replace(",", " ").split())
        assert len(moves) == env.level.dist[env.level.start], task_id
        assert grid.run_moves(env.level, env.level.start, moves, 0)[4], task_id
    assert texts == {prompts.oracle_program_v1()}  # one text for every level: it reads stdin
    assert len(prompts.oracle_program_v1()) < 300


def test_v1_oracle_program_in_the_sandbox_earns_the_optimal_reward():
    env = mas_envs.make("mas/PlanPathCode-v1", rows=5, cols=5, split="test")
    for task_id in env.task_ids("test")[:3]:
        env.reset(options={"task_id": task_id})
        env.step(env.oracle_action())
        info = env.infos["tool"]
        assert info["verdict"] == "ok" and info["proposal_reaches_goal"]
        d = env.level.dist[env.level.start]
        assert info["local_reward"] > d  # about d of shaping + 1.0 goal + 0.5 bonus - costs
        env.step(env.oracle_action())  # the planner plays the program's moves: solved
        assert env.success


# ---------------------------------------------------------------------------- prompts


def test_v1_planner_prompt_ends_with_what_the_program_printed(fake_sandbox):
    fake_sandbox("searching...\n#### D, D, R, R, U, U\n")
    env = hand_env("mas/PlanPathCode-v1")
    tool_prompt = env.observe("tool")["prompt"]
    assert tool_prompt.endswith(prompts.CODE_ASK_V1)
    assert "Agent at row 0, column 0. Goal at row 0, column 2." in tool_prompt
    env.step(fenced("print('anything')"))
    prompt = env.observe("planner")["prompt"]
    assert prompt.endswith(
        f"{prompts.PLANNER_ASK_V1}\nThe tool agent's program printed:\n"
        "searching...\n#### D, D, R, R, U, U"
    )
    assert "```" not in prompt  # the code is not shown in v1
    # The planner's oracle answer keeps the tool's proposal when it is a shortest path.
    assert env.oracle_action() == "#### D, D, R, R, U, U"


@pytest.mark.parametrize(
    ("reply", "stdout", "verdict", "ending"),
    [
        ("#### D", "", Verdict.ok, "wrote no program (its answer had no ```python block)."),
        (
            fenced("x"),
            "",
            Verdict.runtime_error,
            "failed (runtime_error): it stopped with an error.",
        ),
        (fenced("x"), "", Verdict.timeout, "failed (timeout): it ran out of time."),
        (fenced("print()"), "\n", Verdict.ok, "printed nothing."),
        (fenced("print('x'*9999)"), "x" * 9999 + "\n", Verdict.ok, "x" * 196),
    ],
)
def test_v1_planner_prompt_when_the_program_gave_no_moves(
    reply, stdout, verdict, ending, fake_sandbox
):
    fake_sandbox(stdout, verdict)
    env = hand_env("mas/PlanPathCode-v1")
    env.step(reply)
    assert env.infos["tool"]["local_reward"] == -1.0 and env.infos["tool"]["reason"]
    prompt = env.observe("planner")["prompt"]
    assert prompt.endswith(ending), prompt[-300:]
    assert len(prompt) < 700
    # Then the planner's oracle answer is the shortest path.
    assert env.oracle_action() == "#### D, D, R, R, U, U"


def test_v1_code_prompts_are_short_for_a_tiny_model():
    env = mas_envs.make("mas/PlanPathCode-v1", rows=5, cols=5, split="test")
    env.reset(options={"task_id": env.task_ids("test")[0]})
    tool = env.observe("tool")["prompt"]
    env.step(env.oracle_action())
    planner = env.observe("planner")["prompt"]
    v0 = mas_envs.make("mas/PlanPathCode-v0", rows=5, cols=5, split="test")
    v0.reset(options={"task_id": env.task_ids("test")[0]})
    v0_tool = v0.observe("tool")["prompt"]
    v0.step(v0.oracle_action())
    assert len(tool) < 0.5 * len(v0_tool) and len(planner) < 0.5 * len(
        v0.observe("planner")["prompt"]
    )


# ---------------------------------------------------------------------------- near misses


def _report(env: PlanPathEnv, text: str) -> tuple[str, ...]:
    """The moves a tool answer reports: its program's output, or the move list itself."""
    if "```" in text:
        text = run_in_process(text, env._tool_stdin())
    return prompts.parse_answer(text, 1000).moves


@pytest.mark.parametrize(
    "env_id", ["mas/PlanPath-v1", "mas/PlanPathCode-v1", "mas/PlanPathCode-v2"]
)
def test_a_near_miss_is_the_shortest_path_on_the_level_with_walls_misread_as_free(env_id):
    env = mas_envs.make(env_id, rows=6, cols=6)
    rng = np.random.default_rng(0)
    kinds = set()
    for seed in range(40):
        env.reset(seed=seed)
        level, cell = env.level, env._cell
        truth = grid.shortest_path(level, cell)
        assert _report(env, env.near_miss_action(rng, "tool", wall_miss=0.0)) == truth
        open_level = grid.make_level(6, 6, (False,) * 36, cell, level.goal)
        no_walls = _report(env, env.near_miss_action(rng, "tool", wall_miss=1.0))
        assert no_walls == grid.shortest_path(open_level, cell)
        moves = _report(env, env.near_miss_action(rng, "tool", wall_miss=0.5))
        blocked = grid.run_moves(level, cell, moves, 0)[3]
        kinds.add("right" if moves == truth else "blocked" if blocked else "other")
    # Some misreadings change nothing on the path, others send it through a wall.
    assert {"right", "blocked"} <= kinds
