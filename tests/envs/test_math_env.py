"""mas/Math-v0: the answer checker, the generators, the dataset loaders, rewards, voting, splits."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import re
import signal
import sys
import threading
import time
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy

import mas_envs
from mas_envs import programs
from mas_envs.math import verify
from mas_envs.math.env import MathEnv
from mas_envs.math.generators import (
    EMPTY_V0,
    LEVELS,
    SEEDS,
    TOPICS,
    GeneratedIds,
    content_split,
    generate,
)
from mas_envs.math.loaders import ProblemFileError, hash_split, load_problems
from mas_envs.math.prompts import parse_answer, parse_code, program_answer
from mas_envs.math.verify import answers_equal, last_boxed, majority_answer, normalize
from mas_envs.policies import oracle_policy, play_episode, random_policy

FIXTURES = Path(__file__).parents[1] / "fixtures" / "math"
BACKENDS = [
    "sympy",
    pytest.param(
        "math-verify",
        marks=pytest.mark.skipif(
            not __import__("importlib").util.find_spec("math_verify"),
            reason="math extra not installed",
        ),
    ),
]

# ---------------------------------------------------------------------------- the checker

EQUAL = [
    ("42", "42"),
    ("42", "42.0"),
    ("025", "25"),
    ("1,000", "1000"),
    ("\\frac{1}{2}", "0.5"),
    ("\\frac{1}{2}", "\\frac{2}{4}"),
    ("\\dfrac{3}{4}", "3/4"),
    ("\\frac34", "\\tfrac{3}{4}"),
    ("-\\frac{3}{7}", "-3/7"),
    ("\\frac{-3}{7}", "-\\frac{3}{7}"),
    ("2", "\\frac{4}{2}"),
    ("\\frac{7}{11}", "0.6363636363636364"),  # a program's float output of a fraction
    ("90^\\circ", "90"),
    ("90", "90^{\\circ}"),
    ("50\\%", "50"),
    ("\\$5", "5"),
    ("10\\text{ cm}", "10"),
    ("12", "12 \\text{ apples}"),
    ("x=5", "5"),
    ("3\\sqrt{2}", "\\sqrt{18}"),
    ("2\\sqrt{3}", "\\sqrt{12}"),
    ("\\sqrt{2}/2", "\\frac{1}{\\sqrt2}"),
    ("\\frac{3+\\sqrt{13}}{2}", "3/2 + sqrt(13)/2"),  # a program's sympy-style output
    ("\\frac{3+\\sqrt{13}}{2}", "3.302775637731995"),  # a program's float output
    ("\\pi/2", "\\frac{\\pi}{2}"),
    ("2^{10}", "1024"),
    ("x^2+2x+1", "(x+1)^2"),
    ("(2,-3)", "(2, -3)"),
    ("\\left(1,2\\right)", "(1,2)"),
    ("[1,3)", "[1,3)"),
    ("(-\\infty, 2]", "(-\\infty,2]"),
    ("-2, 3", "3, -2"),
    ("\\{-2,3\\}", "-2,3"),
    ("\\infty", "\\infty"),
    ("\\text{(A)}", "A"),
]
UNEQUAL = [
    ("5", "6"),
    ("-7", "7"),
    ("\\frac{1}{3}", "\\frac{1}{4}"),
    ("\\frac{1}{3}", "0.333"),
    ("\\frac{1}{0}", "1"),
    ("\\frac{2}{3}", "3/2"),
    ("\\sqrt{3}", "1.732"),
    ("(2,-3)", "(-3, 2)"),  # tuples are ordered
    ("[1,3)", "(1,3)"),  # bracket types count
    ("(1,2)", "(1,2,3)"),
    ("1,2", "1,2,3"),
    ("x+1", "x-1"),
    ("\\frac{3+\\sqrt{13}}{2}", "3.3"),
    ("5", ""),
    ("", "5"),
    ("9^{9^{9^9}}", "1"),  # too costly to evaluate: compared as text, never hangs
    ("5", "{" * 30 + "5" + "}" * 30),  # nested too deep to parse (exponential): compared as text
]


@pytest.fixture
def unhurried_grading(monkeypatch):
    """A grading time limit no loaded CI host reaches (a 5 s limit made a sqrt comparison flaky at
    load 20: the timeout reads "unverifiable", which is not "equal"), and no cached outcome."""
    monkeypatch.setattr(verify, "GRADE_TIMEOUT_S", 120.0)
    verify._compare_cached.cache_clear()
    yield
    verify._compare_cached.cache_clear()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("gold", "pred"), EQUAL)
def test_equal_answers_are_recognised(backend, gold, pred, unhurried_grading):
    assert verify.compare_answers(gold, pred, backend) == "equal", (gold, pred)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("gold", "pred"), UNEQUAL)
def test_unequal_answers_are_told_apart(backend, gold, pred):
    assert not answers_equal(gold, pred, backend), (gold, pred)


def test_deeply_nested_answers_never_reach_the_parser(monkeypatch):
    math_verify = pytest.importorskip("math_verify")

    parsed = []
    monkeypatch.setattr(math_verify, "parse", lambda text, **kwargs: parsed.append(text) or [])
    deep = "{" * 9 + "7" + "}" * 9  # exponential for math-verify, and unguarded off-thread
    assert not answers_equal("8", deep, "math-verify")
    assert answers_equal(deep, " " + deep, "math-verify")  # equal as text
    assert not parsed, "a deeply nested answer must be compared as text, never parsed"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "hostile",
    [
        "9^{9^{9^{9}}}",
        "99999!",
        "2**2**2**2**2**2",
        "10^{100000}",
        "x" * 5000,
        "__import__('os').system('true')",
        "\\frac{",
        "\ud800",
        "}}}{{{",
        "(10^{10})!",
        "\\binom{100000000}{50000000}",
    ],
)
def test_hostile_answers_are_wrong_fast_and_safe(backend, hostile):
    start = time.perf_counter()
    assert not answers_equal("7", hostile, backend)
    assert time.perf_counter() - start < 1.5


@pytest.mark.parametrize("backend", BACKENDS)
def test_lists_of_powers_are_unordered(backend):
    # Two terms with ^ in one list read as a power tower (too costly: "different"), so an
    # OlympiadBench list was graded by its order (issue 31).
    gold = "10^{1/100}, 10^{100}"
    assert answers_equal(gold, "10^{100}, 10^{1/100}", backend)
    assert not answers_equal(gold, "10^{100}, 10^{1/10}", backend)
    assert not answers_equal("7", "2^{3^{4^{5}}}", backend)  # a real tower is still refused


# 14 characters, no tower, shallow: expanding it kept math-verify and sympy busy for over 60 s.
SLOW_ANSWER = "(x+y+z+1)^{99}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slow_answer_is_unverifiable_in_bounded_time_on_the_main_thread(backend, monkeypatch):
    monkeypatch.setattr(verify, "GRADE_TIMEOUT_S", 1.0)
    verify._compare_cached.cache_clear()
    start = time.perf_counter()
    assert verify.compare_answers("1", SLOW_ANSWER, backend) == "unverifiable"
    assert time.perf_counter() - start < 2.5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # our alarm is off again
    assert verify.compare_answers("\\sqrt{8}", "2\\sqrt{2}", backend) == "equal"


def test_an_alarm_that_comes_after_the_grading_is_a_no_op():
    # Under load a repeat of the interval timer came while the timer was being turned off, and
    # its _Overrun escaped into the caller (a quick suite failed in pytest's own code).
    assert verify._with_alarm(lambda: True, 5.0) == "equal"
    verify._on_alarm(signal.SIGALRM, None)  # the late alarm: nothing happens
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)

    def overruns() -> bool:
        verify._on_alarm(signal.SIGALRM, None)
        return True

    assert verify._with_alarm(overruns, 5.0) == "unverifiable"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slow_answer_is_unverifiable_in_bounded_time_off_the_main_thread(backend, monkeypatch):
    # Off the main thread no SIGALRM: a grader worker process runs it, killed when it overruns.
    # The warm-up (the worker's start, seconds of imports) runs under the default limit, so that
    # a loaded machine cannot make it the answer that overruns; the 1 s limit is for the others.
    verify._compare_cached.cache_clear()
    got: dict[str, tuple[str, float]] = {}

    def grade(key: str, gold: str, pred: str) -> None:
        if key != "warm-up":
            monkeypatch.setattr(verify, "GRADE_TIMEOUT_S", 1.0)
        start = time.perf_counter()
        got[key] = (verify.compare_answers(gold, pred, backend), time.perf_counter() - start)

    for key, gold, pred in (
        ("warm-up", "\\sqrt{8}", "2\\sqrt{2}"),  # starts the worker (imports sympy: seconds)
        ("slow", "1", SLOW_ANSWER),
        ("after", "\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}"),
    ):
        thread = threading.Thread(target=grade, args=(key, gold, pred))
        thread.start()
        thread.join(timeout=150)
        assert not thread.is_alive(), f"{key}: grading off the main thread did not return"
    assert got["warm-up"][0] == "equal"
    outcome, seconds = got["slow"]
    assert outcome == "unverifiable" and seconds < 1.0 + 2.0 + 1.5, got["slow"]
    assert got["after"][0] == "equal"  # the grader still works afterwards
    assert not answers_equal("1", SLOW_ANSWER, backend)  # cached: no second wait


@pytest.mark.parametrize("backend", BACKENDS)
def test_grading_off_the_main_thread_gives_the_same_verdicts(backend, unhurried_grading):
    got: list[bool] = []
    pairs = EQUAL + UNEQUAL
    thread = threading.Thread(
        target=lambda: got.extend(answers_equal(g, p, backend) for g, p in pairs)
    )
    thread.start()
    thread.join(timeout=300)
    assert got == [True] * len(EQUAL) + [False] * len(UNEQUAL)


def test_someone_elses_alarm_is_left_alone(monkeypatch):
    # A main thread with its own interval timer running: grading goes to a worker instead.
    monkeypatch.setattr(verify, "GRADE_TIMEOUT_S", 1.0)
    verify._compare_cached.cache_clear()
    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    signal.setitimer(signal.ITIMER_REAL, 100.0)
    try:
        assert verify.compare_answers("1", SLOW_ANSWER, "sympy") == "unverifiable"
        assert 90.0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 100.0 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, old)


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown backend 'wolfram'"):
        answers_equal("1", "1", "wolfram")


@pytest.mark.parametrize(
    ("text", "boxed"),
    [
        ("so \\boxed{5}.", "5"),
        ("\\boxed{\\frac{1}{2}} then \\boxed{\\frac{3}{4}}", "\\frac{3}{4}"),  # the last counts
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("\\boxed 7", "7"),
        ("\\fbox{8}", "8"),
        ("\\boxed{ 9 }", "9"),
        ("no box here", None),
        ("\\boxed{unclosed", None),
        ("\\boxed{1} and \\boxed{2", "1"),  # an unclosed last box: the one before counts
        # Hostile: 9000 unclosed boxes once took ~20 s (each box scanned to the end of the text).
        ("\\boxed{1} " + "\\boxed{" * 9000, "1"),
        ("\\boxed{" * 9000 + "}" * 2, ""),  # the last box closes at once: empty
    ],
)
def test_last_boxed(text, boxed):
    assert last_boxed(text) == boxed


def test_normalize_strips_latex_noise():
    assert normalize(" $\\left( \\dfrac{1}{2}, 3 \\right)$ ") == "(\\frac{1}{2},3)"
    assert normalize("45^\\circ") == "45"
    assert normalize("\\text{Monday}") == "Monday"


@pytest.mark.parametrize(
    ("answers", "team"),
    [
        (["3"], "3"),
        ([None], None),
        (["3", "4", "3.0"], "3"),  # majority over verified-equal answers
        (["4", "\\frac{6}{2}", "3"], "\\frac{6}{2}"),  # 6/2 and 3 outvote 4
        (["4", "3"], "4"),  # tie: the earliest reasoner's group
        ([None, "5", "6"], "5"),
        (["1/2", "0.5", "2", "2", "2"], "2"),
    ],
)
def test_majority_answer(answers, team):
    assert majority_answer(answers) == team


# ---------------------------------------------------------------------------- the generators

# Spread over the train and test seed ranges, 100 seeds per (topic, level).
CHECK_SEEDS = [*range(0, 20_000, 400), *range(2_000_000, 2_001_000, 20)]


def _math_of(question: str) -> list[str]:
    return re.findall(r"\$([^$]*)\$", question)


def _latex_to_py(tex: str) -> str:
    tex = tex.replace("\\left", "").replace("\\right", "")
    tex = re.sub(r"\\frac\{(-?\d+)\}\{(\d+)\}", r"Fraction(\1, \2)", tex)
    return (
        tex.replace("\\times", "*").replace("\\div", "/").replace("\\cdot", "*").replace("^", "**")
    )


def _answer_value(answer: str) -> Fraction:
    m = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", answer)
    return Fraction(int(m[2]), int(m[3])) * (-1 if m[1] else 1) if m else Fraction(int(answer))


def _ints(text: str) -> list[int]:
    return [int(v) for v in re.findall(r"-?\d+", text)]


def _sym(tex: str) -> sympy.Expr:
    tex = re.sub(r"\\sqrt\{(\d+)\}", r"sqrt(\1)", tex)
    tex = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", tex)
    tex = re.sub(r"(\d)\s*(sqrt|x|y)", r"\1*\2", tex).replace("^", "**")
    return sympy.sympify(tex)


def _pascal(n: int, k: int) -> int:
    """k-subsets of n things, by Pascal's triangle (not math.comb, which the generators use)."""
    row = [1]
    for _ in range(n):
        row = [a + b for a, b in zip([0, *row], [*row, 0], strict=True)]
    return row[k]


