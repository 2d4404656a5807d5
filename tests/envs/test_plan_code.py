"""Plan code: the game envs' tool agent writes a program printing its plan (``tool_mode="code"``).

Shared machinery (:mod:`mas_envs.programs`: extraction, the cached sandbox runner, prompt text)
from small tables; then each game: the oracle programs are right on many levels (run in-process,
they are our own code) and in the real sandbox, failures get a penalty with a reason, the planner
sees the program, its output and the plan, clones share the cache, ``prefetch`` runs K candidates
in one pooled call, and ``mode="single"`` and ``tool_mode="plan"`` texts do not change.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import numpy as np
import pytest

import mas_envs
from mas_envs import programs, sandbox
from mas_envs.planpath import PlanPathEnv, grid
from mas_envs.programs import ProgramRunner, extract_code, runner_for, tool_program
from mas_envs.sandbox import ExecResult, Verdict
from mas_envs.sokoban import SokobanEnv
from mas_envs.sokoban.board import play
from mas_envs.sudoku import SudokuEnv

CODE_IDS = [
    "mas/SokobanCode-v0",
    "mas/PlanPathCode-v0",
    "mas/PlanPathCode-v1",
    "mas/PlanPathCode-v2",
    "mas/SudokuCode-v0",
]


def plan_id(code_id: str) -> str:
    """The plan-mode id whose texts a code id shares outside the tool's program (PlanPathCode-v2
    is v1 but for the program's input: there is no PlanPath-v2)."""
    return code_id.replace("Code", "").replace("PlanPath-v2", "PlanPath-v1")


def fenced(code: str) -> str:
    return f"Here is my program.\n```python\n{code}\n```\nIt prints the plan."


def run_in_process(reply: str, stdin: str = "") -> str:
    """Run one of OUR OWN oracle programs here (fast; model code only ever runs in the sandbox)."""
    code = extract_code(reply, bare=False)
    assert code is not None
    out = io.StringIO()
    old_stdin, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<oracle>", "exec"), {"__name__": "__main__"})
    finally:
        sys.stdin = old_stdin
    return out.getvalue()


class FakeSandbox:
    """Stands in for the sandbox: answers every run with ``result`` and counts the calls."""

    def __init__(self, result: ExecResult) -> None:
        self.result = result
        self.single = 0
        self.batches: list[int] = []

    def run_python(self, code, **kwargs):
        self.single += 1
        return self.result

    def run_many(self, jobs, **kwargs):
        self.batches.append(len(jobs))
        return [self.result for _ in jobs]


def ok(stdout: str) -> ExecResult:
    return ExecResult(Verdict.ok, 0, stdout, "", 0.01)


@pytest.fixture
def fake(monkeypatch):
    def install(result: ExecResult) -> FakeSandbox:
        box = FakeSandbox(result)
        monkeypatch.setattr(sandbox, "run_python", box.run_python)
        monkeypatch.setattr(sandbox, "run_many", box.run_many)
        return box

    return install


# ---------------------------------------------------------------------------- extraction

EXTRACT = [
    # (reply, program with bare=False, program with bare=True)
    ("```python\nprint(1)\n```", "print(1)\n", "print(1)\n"),
    ("draft\n```py\nprint(1)\n```\nfinal\n```python\nprint(2)\n```", "print(2)\n", "print(2)\n"),
    ("```\nprint(3)\n```", "print(3)\n", "print(3)\n"),
    ("```python\nprint(4)\n", "print(4)\n", "print(4)\n"),  # cut off by the token limit
    ("```python\nprint(5)\n```\n```text\n#### U\n```", "print(5)\n", "print(5)\n"),
    ("```text\n#### U\n```", None, None),
    (
        "<think>```python\nprint(0)\n```</think>\n```python\nprint(6)\n```",
        "print(6)\n",
        "print(6)\n",
    ),
    ("<think>```python\nprint(0)\n```", None, None),  # still thinking: no answer yet
    ("print(7)", None, "print(7)\n"),  # no fence: only the code env takes bare programs
    ("#### U, R", None, "#### U, R\n"),  # a comment is a (bare) program
    ("I would use a BFS.", None, None),
    ("```python\n\n```", None, None),
    ("", None, None),
]