def _independent_answer(topic: str, level: int, q: str):
    """Recompute a generated problem's answer from its statement alone (brute force / sympy)."""
    x, y = sympy.symbols("x y")
    if topic == "arith":
        return eval(_latex_to_py(_math_of(q)[0]), {"Fraction": Fraction})  # our own text
    if topic == "algebra":
        body = (
            next(m for m in _math_of(q) if "=" in m)
            .replace("\\begin{cases}", "")
            .replace("\\end{cases}", "")
        )
        eqs = [
            sympy.Eq(_sym(lhs), _sym(rhs))
            for lhs, rhs in (e.split("=") for e in body.split("\\\\"))
        ]
        sols = sympy.solve(eqs, [x, y] if level == 4 else [x], dict=True)
        if level == 4:
            return (sols[0][x], sols[0][y])
        roots = sorted(s[x] for s in sols)
        return {1: roots[0], 2: roots[0], 3: tuple(roots), 5: roots[-1]}[level]
    nums = _ints(" ".join(_math_of(q)))
    if topic == "numtheory":
        if level == 1:
            a, b = nums
            return max(d for d in range(1, min(a, b) + 1) if a % d == 0 and b % d == 0)
        if level == 2:
            a, b = nums
            return next(m for m in range(max(a, b), a * b + 1, max(a, b)) if m % min(a, b) == 0)
        if level == 3:
            a, e, m = nums
            r = 1
            for _ in range(e):
                r = r * a % m
            return r
        if level == 4:
            (n,) = nums
            return sum(2 - (d * d == n) for d in range(1, math.isqrt(n) + 1) if n % d == 0)
        r1, m1, r2, m2 = nums
        return next(v for v in itertools.count(1) if v % m1 == r1 and v % m2 == r2)
    if level == 1:
        if "women" in q:  # version 1: a women and b men from w women and m men
            a, b, w, m = nums
            return _pascal(w, a) * _pascal(m, b)
        k, n = nums
        return _pascal(n, k)
    if level == 2:
        n, k = nums
        # Ordered picks: the last runner either is not placed, or takes one of the k places.
        placed = [[1] + [0] * k for _ in range(n + 1)]  # placed[i][j]: j places, i runners
        for i in range(1, n + 1):
            for j in range(1, k + 1):
                placed[i][j] = placed[i - 1][j] + j * placed[i - 1][j - 1]
        return placed[n][k]
    if level == 3:
        word = re.search(r"word ([A-Z]+)", q)[1]
        ways, left = 1, len(word)
        for c in sorted(set(word)):  # place each letter's copies among the free slots
            ways *= math.comb(left, word.count(c))
            left -= word.count(c)
        return ways
    if level == 4:
        *idx, n = nums
        k = len(idx)  # the indices of x_1 .. x_k
        low = 1 if "positive integers" in q else 0  # version 1 also asks for positive solutions
        counts = [1] + [0] * n  # ways to reach each sum with the variables so far
        for _ in range(k):
            counts = [sum(counts[: s + 1 - low]) for s in range(n + 1)]
        return counts[n]
    one, n, a, b, c = nums
    return sum(1 for i in range(one, n + 1) if i % a and i % b and i % c)


# Version 1 changes only the generators of these (topic, level) pairs (and which draw a seed keeps).
V1_CHANGED = sorted(EMPTY_V0["train"])
GENERATOR_CASES = [(t, lvl, 0) for t in TOPICS for lvl in LEVELS] + [
    (t, lvl, 1) for t, lvl in V1_CHANGED
]


@pytest.mark.parametrize(("topic", "level", "version"), GENERATOR_CASES)
def test_generated_answers_match_an_independent_computation(topic, level, version):
    for seed in CHECK_SEEDS:
        p = generate(f"{topic}/{level}/{seed}", version)
        expect = _independent_answer(topic, level, p.question)
        where = f"{p.id}: {p.question} -> {p.answer}"
        if topic == "algebra" and level == 3:
            assert [int(v) for v in p.answer.split(",")] == list(expect), where
        elif topic == "algebra" and level == 4:
            assert p.answer == f"({expect[0]}, {expect[1]})", where
        elif topic == "algebra" and level == 5:
            assert sympy.simplify(_sym(p.answer) - expect) == 0, where
        else:
            assert _answer_value(p.answer) == expect, where


@pytest.mark.parametrize(("topic", "level", "version"), GENERATOR_CASES)
def test_generated_oracle_programs_print_the_answer(topic, level, version):
    for seed in range(0, 2000, 97):
        p = generate(f"{topic}/{level}/{seed}", version)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(p.code, {})  # our own generated code, not model text
        assert answers_equal(p.answer, program_answer(out.getvalue())), (p.id, p.code)