@pytest.mark.parametrize(("text", "fenced_only", "bare"), EXTRACT)
def test_extract_code_table(text, fenced_only, bare):
    assert extract_code(text, bare=False) == fenced_only
    assert extract_code(text) == bare


def test_extraction_of_hostile_fences():
    # Many fences (a line scan, linear in the text), empty ones, and backticks that are no fence.
    assert extract_code("```python\nx = 1\n```\n" * 50_000, bare=False) == "x = 1\n"
    assert extract_code("```\n" * 100_001, bare=False) is None
    assert programs.find_program("```\n" * 100_001)[1] == programs.EMPTY_PROGRAM
    assert extract_code("`" * 1_000_000, bare=False) is None
    assert programs.find_program("<think>" + "```python\n" * 1000)[1] == programs.UNCLOSED_THINK


# ---------------------------------------------------------------------------- the runner


def test_runner_runs_each_code_and_stdin_once(fake):
    box = fake(ok("#### U\n"))
    runner = ProgramRunner()
    first = runner.run("print(1)\n", "board")
    assert runner.run("print(1)\n", "board") is first
    assert (box.single, runner.runs) == (1, 1)
    runner.run("print(1)\n", "another board")  # the input is part of the key
    assert (box.single, runner.runs) == (2, 2)
    assert first == programs.ProgramRun("ok", "#### U\n", "")


def test_runner_does_not_cache_sandbox_failures_or_huge_programs(fake):
    box = fake(ExecResult(Verdict.sandbox_error, None, "", "bwrap: cannot start", 0.0))
    runner = ProgramRunner()
    assert runner.run("print(1)\n").verdict == "sandbox_error"
    runner.run("print(1)\n")
    assert box.single == 2 and runner.cached("print(1)\n") is None
    fake(ok("1\n"))
    huge = "x = 1\n" * 10_000
    runner.run(huge)
    assert runner.cached(huge) is None


def test_runner_keeps_the_tail_of_long_output_and_of_errors(fake):
    fake(ExecResult(Verdict.runtime_error, 1, "a" * 20_000 + "#### U", "\n".join("l" * 9), 0.1))
    run = ProgramRunner().run("print(1)\n")
    assert len(run.stdout) == programs.MAX_OUTPUT_KEEP and run.stdout.endswith("#### U")
    assert run.error.count("\n") == 5