def test_problem_ids_regenerate_the_same_problem_and_differ_across_seeds():
    assert generate("arith/3/12345") == generate("arith/3/12345")
    questions = {generate(f"combinatorics/3/{s}").question for s in range(50)}
    assert len(questions) > 40


@pytest.mark.parametrize("bad", ["arith/6/1", "geometry/1/1", "arith/1", "arith/1/-3", "arith/x/1"])
def test_bad_problem_ids_are_clear_errors(bad):
    env = MathEnv()
    with pytest.raises((ValueError, KeyError), match="problem id"):
        env.reset(options={"problem_id": bad})


def test_generated_splits_are_disjoint_seed_ranges():
    ids = {s: GeneratedIds(TOPICS, LEVELS, SEEDS[s]) for s in SEEDS}
    assert "arith/3/12345" in ids["train"] and "arith/3/12345" not in ids["test"]
    assert ids["test"][0] == "arith/1/2000000" and ids["test"][-1] == "combinatorics/5/2000999"
    assert len(ids["validation"]) == 20 * 1000 and ids["validation"][3] in ids["validation"]
    ranges = sorted(SEEDS.values(), key=lambda r: r.start)
    assert all(a.stop <= b.start for a, b in itertools.pairwise(ranges))


def _questions(topic: str, level: int, split: str, version: int = 0, n: int | None = None):
    seeds = SEEDS[split] if n is None else SEEDS[split][:n]
    return {generate(f"{topic}/{level}/{s}", version).question for s in seeds}


def test_the_v0_table_of_empty_splits_is_what_the_generators_give():
    for topic in TOPICS:
        for level in LEVELS:
            test = _questions(topic, level, "test")
            validation = _questions(topic, level, "validation")
            held_out = validation | test
            if (topic, level) in EMPTY_V0["train"]:  # every train question is held out
                assert _questions(topic, level, "train") <= held_out, (topic, level)
            else:  # train serves some of its first 500 seeds
                assert _questions(topic, level, "train", n=500) - held_out, (topic, level)
            empty_validation = (topic, level) in EMPTY_V0["validation"]
            assert (validation <= test) == empty_validation, (topic, level)


@pytest.mark.parametrize(
    ("topics", "levels", "split"),
    [
        (["combinatorics"], [1, 2, 4], "train"),
        (["algebra"], [3], "train"),
        (["numtheory"], [4], "train"),
        (["combinatorics"], [2], "validation"),
    ],
)
def test_a_v0_config_with_no_problems_in_its_split_fails_at_construction(topics, levels, split):
    with pytest.raises(ValueError, match=r"has no problems of .*mas/Math-v1"):
        MathEnv(topics=topics, levels=levels, split=split)
    env = MathEnv(topics=topics, levels=levels, split=split, version=1)  # v1 serves them
    env.reset(seed=0)
    assert (env.problem.topic, env.problem.level) in [(t, lvl) for t in topics for lvl in levels]


def test_v1_partitions_the_questions_of_every_topic_and_level():
    for topic in TOPICS:
        for level in LEVELS:
            by_split = {s: _questions(topic, level, s, version=1, n=200) for s in SEEDS}
            assert all(by_split.values()), (topic, level)
            for split, questions in by_split.items():
                assert {content_split(q) for q in questions} == {split}, (topic, level, split)
    env = mas_envs.make("mas/Math-v1", topics=["numtheory"], levels=[4])
    assert env.version == 1
    for seed in range(20):
        env.reset(seed=seed)
        assert content_split(env.problem.question) == "train"
    env.reset(options={"problem_id": "numtheory/4/7"})  # ids regenerate the same v1 problem
    assert env.problem == generate("numtheory/4/7", 1) != generate("numtheory/4/7")


def test_topics_and_levels_select_generated_problems():
    env = MathEnv(topics=["numtheory"], levels=[5])
    for seed in range(10):
        env.reset(seed=seed)
        assert env.task_id.startswith("numtheory/5/")
    with pytest.raises(ValueError, match="topics must be a non-empty subset"):
        MathEnv(topics=["geometry"])
    with pytest.raises(ValueError, match="levels must be a non-empty subset"):
        MathEnv(levels=[0])


# ---------------------------------------------------------------------------- the loaders


def test_gsm8k_loader():
    ps = load_problems(FIXTURES / "gsm8k.jsonl")
    assert [p.id for p in ps] == ["gsm8k/gsm8k/1", "gsm8k/gsm8k/2", "gsm8k/gsm8k/3"]
    assert [p.answer for p in ps] == ["27", "1200", "60"]  # "#### 1,200" loses its comma
    assert ps[0].question.startswith("Mia has 3 boxes")
    assert "<<" not in ps[0].solution and "36 - 9" in ps[0].solution


def test_math_loaders_jsonl_and_directory_with_own_splits():
    ps = load_problems(FIXTURES / "math.jsonl")
    assert [(p.id, p.answer, p.topic, p.level) for p in ps] == [
        ("math/math/test/prealgebra/101", "\\frac{5}{6}", "Prealgebra", 1),
        ("math/math/test/algebra/2045", "(2,3)", "Algebra", 3),
    ]
    ps = load_problems(FIXTURES / "math_dir" / "train")
    assert {p.id: p.answer for p in ps} == {
        "math/train/algebra/1": "5",  # the last \boxed{} of the solution
        "math/train/number_theory/7": "2",
    }
    assert ps[0].level == 1 and ps[0].topic == "Algebra"
    env = MathEnv(problems=FIXTURES / "math_dir", split="test")
    assert list(env.task_ids("test")) == ["math/test/algebra/1"]
    assert set(env.task_ids("train")) == {"math/train/algebra/1", "math/train/number_theory/7"}
    assert list(env.task_ids("validation")) == []


def test_aime_loaders_csv_and_jsonl():
    ps = load_problems(FIXTURES / "aime.csv")
    assert [(p.id, p.answer) for p in ps] == [
        ("aime/aime/2024-I-1", "204"),
        ("aime/aime/2024-I-2", "025"),
    ]
    assert answers_equal(ps[1].answer, "25")
    ps = load_problems(FIXTURES / "aime.jsonl")
    assert [(p.id, p.answer) for p in ps] == [("aime/aime/60", "16"), ("aime/aime/61", "1")]


def test_olympiadbench_loader():
    ps = load_problems(FIXTURES / "olympiadbench.jsonl")
    assert [(p.id, p.answer, p.topic) for p in ps] == [
        ("olympiadbench/olympiadbench/1606", "9", "Combinatorics"),
        ("olympiadbench/olympiadbench/1607", "-2, 2", "Algebra"),  # several final answers
        ("olympiadbench/olympiadbench/1608", "\\frac{3}{4}", "Algebra"),
    ]
    assert answers_equal(ps[1].answer, "2, -2")


@pytest.mark.parametrize(
    ("name", "content", "fmt", "match"),
    [
        (
            "g.jsonl",
            '{"question": "q", "answer": "no marker"}\n',
            None,
            r"g\.jsonl: record 1: field 'answer' has no '#### <number>'",
        ),
        (
            "g.jsonl",
            '{"question": "q", "answer": "#### 1"}\n{"question": "q2"\n',
            None,
            r"g\.jsonl: record 2 \(line 2\): invalid JSON",
        ),
        (
            "m.jsonl",
            '{"problem": "p", "solution": "no box"}\n',
            None,
            r"m\.jsonl: record 1: field 'solution' has no \\boxed",
        ),
        ("a.csv", "ID,Problem,Answer\n1,p,\n", None, r"a\.csv: record 1: field 'Answer' is empty"),
        (
            "o.jsonl",
            '{"id": 1, "question": "q", "final_answer": 3}\n',
            None,
            r"o\.jsonl: record 1: field 'final_answer': expected a non-empty list",
        ),
        (
            "x.jsonl",
            '{"prompt": "q", "target": "1"}\n',
            None,
            r"x\.jsonl: record 1: cannot tell the format from fields \['prompt', 'target'\]",
        ),
        ("x.jsonl", '{"question": "q"}\n', "gsm8k", r"x\.jsonl: record 1: missing field 'answer'"),
        (
            "x.jsonl",
            '{"question": ["q"], "answer": "#### 1"}\n',
            None,
            r"x\.jsonl: record 1: field 'question': expected text or a number, got list",
        ),
        ("x.jsonl", "[1, 2]\n", "aime", r"x\.jsonl: record 1: expected a JSON object, got list"),
        (
            "d.jsonl",
            '{"id": 1, "problem": "p", "answer": "1"}\n{"id": 1, "problem": "q", "answer": "2"}\n',
            None,
            r"d\.jsonl: record 2: duplicate problem id 'aime/d/1'",
        ),
    ],
)
def test_malformed_files_name_file_record_and_field(tmp_path, name, content, fmt, match):
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(ProblemFileError, match=match):
        load_problems(tmp_path / name, fmt)


def test_missing_paths_and_bad_formats_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        MathEnv(problems=tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="unknown problem format 'gsm9k'"):
        load_problems(FIXTURES / "gsm8k.jsonl", "gsm9k")
    with pytest.raises(ValueError, match="topics= and levels= select generated problems"):
        MathEnv(problems=FIXTURES / "gsm8k.jsonl", topics=["arith"])
    with pytest.raises(ValueError, match="keys must be splits"):
        MathEnv(problems={"dev": FIXTURES / "gsm8k.jsonl"})
    with pytest.raises(ValueError, match="more than one split"):
        MathEnv(problems={"train": FIXTURES / "aime.csv", "test": FIXTURES / "aime.csv"})
    env = MathEnv(problems={"test": FIXTURES / "aime.csv"})
    with pytest.raises(ValueError, match="split 'train' has no problems"):
        env.reset(seed=0)