def test_prefetch_runs_only_new_pairs_in_one_pooled_call(fake):
    box = fake(ok("#### R\n"))
    runner = ProgramRunner()
    runner.run("a = 1\n", "s")
    n = runner.prefetch([("a = 1\n", "s"), ("b = 2\n", "s"), ("b = 2\n", "s"), ("c = 3\n", "t")])
    assert n == 2 and box.batches == [2]
    runner.run("b = 2\n", "s")
    runner.run("c = 3\n", "t")
    assert box.single == 1, "prefetched runs must be read from the cache"
    texts = [fenced("d = 4"), "no code", fenced("d = 4"), 7, "x" * 100]
    assert runner.prefetch_texts(texts, "s", max_chars=80) == 1
    assert box.batches == [2, 1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tool_mode": "python"}, "tool_mode must be one of"),
        ({"tool_timeout_s": 0}, "tool_timeout_s must be in"),
        ({"tool_timeout_s": "5"}, "tool_timeout_s must be a number"),
        ({"tool_memory_mb": 8}, "tool_memory_mb must be an int"),
    ],
)
@pytest.mark.parametrize("env_cls", [SokobanEnv, PlanPathEnv, SudokuEnv])
def test_bad_tool_options_give_clear_errors(env_cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        env_cls(**{"tool_mode": "code", **kwargs})


def test_runner_for_plan_mode_is_none():
    assert runner_for("plan", 5.0, 512) is None
    assert isinstance(runner_for("code", 1.5, 64), ProgramRunner)


def test_tool_program_says_why_nothing_came_out(fake):
    runner = ProgramRunner()
    assert tool_program(runner, "#### U", "", 0).reason == programs.NO_PROGRAM
    fake(ExecResult(Verdict.runtime_error, 1, "", "Traceback\nNameError: name 'q' is not", 0.1))
    bad = tool_program(runner, fenced("q"), "", 1)
    assert bad.output is None and bad.turn == 1
    assert "runtime_error" in bad.reason and "NameError" in bad.reason
    fake(ExecResult(Verdict.timeout, -9, "partial", "", 5.0))
    slow = tool_program(ProgramRunner(), fenced("while 1: pass"), "", 0)
    assert slow.output is None and "ran out of time" in slow.reason


def test_program_report_is_capped_and_clean():
    code = "x = '\x1b[31m\ud800'\n" + "y = 1\n" * 2000
    out = "\x00junk\n" * 500 + "#### U, R"
    report = programs.program_report(
        programs.ToolProgram(0, code, programs.ProgramRun("ok", out, ""), ""), "The tool agent's"
    )
    assert report.startswith("The tool agent's program (turn 1):\n```python\nx = ")
    assert "(cut: too long)" in report and report.rstrip().endswith("#### U, R")
    assert len(report) < programs.MAX_CODE_ECHO + programs.MAX_OUTPUT_ECHO + 200
    assert mas_envs.spaces.clean_text(report) == report


# ---------------------------------------------------------------------------- oracle programs


def test_sokoban_oracle_bfs_program_finds_shortest_plans():
    env = SokobanEnv(tool_mode="code")
    for seed in range(150):
        env.reset(seed=seed)
        board, player, boxes = env.board, env.player, env.boxes
        out = run_in_process(env.oracle_action("tool"))
        moves = tuple(out.split("####")[-1].replace(",", " ").split())
        assert len(moves) == len(env.solution()), seed
        assert play(board, player, boxes, moves, env.reward_table).solved, seed


def test_sokoban_oracle_prints_the_solver_plan_on_large_levels():
    env = SokobanEnv(width=12, height=12, boxes=4, tool_mode="code")
    env.reset(seed=3)
    reply = env.oracle_action("tool")
    assert "from collections import deque" not in reply
    out = run_in_process(reply)
    assert out == "#### " + ", ".join(env.solution()) + "\n"


@pytest.mark.parametrize(("rows", "cols"), [(10, 10), (4, 7), (16, 16)])
def test_planpath_oracle_bfs_program_finds_shortest_paths(rows, cols):
    env = PlanPathEnv(rows=rows, cols=cols, tool_mode="code")
    for seed in range(100):
        env.reset(seed=seed)
        out = run_in_process(env.oracle_action("tool"))
        moves = tuple(out.split("####")[-1].replace(",", " ").split())
        assert len(moves) == len(grid.shortest_path(env.level, env.level.start)), seed
        assert grid.run_moves(env.level, env.level.start, moves, 0)[4], seed


@pytest.mark.parametrize(("size", "levels"), [(4, 100), (9, 15)])
def test_sudoku_oracle_solver_program_prints_the_solution(size, levels):
    env = SudokuEnv(size=size, tool_mode="code")
    for seed in range(levels):
        env.reset(seed=seed)
        out = run_in_process(env.oracle_action("tool"))
        assert "####\n" + mas_envs.sudoku.rules.format_grid(env.solution, size) + "\n" == out


@pytest.mark.parametrize("env_id", CODE_IDS)
def test_oracle_program_in_the_sandbox_earns_the_oracle_plan_reward(env_id):
    for seed in (0, 1):
        code_env = mas_envs.make(env_id, split="test")
        plan_env = mas_envs.make(plan_id(env_id), split="test")
        code_env.reset(seed=seed)
        plan_env.reset(seed=seed)
        code_env.step(code_env.oracle_action())
        plan_env.step(plan_env.oracle_action())
        info, want = code_env.infos["tool"], plan_env.infos["tool"]
        assert info["verdict"] == "ok" and info["parsed"] and not info["reason"]
        assert info["local_reward"] == pytest.approx(want["local_reward"])
        assert info["local_reward"] > 1.0


# ---------------------------------------------------------------------------- the games


def test_a_program_reading_stdin_works_on_any_level():
    reply = fenced(
        "import sys\nrows = sys.stdin.read().split('\\n')\n"
        "r = next(i for i, row in enumerate(rows) if '@' in row)\n"
        "print('####', 'U' if r > 2 else 'D')"
    )
    env = SokobanEnv(tool_mode="code")
    seen = set()
    for seed in range(6):
        env.reset(seed=seed)
        row = divmod(env.player, env.width)[0]
        env.step(reply)
        assert env.infos["tool"]["verdict"] == "ok"
        assert env.proposed_first == ("U" if row > 2 else "D")
        seen.add(env.proposed_first)
    assert seen == {"U", "D"}, "the same program gave different plans on different boards"


@pytest.mark.parametrize("env_id", CODE_IDS)
def test_failures_get_a_penalty_a_reason_and_change_nothing(env_id, fake):
    env = mas_envs.make(env_id, render_mode="ansi")
    cases = [
        ("#### U, R", None, "no ```python code block"),
        (fenced("x"), ExecResult(Verdict.runtime_error, 1, "", "NameError: x", 0.1), "NameError"),
        (fenced("while 1: pass"), ExecResult(Verdict.timeout, -9, "", "", 5.0), "out of time"),
        (fenced("print(1)"), ExecResult(Verdict.memory_limit, 1, "", "MemoryError", 0.1), "memory"),
        (fenced("print('hi')"), ok("hello there\n"), "output has no"),
    ]
    for text, result, why in cases:
        if result is not None:
            fake(result)
        env.reset(seed=5)
        before = env.render()
        env.step(text)
        info = env.infos["tool"]
        assert (info["local_reward"], info["parsed"]) == (env.format_penalty, False), text
        assert why in info["reason"]
        assert info["verdict"] == (result.verdict.value if result else "")
        assert env.render() == before, "the tool's program never changes the real state"
        after = env.observe("planner")["prompt"]
        if result is not None and "-v0" in env_id:  # v1, v2 show the output, not the code
            assert "```python\n" + extract_code(text, bare=False) in after
        space = env.observation_space("planner")
        assert space.contains(env.observe("planner"))


@pytest.mark.parametrize("env_id", CODE_IDS)
def test_a_sandbox_failure_is_not_the_agents_fault(env_id, fake):
    fake(ExecResult(Verdict.sandbox_error, None, "", "bwrap failed", 0.0))
    env = mas_envs.make(env_id)
    env.reset(seed=1)
    env.step(env.oracle_action())
    info = env.infos["tool"]
    assert info["local_reward"] == 0.0 and info["parsed"] and "sandbox" in info["reason"]


def test_sokoban_planner_sees_program_output_and_plan(fake):
    fake(ok("searching...\n#### L, U\n"))
    env = SokobanEnv(tool_mode="code")
    env.reset(seed=2)
    env.step(fenced("print('#### L, U')"))
    prompt = env.observe("planner")["prompt"]
    assert (
        "The tool agent's program (turn 1):\n```python\nprint('#### L, U')\n```\n"
        "Its output:\nsearching...\n#### L, U\n\nThe tool agent's proposal: L, U (2 moves)\n"
    ) in prompt
    env.step("#### L")
    tool_prompt = env.observe("tool")["prompt"]
    assert "Your program (turn 1):" in tool_prompt and "The plan it gave: L, U (2 moves)" in (
        tool_prompt
    )
    assert tool_prompt.endswith(
        "The planner sees your program, its output and the answer it printed."
    )


def test_planpath_planner_sees_program_output_and_plan(fake):
    fake(ok("bfs done\n#### L, U\n"))
    env = PlanPathEnv(tool_mode="code")
    env.reset(seed=2)
    env.step(fenced("print('#### L, U')"))
    prompt = env.observe("planner")["prompt"]
    assert (
        "Tool agent's program (turn 1):\n```python\nprint('#### L, U')\n```\n"
        "Its output:\nbfs done\n#### L, U\nTool agent's proposal: L, U\n"
    ) in prompt
    env.step("#### L")
    tool_prompt = env.observe("tool")["prompt"]
    assert "Your program (turn 1):" in tool_prompt and "The moves it gave: L, U" in tool_prompt


def test_sudoku_planner_sees_program_output_and_checked_grid(fake):
    env = SudokuEnv(tool_mode="code")
    env.reset(seed=2)
    grid = mas_envs.sudoku.rules.format_grid(env.solution, 4)
    fake(ok("####\n" + grid + "\n"))
    env.step(fenced("print(SOLUTION)"))
    assert env.infos["tool"]["local_reward"] == pytest.approx(3.0)
    prompt = env.observe("planner")["prompt"]
    assert (
        "The tool agent's program (turn 1):\n```python\nprint(SOLUTION)\n```\nIts output:\n####\n"
        in prompt
    )
    assert "Rule check of the proposal: keeps every clue" in prompt
    env.step("#### [[9, 9, 9]]")  # unreadable: the turn moves on
    assert "The tool agent's program" not in env.observe("planner")["prompt"]


@pytest.mark.parametrize("env_id", CODE_IDS)
def test_clones_share_the_cache_and_prefetch_fills_it(env_id, monkeypatch):
    env = mas_envs.make(env_id)
    env.reset(seed=11)
    rng = np.random.default_rng(0)
    texts = [env.oracle_action(), env.random_action(rng), env.random_action(rng), "no code"]
    calls = []
    real_many = sandbox.run_many
    monkeypatch.setattr(
        sandbox, "run_many", lambda jobs, **kw: calls.append(len(jobs)) or real_many(jobs, **kw)
    )
    env.prefetch(texts, agent="planner")  # not a tool's reply: nothing runs
    env.prefetch(texts)
    assert calls == [3]

    def no_more_runs(*args, **kwargs):
        raise AssertionError("the programs should have been prefetched")

    monkeypatch.setattr(sandbox, "run_python", no_more_runs)
    rewards = []
    for text in texts:
        clone = env.clone()
        clone.step(text)
        rewards.append(clone.infos["tool"]["local_reward"])
    assert rewards[0] > 1.0 and rewards[-1] == env.format_penalty
    again = env.clone()
    again.step(texts[1])
    assert again.infos["tool"]["local_reward"] == rewards[1]
    assert env.agent_selection == "tool", "prefetch and clones never change the env"


@pytest.mark.parametrize("env_id", CODE_IDS)
@pytest.mark.parametrize(("plan", "mode"), [(True, "mas"), (False, "single"), (True, "single")])
def test_only_the_code_team_runs_programs(env_id, plan, mode, fake):
    # The rollout hands every env its K texts; a plan-mode env or a single planner (no tool
    # agent) must treat a program as plain text, in prefetch and in step alike.
    box = fake(ok("#### U\n"))
    env = mas_envs.make(plan_id(env_id) if plan else env_id, mode=mode)
    env.reset(seed=0)
    program = fenced('print("#### U")')
    env.prefetch([program, program + " "])
    env.prefetch([program], agent="tool")
    env.step(program)
    assert box.single == 0 and not box.batches
    assert "verdict" not in env.infos[env.possible_agents[0]]


@pytest.mark.parametrize("env_id", CODE_IDS)
def test_random_text_never_reaches_the_sandbox(env_id, fake):
    box = fake(ok("#### U\n"))
    env = mas_envs.make(env_id)
    env.reset(seed=0)
    space = env.action_space("tool")
    space.seed(0)
    for _ in range(50):
        env.reset(seed=0)
        env.step(space.sample())
    assert box.single == 0 and not box.batches


@pytest.mark.parametrize("env_id", CODE_IDS)
def test_single_mode_and_plan_mode_texts_are_unchanged(env_id):
    code_env = mas_envs.make(env_id, mode="single")
    plan_env = mas_envs.make(plan_id(env_id), mode="single")
    for env in (code_env, plan_env):
        env.reset(seed=4)
    for first in (True, False):  # a format error, then the oracle's answer
        assert code_env.observe("planner") == plan_env.observe("planner")
        text = "I would use a BFS." if first else code_env.oracle_action()
        assert first or text == plan_env.oracle_action()
        code_env.step(text)
        plan_env.step(text)
        assert code_env.infos == plan_env.infos
    assert code_env.success and plan_env.success
    # The plan-mode team keeps its v0 texts: the tool is asked for a plan, not a program.
    team = mas_envs.make(plan_id(env_id))
    team.reset(seed=4)
    assert "```python" not in team.observe("tool")["prompt"]
    assert not team.oracle_action().startswith("```")


@pytest.mark.parametrize("env_id", CODE_IDS)
def test_hostile_programs_are_contained(env_id):
    env = mas_envs.make(env_id, tool_timeout_s=1.0)
    hostile = [
        "print('\\x00\\x1b[31m' + chr(0xD800) * 3, flush=True)\nimport sys\n"
        "sys.stdout.buffer.write(b'\\xff\\xfe')",
        "print('####', 'U, ' * 1_000_000)",
        "print('x' * 10_000_000)",
        "import os\nos.system('echo hi')\nwhile True: pass",
    ]
    for code in hostile:
        env.reset(seed=0)
        env.step(fenced(code))
        info = env.infos["tool"]
        assert info["local_reward"] < 0 and info["reason"], code
        obs = env.observe("planner")
        assert env.observation_space("planner").contains(obs)
        assert len(obs["prompt"]) < 12_000


@pytest.mark.parametrize("env_id", CODE_IDS)
def test_numeric_view_of_a_code_env_sends_programs(env_id):
    from mas_envs.numeric import NumericView

    view = NumericView(mas_envs.make(env_id))
    view.reset(seed=0)
    view.step(0)  # the tool's discrete action becomes a program printing that move or fill
    info = view.env.infos["tool"]
    assert info["verdict"] == "ok" and info["parsed"], info


# ---------------------------------------------------------------------------- program transcripts

PROGRAM_GOLDEN = Path(__file__).parents[1] / "golden"


def program_transcript(env_id: str) -> str:
    """Every prompt of a seeded episode that goes through the program path: the tool's oracle
    program, a one-move planner answer, a failing program, then the oracle.

    The generic golden transcript (tests/helpers/golden.py) starts with a format error and never
    shows a program; this one pins the program texts (a change here is a version bump too).
    """
    env = mas_envs.make(env_id, split="test")
    env.reset(seed=7)
    failing = fenced("import missing_module")
    parts = []
    for step in range(6):
        if not env.agents:
            break
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            break
        obs = env.observe(agent)
        if agent == "tool":
            action = env.oracle_action() if step == 0 else failing
        elif step == 1:
            action = env.random_action(np.random.default_rng(1))
        else:
            action = env.oracle_action()
        env.step(action)
        info = env.infos[agent]
        parts.append(
            f"===== turn={info['turn']} agent={agent} =====\n--- system ---\n{obs['system']}\n"
            f"--- prompt ---\n{obs['prompt']}\n--- action ---\n{action}\n--- reward ---\n"
            f"{env.rewards[agent]!r} parsed={info['parsed']} success={info['success']} "
            f"verdict={info.get('verdict')!r} reason={info['reason']!r}\n"
        )
    return "\n".join(parts)


def _program_golden_path(env_id: str) -> Path:
    return PROGRAM_GOLDEN / (env_id.split("/")[-1].lower().replace("-", "_") + "_programs.txt")


@pytest.mark.parametrize("env_id", CODE_IDS)
def test_program_transcript_is_unchanged(env_id):
    path = _program_golden_path(env_id)
    assert path.exists(), f"run `python tests/envs/test_plan_code.py {env_id}` to write {path}"
    assert program_transcript(env_id) == path.read_text(encoding="utf-8"), (
        f"prompts of {env_id}'s program path changed: bump the env version, note it in the "
        "card's version history, and regenerate with "
        f"`python tests/envs/test_plan_code.py {env_id}`"
    )


# ---------------------------------------------------------------------------- the tool alone


@pytest.mark.parametrize(
    "env_id", ["mas/PlanPathCode-v0", "mas/PlanPathCode-v1", "mas/PlanPathCode-v2"]
)
def test_tool_alone_makes_the_moves_its_program_prints(env_id, fake):
    env = mas_envs.make(env_id, rows=5, cols=5, mode="tool")
    assert env.possible_agents == ["tool"]
    env.reset(options={"task_id": env.task_ids("test")[0]})
    assert "the moves it prints are made" in env.observe("tool")["system"]
    start = env.position
    path = grid.shortest_path(env.level, env.level.start)
    fake(ok(f"#### {path[0]}\n"))
    env.step(fenced("print('first move')"))
    assert env.moves == (path[0],) and env.position != start  # made, not simulated
    assert env.agent_selection == "tool" and env.turn == 1
    assert "Moves made so far: " + path[0] in env.observe("tool")["prompt"]
    assert not env.infos["tool"]["success"]
    fake(ok("#### " + ", ".join(path[1:]) + "\n"))
    env.step(fenced("print('the rest')"))
    info = env.infos["tool"]
    assert info["success"] and env.terminations["tool"]
    assert info["team_reward"] == 1.0 and info["proposal_reaches_goal"]


def test_tool_alone_failed_program_is_penalised_and_moves_nothing(fake):
    env = mas_envs.make("mas/PlanPathCode-v1", rows=5, cols=5, mode="tool")
    env.reset(seed=3)
    fake(ExecResult(Verdict.runtime_error, 1, "", "NameError: x", 0.1))
    env.step(fenced("x"))
    info = env.infos["tool"]
    assert (info["local_reward"], info["parsed"]) == (env.format_penalty, False)
    assert env.moves == () and env.turn == 1


def test_tool_alone_oracle_program_solves_every_level():
    env = mas_envs.make("mas/PlanPathCode-v1", rows=5, cols=5, mode="tool")
    for task_id in env.task_ids("test")[:10]:
        env.reset(options={"task_id": task_id})
        env.step(env.oracle_action())
        assert env.success and env.moves == tuple(grid.shortest_path(env.level, env.level.start))


def test_tool_alone_needs_the_code_tool():
    with pytest.raises(ValueError, match="tool_mode='code'"):
        mas_envs.make("mas/PlanPath-v1", mode="tool")
    with pytest.raises(ValueError, match="unknown mode 'tool'"):
        mas_envs.make("mas/SokobanCode-v0", mode="tool")


if __name__ == "__main__":
    for env_id in sys.argv[1:] or CODE_IDS:
        _program_golden_path(env_id).write_text(program_transcript(env_id), encoding="utf-8")
        print(f"wrote {_program_golden_path(env_id)}")