def test_file_splits_by_stable_hash_or_by_mapping():
    env = MathEnv(problems=FIXTURES / "olympiadbench.jsonl")
    for split in mas_envs.SPLITS:
        assert all(hash_split(i) == split for i in env.task_ids(split))
    assert sum(len(env.task_ids(s)) for s in mas_envs.SPLITS) == 3
    assert hash_split("gsm8k/test/17") == hash_split("gsm8k/test/17")
    env = MathEnv(
        problems={"train": FIXTURES / "gsm8k.jsonl", "test": FIXTURES / "aime.jsonl"}, split="test"
    )
    env.reset(seed=0)
    assert env.task_id in ("aime/aime/60", "aime/aime/61")
    env.reset(options={"problem_id": "gsm8k/gsm8k/2"})  # any loaded id, whatever its split
    assert env.problem.answer == "1200"


# ---------------------------------------------------------------------------- env, fake sandbox


class FakeSandbox:
    """Stands in for mas_envs.sandbox: runs trusted test programs in-process, counts runs."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        from mas_envs.sandbox.result import ExecResult, Verdict

        self.ExecResult, self.Verdict = ExecResult, Verdict

    def run_python(self, code, *, stdin="", timeout_s=5.0, memory_mb=512, files=None):
        self.runs.append(code)
        if "TIMEOUT" in code:
            return self.ExecResult(self.Verdict.timeout, -9, "", "", timeout_s)
        if "SANDBOX_BROKEN" in code:
            return self.ExecResult(self.Verdict.sandbox_error, None, "", "bwrap: no", 0.0)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(code, {})
        except Exception as e:
            return self.ExecResult(
                self.Verdict.runtime_error,
                1,
                out.getvalue(),
                f"Traceback ...\n{type(e).__name__}: {e}",
                0.01,
            )
        return self.ExecResult(self.Verdict.ok, 0, out.getvalue(), "", 0.01)


@pytest.fixture
def sandbox(monkeypatch):
    fake = FakeSandbox()
    module = types.ModuleType("mas_envs.sandbox")
    module.run_python = fake.run_python
    monkeypatch.setitem(sys.modules, "mas_envs.sandbox", module)
    monkeypatch.setattr(programs, "sandbox", module)  # the tool's programs run through it
    return fake


def _env(problem="numtheory/1/5", **kwargs):
    env = MathEnv(**kwargs)
    env.reset(options={"problem_id": problem})
    return env


def _code(body: str) -> str:
    return f"Here is my program.\n```python\n{body}\n```\n"


def _info(env, agent):
    i = env.infos[agent]
    return env.rewards[agent], i["local_reward"], i["team_reward"], i["success"], i["parsed"]


def test_tool_rewards(sandbox):
    env = _env()  # gcd(...) = gold
    gold = env.problem.answer
    env.step(_code(f"print({gold})"))
    assert _info(env, "tool") == (1.0, 1.0, 0.0, False, True)
    assert env.infos["tool"]["answer"] == gold and env.infos["tool"]["verdict"] == "ok"
    for text, local, reason in [
        (_code(f"print({gold} + 1)"), 0.0, ""),
        (_code("print(1 / 0)"), -1.0, "the program failed (runtime_error)"),
        (_code("while True: pass  # TIMEOUT"), -1.0, "the program failed (timeout)"),
        (_code("x = 1"), -1.0, "printed no answer"),
        (_code("SANDBOX_BROKEN = 1"), 0.0, "the sandbox failed"),
        ("print(3)", -1.0, "no ```python code block"),
        ("```python\n\n```", -1.0, "code block is empty"),
    ]:
        env = _env()
        env.step(text)
        assert env.infos["tool"]["local_reward"] == local, text
        assert reason in env.infos["tool"]["reason"], text
    assert env.infos["tool"]["parsed"] is False


def test_long_output_keeps_its_last_line_as_answer_and_shows_the_tail(sandbox):
    env = _env("arith/1/0")  # -33
    env.step(_code("for i in range(5000):\n    print(i)\nprint(56 - 89)"))
    assert env.infos["tool"]["answer"] == "-33" and env.infos["tool"]["correct"]
    prompt = env.observe("reasoner")["prompt"]
    assert "(truncated) ...\n" in prompt and prompt.count("\n") < 1000
    assert "4999\n-33\n" in prompt


def test_program_output_parsing():
    assert program_answer("working...\n  42  \n\n") == "42"
    assert program_answer("x = \\boxed{\\frac{1}{2}}\ndone") == "\\frac{1}{2}"
    assert program_answer("\n \n") is None
    assert program_answer("7" * 2000) is None
    assert parse_code("a\n```py\nprint(1)\n```\nthen\n```python\nprint(2)\n```").value == "print(2)"
    assert parse_code("```python\nprint(1)\n").value == "print(1)"  # cut off by the token limit
    assert parse_code("```\nprint(3)\n```").value == "print(3)"
    assert parse_answer("so \\boxed{}").reason == "the \\boxed{} answer is empty"


def test_reasoner_rewards_agreement_ends_the_episode(sandbox):
    env = _env("algebra/2/0")  # -\frac{11}{12}
    env.step(_code("from fractions import Fraction\nprint(Fraction(-11, 12))"))
    env.step("Collecting terms gives -11/12. \\boxed{-\\dfrac{11}{12}}")
    assert _info(env, "reasoner") == (2.0, 1.0, 1.0, True, True)
    assert env.infos["reasoner"]["agreed"] and env.terminations["reasoner"] and env.success
    assert env.infos["tool"]["success"]


def test_disagreement_continues_and_truncates_at_max_turns(sandbox):
    env = _env("arith/1/0", max_turns=2)  # 56 - 89 = -33
    env.step(_code("print(56 - 89)"))
    env.step("\\boxed{33}")
    assert _info(env, "reasoner") == (0.0, 0.0, 0.0, False, True)
    assert env.agents and env.turn == 1 and not env.infos["reasoner"]["agreed"]
    prompt = env.observe("tool")["prompt"]
    assert "its program printed -33" in prompt and "reasoner: answered \\boxed{33}" in prompt
    env.step(_code("print(56 - 89)"))  # cached: not run again
    assert len(sandbox.runs) == 1
    assert env.infos["tool"]["team_reward"] == 0.0
    env.step("I forgot the box: -33")
    assert _info(env, "reasoner") == (-1.0, -1.0, 0.0, False, False)
    assert env.truncations["reasoner"] and not env.terminations["reasoner"]


def test_a_wrong_agreement_terminates_without_success(sandbox):
    env = _env("arith/1/0")
    env.step(_code("print(33)"))
    env.step("\\boxed{33}")
    assert env.terminations["tool"] and not env.success
    assert env.infos["tool"]["success"] is False


def test_reasoner_sees_the_tool_program_and_output(sandbox):
    env = _env("arith/1/0")
    env.step(_code("print(56 - 89)"))
    prompt = env.observe("reasoner")["prompt"]
    assert "print(56 - 89)" in prompt and "Its output:\n-33" in prompt
    assert "Compute $56 - 89$." in prompt and "\\boxed{" in prompt
    env = _env("arith/1/0")
    env.step(_code("print(1/0)"))
    assert (
        "It failed (runtime_error):\nTraceback ...\nZeroDivisionError"
        in (env.observe("reasoner")["prompt"])
    )


def test_team_of_three_votes_and_ties_go_to_the_earliest(sandbox):
    env = _env("arith/1/1", n_reasoners=3)  # 56 - 33 = 23
    assert env.possible_agents == ["tool", "reasoner_0", "reasoner_1", "reasoner_2"]
    env.step(_code("print(23)"))
    env.step("\\boxed{24}")
    assert env.infos["reasoner_0"]["team_answer"] == "24" and not env.success
    env.step("\\boxed{23}")
    assert env.infos["reasoner_1"]["team_answer"] == "24"  # 1-1 tie: reasoner_0's answer
    assert "reasoner_0: \\boxed{24}" in env.observe("reasoner_2")["prompt"]
    env.step("\\boxed{23.0}")
    info = env.infos["reasoner_2"]
    assert info["team_answer"] == "23" and info["success"] and info["agreed"]
    assert env.rewards["reasoner_2"] == 2.0 and env.terminations["tool"]


def test_team_majority_wrong_means_no_success(sandbox):
    env = _env("arith/1/1", n_reasoners=3)
    env.step(_code("print(23)"))
    for text in ("\\boxed{23}", "\\boxed{22}", "\\boxed{22}"):
        env.step(text)
    assert env.infos["reasoner_2"]["team_answer"] == "22" and not env.success
    assert env.rewards["reasoner_0"] == 0.0 and env.agents  # no agreement with the tool: go on


def test_single_mode_has_one_reasoner_and_ends_on_an_answer():
    env = _env("arith/1/1", mode="single")
    assert env.possible_agents == ["reasoner"]
    assert "tool" not in env.observe("reasoner")["prompt"]
    env.step("no box")
    assert env.agents and env.infos["reasoner"]["local_reward"] == -1.0
    assert "gave no \\boxed{} answer" in env.observe("reasoner")["prompt"]
    env.step("\\boxed{23}")
    assert env.success and env.terminations["reasoner"] and env.rewards["reasoner"] == 2.0


def test_alpha_scales_the_team_reward(sandbox):
    env = _env("arith/1/1", alpha=0.5)
    env.step(_code("print(23)"))
    env.step("\\boxed{23}")
    assert env.rewards["reasoner"] == 1.5


def test_clones_share_the_program_cache(sandbox):
    env = _env("arith/1/1")
    twins = [env.clone() for _ in range(4)]
    for e in [env, *twins]:
        e.step(_code("print(23)"))
    assert len(sandbox.runs) == 1
    assert all(e.infos["tool"] == env.infos["tool"] for e in twins)


def test_task_id_option_and_oracle_texts(sandbox):
    env = MathEnv()
    env.reset(seed=0, options={"task_id": "algebra/5/3"})
    assert env.task_id == "algebra/5/3" and env.infos["tool"]["task_id"] == "algebra/5/3"
    tool_text = env.oracle_action("tool")
    assert tool_text.startswith("```python\n") and "math.sqrt" in tool_text
    assert env.oracle_action("reasoner").endswith("$\\boxed{\\frac{-3 + \\sqrt{233}}{8}}$.")
    rng = np.random.default_rng(0)
    for _ in range(20):
        wrong = parse_answer(env.random_action(rng, "reasoner")).value
        assert wrong is not None and not answers_equal(env.problem.answer, wrong)


@pytest.mark.parametrize("source", ["gsm8k.jsonl", "math_dir", "aime.csv", "olympiadbench.jsonl"])
def test_oracle_solves_file_problems(sandbox, source):
    env = MathEnv(problems={"test": FIXTURES / source}, split="test")
    for pid in env.task_ids("test"):
        result = play_episode(env, oracle_policy, options={"problem_id": pid})
        assert result.success and result.turns == 1, pid
        assert play_episode(env, random_policy(1), options={"problem_id": pid}).success is False


def test_config_errors():
    with pytest.raises(ValueError, match="n_reasoners must be an int >= 1, got 0"):
        MathEnv(n_reasoners=0)
    with pytest.raises(ValueError, match="mode='single' has one reasoner"):
        MathEnv(mode="single", n_reasoners=2)
    with pytest.raises(ValueError, match="tool_timeout_s must be > 0"):
        MathEnv(tool_timeout_s=0)
    with pytest.raises(TypeError, match="problems must be 'generated', a path"):
        MathEnv(problems=3)


# ---------------------------------------------------------------------------- the real sandbox


def test_real_sandbox_correct_program_succeeds_and_subtly_wrong_fails():
    sandbox = pytest.importorskip("mas_envs.sandbox")
    if not hasattr(sandbox, "run_python"):
        pytest.skip("mas_envs.sandbox has no run_python yet")
    env = _env("combinatorics/5/1")  # 1..353 divisible by none of 2, 6, 7 -> 152
    env.step(_code("print(sum(1 for i in range(1, 354) if i % 2 and i % 6 and i % 7))"))
    assert env.infos["tool"]["correct"] and env.infos["tool"]["local_reward"] == 1.0
    env.step("\\boxed{152}")
    assert env.success
    env = _env("combinatorics/5/1")
    env.step(_code("print(sum(1 for i in range(1, 353) if i % 2 and i % 6 and i % 7))"))
    assert env.infos["tool"]["answer"] == "151" and env.infos["tool"]["local_reward"] == 0.0
    env.step("\\boxed{151}")
    assert not env.success and env.terminations["tool"]


def test_without_math_verify_the_sympy_fallback_grades(monkeypatch):
    from mas_envs.math.verify import default_backend

    monkeypatch.setitem(sys.modules, "math_verify", None)  # makes `import math_verify` fail
    assert default_backend() == "sympy"
    env = _env("algebra/5/3", mode="single")  # \frac{-3 + \sqrt{233}}{8}
    env.step("\\boxed{\\dfrac{\\sqrt{233}-3}{8}}")
    assert env.success
    env = _env("algebra/5/3", mode="single")
    env.step("\\boxed{\\frac{3 + \\sqrt{233}}{8}}")
    assert not env.success and env.infos["reasoner"]["local_reward"] == 0.0


def test_prefetch_runs_candidate_programs_once_for_all_clones(monkeypatch):
    sandbox = pytest.importorskip("mas_envs.sandbox")
    env = _env("arith/1/1")  # 23
    texts = [_code("print(56 - 33)"), _code("print(23)"), _code("print(22)"), "no code"]
    env.prefetch(texts)
    env.prefetch(texts, agent="reasoner")  # not the tool's turn: nothing to run

    def no_more_runs(*args, **kwargs):
        raise AssertionError("the programs should have been prefetched")

    monkeypatch.setattr(sandbox, "run_python", no_more_runs)
    locals_ = []
    for text in texts:
        clone = env.clone()
        clone.step(text)
        locals_.append(clone.infos["tool"]["local_reward"])
    assert locals_ == [1.0, 1.0, 0.0, -1.0]
    assert env.agent_selection == "tool" and env.infos["tool"].get("answer") is None


REASONER_HOSTILE = [
    "\\boxed{" + "{" * 10_000,
    "\\boxed{\ud800}",
    "\\boxed{" + "9^" * 400 + "9}",
    "\\boxed{\u4e2d\u6587 \U0001f600 \x1b[31m\x00}",
    "\\boxed{" + "1" * 999 + "}",
    "\\boxed{" + "1" * 1001 + "}",
    "\\boxed{\\frac{1}{0}}",
    "\\boxed{x=}",
    "\\boxed{\\begin{pmatrix}1\\end{pmatrix}}",
    "\\boxed{__import__('os').getcwd()}",
]


@pytest.mark.parametrize("text", REASONER_HOSTILE)
def test_hostile_reasoner_answers_never_crash_and_stay_in_the_space(sandbox, text):
    env = _env("arith/1/1", n_reasoners=2)
    env.step(_code("print(23)"))
    start = time.perf_counter()
    env.step(text)
    assert time.perf_counter() - start < 3
    info = env.infos["reasoner_0"]
    assert not info["success"] and info["local_reward"] in (0.0, -1.0)
    assert info["parsed"] or info["reason"]
    obs = env.observe("reasoner_1")
    assert env.observation_space("reasoner_1").contains(obs)


def test_json_lists_and_split_named_files(tmp_path):
    records = [{"id": 7, "question": "Compute 1 + 1.", "final_answer": ["$2$"]}]
    (tmp_path / "OE_TO_maths_en_COMP.json").write_text(json.dumps(records), encoding="utf-8")
    (p,) = load_problems(tmp_path / "OE_TO_maths_en_COMP.json")
    assert (p.id, p.answer, p.source) == (
        "olympiadbench/OE_TO_maths_en_COMP/7",
        "2",
        "olympiadbench",
    )
    gsm = tmp_path / "gsm8k"
    gsm.mkdir()
    for name in ("train", "test", "train_socratic"):
        line = {"question": f"{name}?", "answer": "1 + 1 = 2\n#### 2"}
        (gsm / f"{name}.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    env = MathEnv(problems=gsm)
    assert list(env.task_ids("train")) == ["gsm8k/train/1"]  # train_socratic is no split
    assert list(env.task_ids("test")) == ["gsm8k/test/1"]
