"""Seeded generators of math problems with exact answers, in four topics and five levels.

A problem id ``"<topic>/<level>/<seed>"`` (e.g. ``"arith/3/12345"``) always regenerates the same
problem: :func:`generate` seeds ``np.random.default_rng([seed, level, topic index])`` and draws
every number from that generator (never the global RNG). Answers are computed exactly (integers,
``fractions.Fraction``, surds written in LaTeX) and each problem carries a brief worked solution
and a short stdlib-only Python program that prints the answer (the oracles of the two roles).

Levels 1 to 5 per topic:

* ``arith``: a +- b; a x b or exact a / b; order of operations; difference/sum of fractions;
  (a/b)^2 * c/d - e/f.
* ``algebra``: ax + b = c; ax + b = cx + d (rational root); both integer roots of a quadratic
  (answer ``"r, s"``); a 2x2 linear system (answer ``"(x, y)"``); larger root of a quadratic
  with an irrational root (answer a surd like ``\\frac{-3 + \\sqrt{233}}{8}``).
* ``numtheory``: gcd; lcm; a^e mod m; number of divisors; Chinese remainder theorem.
* ``combinatorics``: C(n, k); podium orders P(n, k); arrangements of a word with repeated
  letters; stars and bars; inclusion-exclusion over three divisors.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from fractions import Fraction
from typing import overload

import numpy as np

from mas_envs.math.problem import Problem

__all__ = [
    "EMPTY_V0",
    "LEVELS",
    "SEEDS",
    "TOPICS",
    "VERSIONS",
    "GeneratedIds",
    "content_split",
    "frac_latex",
    "generate",
    "parse_problem_id",
]

TOPICS = ("arith", "algebra", "numtheory", "combinatorics")
LEVELS = (1, 2, 3, 4, 5)

SEEDS: dict[str, range] = {
    "train": range(0, 20_000),
    "validation": range(1_000_000, 1_001_000),
    "test": range(2_000_000, 2_001_000),
}
"""Generator seeds per split (disjoint): a problem id's seed decides its split.

Train holds 20,000 seeds per (topic, level), i.e. 400,000 problems with all topics and levels;
validation and test 1,000 seeds each (20,000 problems). Sized so that the split's ids can be
listed and compared as sets.
"""


VERSIONS = (0, 1)
"""Generator versions, one per env version (``mas/Math-v0``, ``mas/Math-v1``): :func:`generate`."""

EMPTY_V0: dict[str, frozenset[tuple[str, int]]] = {
    "train": frozenset(
        {
            ("algebra", 3),
            ("numtheory", 4),
            ("combinatorics", 1),
            ("combinatorics", 2),
            ("combinatorics", 4),
        }
    ),
    "validation": frozenset({("combinatorics", 1), ("combinatorics", 2), ("combinatorics", 4)}),
    "test": frozenset(),
}
"""Version 0's (topic, level) pairs that a split never serves: they have so few distinct
questions (33 to 300) that every one is also a question of a later split, which ``reset`` redraws
(``tests/envs/test_math_env.py`` recomputes this table). Version 1 has none."""

_CONTENT_SHARES = (("train", 8), ("validation", 1), ("test", 1))
_MAX_DRAWS = 5_000


def content_split(question: str) -> str:
    """The split a version-1 question belongs to: a stable hash of its text, 80/10/10."""
    h = int.from_bytes(hashlib.blake2b(question.encode("utf-8"), digest_size=8).digest(), "big")
    slot = h % sum(n for _, n in _CONTENT_SHARES)
    for split, n in _CONTENT_SHARES:
        if slot < n:
            return split
        slot -= n
    raise AssertionError("unreachable")


def _seed_split(seed: int) -> str | None:
    return next((split for split, seeds in SEEDS.items() if seed in seeds), None)


class GeneratedIds(Sequence[str]):
    """The problem ids of one split, listed lazily: every (topic, level) for each seed in turn.

    ``ids[i]`` is ``f"{topic}/{level}/{seed}"``; membership parses the id instead of searching.
    """

    def __init__(self, topics: Iterable[str], levels: Iterable[int], seeds: range) -> None:
        self.combos = tuple((t, lvl) for t in topics for lvl in levels)
        self.seeds = seeds
        self._n = len(self.combos) * len(seeds)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"problem index {i} out of range for {self._n} problems")
        seed, combo = divmod(i, len(self.combos))
        topic, level = self.combos[combo]
        return f"{topic}/{level}/{self.seeds[seed]}"

    def __contains__(self, problem_id: object) -> bool:
        if not isinstance(problem_id, str):
            return False
        try:
            topic, level, seed = parse_problem_id(problem_id)
        except ValueError:
            return False
        return (topic, level) in self.combos and seed in self.seeds

    def __iter__(self) -> Iterator[str]:
        for seed in self.seeds:
            for topic, level in self.combos:
                yield f"{topic}/{level}/{seed}"


# (question, answer, solution, code)
Draft = tuple[str, str, str, str]


def parse_problem_id(problem_id: str) -> tuple[str, int, int]:
    """Split ``"<topic>/<level>/<seed>"`` into its parts, with a clear error when malformed."""
    parts = problem_id.split("/")
    if (
        len(parts) != 3
        or parts[0] not in TOPICS
        or not parts[1].isdigit()
        or int(parts[1]) not in LEVELS
        or not parts[2].isdigit()
    ):
        raise ValueError(
            f"bad generated problem id {problem_id!r}: expected '<topic>/<level>/<seed>' with "
            f"topic in {list(TOPICS)}, level in {list(LEVELS)} and seed a non-negative integer, "
            f"e.g. 'arith/3/12345'"
        )
    return parts[0], int(parts[1]), int(parts[2])


def generate(problem_id: str, version: int = 0) -> Problem:
    """The problem ``problem_id`` (``"<topic>/<level>/<seed>"``), built deterministically.

    Args:
        problem_id: ``"<topic>/<level>/<seed>"``.
        version: ``0`` (``mas/Math-v0``): one draw from the seed's generator. ``1``
            (``mas/Math-v1``): larger spaces for the five small (topic, level) pairs of
            :data:`EMPTY_V0`, and the splits partition the *questions*: the seed's generator
            draws until the question's :func:`content_split` is the seed's split (a seed outside
            every split takes the first draw), so no question is in two splits and every
            (topic, level) has questions in each split.

    Raises:
        ValueError: A malformed id or version.
    """
    topic, level, seed = parse_problem_id(problem_id)
    if version not in VERSIONS:
        raise ValueError(f"generator version must be one of {list(VERSIONS)}, got {version!r}")
    rng = np.random.default_rng([seed, level, TOPICS.index(topic)])
    if version == 0:
        question, answer, solution, code = _GENERATORS[topic][level - 1](rng)
    else:
        make = _GENERATORS_V1[topic][level - 1]
        split = _seed_split(seed)
        for _ in range(_MAX_DRAWS):
            question, answer, solution, code = make(rng)
            if split is None or content_split(question) == split:
                break
        else:  # pragma: no cover - every version-1 space has hundreds of questions per split
            raise ValueError(f"{problem_id}: no {split} question in {_MAX_DRAWS} draws")
    return Problem(
        id=problem_id,
        question=question,
        answer=answer,
        source="generated",
        topic=topic,
        level=level,
        solution=solution,
        code=code,
    )


def frac_latex(x: Fraction | int) -> str:
    """``Fraction(-3, 4)`` -> ``-\\frac{3}{4}``; integers as plain digits."""
    x = Fraction(x)
    if x.denominator == 1:
        return str(x.numerator)
    sign = "-" if x < 0 else ""
    return f"{sign}\\frac{{{abs(x.numerator)}}}{{{x.denominator}}}"


def _int(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A uniform integer in ``[lo, hi]`` as a Python int (no numpy overflow downstream)."""
    return int(rng.integers(lo, hi + 1))


def _nonzero(rng: np.random.Generator, lo: int, hi: int) -> int:
    while True:
        v = _int(rng, lo, hi)
        if v:
            return v


def _signed(v: int) -> str:
    """``v`` as a term after another one: ``+ 3`` or ``- 3``."""
    return f"+ {v}" if v >= 0 else f"- {-v}"


def _linear(a: int, var: str, b: int) -> str:
    """``a*var + b`` in LaTeX, without ``1x`` or ``+ 0``."""
    coef = {1: "", -1: "-"}.get(a, str(a))
    return f"{coef}{var}" + (f" {_signed(b)}" if b else "")


# ---------------------------------------------------------------------------- arithmetic


def _arith1(rng: np.random.Generator) -> Draft:
    a, b = _int(rng, 10, 99), _int(rng, 1, 99)
    op = "+" if rng.random() < 0.5 else "-"
    ans = a + b if op == "+" else a - b
    return (
        f"Compute ${a} {op} {b}$.",
        str(ans),
        f"${a} {op} {b} = {ans}$.",
        f"print({a} {op} {b})",
    )


def _arith2(rng: np.random.Generator) -> Draft:
    a, b = _int(rng, 12, 99), _int(rng, 11, 999)
    if rng.random() < 0.5:
        return (
            f"Compute ${a} \\times {b}$.",
            str(a * b),
            f"${a} \\times {b} = {a * b}$.",
            f"print({a} * {b})",
        )
    return (
        f"Compute ${a * b} \\div {a}$.",
        str(b),
        f"${a} \\times {b} = {a * b}$, so the quotient is ${b}$.",
        f"print({a * b} // {a})",
    )


def _arith3(rng: np.random.Generator) -> Draft:
    a, b, c, d = (_int(rng, 2, 30) for _ in range(4))
    e = _int(rng, 2, 9)
    ans = a + b * (c - d) - e * e
    expr = f"{a} + {b} \\times ({c} - {d}) - {e}^2"
    return (
        f"Compute ${expr}$.",
        str(ans),
        f"Parentheses first: ${c} - {d} = {c - d}$; then ${b} \\times {c - d} = "
        f"{b * (c - d)}$ and ${e}^2 = {e * e}$; so ${a} {_signed(b * (c - d))} - {e * e} = "
        f"{ans}$.",
        f"print({a} + {b} * ({c} - {d}) - {e}**2)",
    )


def _arith4(rng: np.random.Generator) -> Draft:
    b, d = _int(rng, 2, 12), _int(rng, 2, 12)
    a, c = _int(rng, 1, b - 1), _int(rng, 1, d - 1)
    op = "+" if rng.random() < 0.5 else "-"
    ans = Fraction(a, b) + Fraction(c, d) if op == "+" else Fraction(a, b) - Fraction(c, d)
    return (
        f"Compute $\\frac{{{a}}}{{{b}}} {op} \\frac{{{c}}}{{{d}}}$ and give the result as a "
        f"fraction in lowest terms.",
        frac_latex(ans),
        f"Over the common denominator ${b * d}$: $\\frac{{{a * d}}}{{{b * d}}} {op} "
        f"\\frac{{{c * b}}}{{{b * d}}} = {frac_latex(ans)}$.",
        f"from fractions import Fraction\nprint(Fraction({a}, {b}) {op} Fraction({c}, {d}))",
    )


def _arith5(rng: np.random.Generator) -> Draft:
    a, b = _int(rng, 1, 9), _int(rng, 2, 9)
    c, d = _int(rng, 1, 12), _int(rng, 2, 12)
    e, f = _int(rng, 1, 9), _int(rng, 2, 9)
    ans = Fraction(a, b) ** 2 * Fraction(c, d) - Fraction(e, f)
    return (
        f"Compute $\\left(\\frac{{{a}}}{{{b}}}\\right)^2 \\cdot \\frac{{{c}}}{{{d}}} - "
        f"\\frac{{{e}}}{{{f}}}$ exactly.",
        frac_latex(ans),
        f"$\\left(\\frac{{{a}}}{{{b}}}\\right)^2 = \\frac{{{a * a}}}{{{b * b}}}$, times "
        f"$\\frac{{{c}}}{{{d}}}$ is ${frac_latex(Fraction(a * a * c, b * b * d))}$; minus "
        f"$\\frac{{{e}}}{{{f}}}$ gives ${frac_latex(ans)}$.",
        f"from fractions import Fraction as F\nprint(F({a}, {b})**2 * F({c}, {d}) - F({e}, {f}))",
    )


# ---------------------------------------------------------------------------- algebra


def _algebra1(rng: np.random.Generator) -> Draft:
    x, a, b = _int(rng, -20, 20), _nonzero(rng, -9, 9), _int(rng, -50, 50)
    c = a * x + b
    return (
        f"Solve for $x$: ${_linear(a, 'x', b)} = {c}$.",
        str(x),
        f"${_linear(a, 'x', 0)} = {c - b}$, so $x = {x}$.",
        f"# a*x + b = c\nprint(({c} - ({b})) // ({a}))",
    )


def _algebra2(rng: np.random.Generator) -> Draft:
    a, c = _nonzero(rng, -9, 9), _nonzero(rng, -9, 9)
    while c == a:
        c = _nonzero(rng, -9, 9)
    b, d = _int(rng, -30, 30), _int(rng, -30, 30)
    x = Fraction(d - b, a - c)
    return (
        f"Solve for $x$: ${_linear(a, 'x', b)} = {_linear(c, 'x', d)}$. Give an exact answer.",
        frac_latex(x),
        f"Collect terms: ${_linear(a - c, 'x', 0)} = {d - b}$, so $x = {frac_latex(x)}$.",
        f"from fractions import Fraction\nprint(Fraction({d} - ({b}), {a} - ({c})))",
    )


def _algebra3(rng: np.random.Generator) -> Draft:
    r = _int(rng, -12, 12)
    s = _int(rng, -12, 12)
    while s == r:
        s = _int(rng, -12, 12)
    r, s = min(r, s), max(r, s)
    p, q = -(r + s), r * s
    poly = "x^2" + (f" {_signed(p)}x" if p else "") + (f" {_signed(q)}" if q else "")
    poly = poly.replace(" + 1x", " + x").replace(" - 1x", " - x")
    return (
        f"Find all real solutions of ${poly} = 0$. List them separated by commas.",
        f"{r}, {s}",
        f"The quadratic factors as $(x {_signed(-r)})(x {_signed(-s)}) = 0$, so $x = {r}$ or "
        f"$x = {s}$.",
        f"import math\np, q = {p}, {q}\nd = math.isqrt(p * p - 4 * q)\n"
        f"print(f'{{(-p - d) // 2}}, {{(-p + d) // 2}}')",
    )


def _algebra4(rng: np.random.Generator) -> Draft:
    x, y = _int(rng, -10, 10), _int(rng, -10, 10)
    while True:
        a, b, c, d = (_nonzero(rng, -7, 7) for _ in range(4))
        if a * d - b * c:
            break
    e, f = a * x + b * y, c * x + d * y

    def lhs(p: int, q: int) -> str:
        ycoef = "" if abs(q) == 1 else str(abs(q))
        return f"{_linear(p, 'x', 0)} {'+' if q > 0 else '-'} {ycoef}y"

    eq1, eq2 = lhs(a, b), lhs(c, d)
    return (
        f"Solve the system $\\begin{{cases}} {eq1} = {e} \\\\ {eq2} = {f} \\end{{cases}}$ and "
        f"give the ordered pair $(x, y)$.",
        f"({x}, {y})",
        f"By Cramer's rule with determinant ${a * d - b * c}$: $x = {x}$, $y = {y}$.",
        f"from fractions import Fraction as F\na, b, c, d, e, f = {a}, {b}, {c}, {d}, {e}, {f}\n"
        f"det = a * d - b * c\nprint(f'({{F(e * d - b * f, det)}}, {{F(a * f - e * c, det)}})')",
    )


def _surd(n: int) -> tuple[int, int]:
    """``n = k*k*m`` with ``m`` squarefree: returns ``(k, m)``."""
    k = 1
    for p in range(2, math.isqrt(n) + 1):
        while n % (p * p) == 0:
            n //= p * p
            k *= p
    return k, n


def _algebra5(rng: np.random.Generator) -> Draft:
    while True:
        a, b, c = _int(rng, 1, 6), _int(rng, -12, 12), _int(rng, -15, 15)
        disc = b * b - 4 * a * c
        if disc > 0 and math.isqrt(disc) ** 2 != disc:
            break
    k, m = _surd(disc)
    # Larger root (-b + k sqrt(m)) / (2a), reduced by the gcd of -b, k and 2a.
    g = math.gcd(math.gcd(b, k), 2 * a)
    num0, kk, den = -b // g, k // g, 2 * a // g
    root = f"{kk if kk != 1 else ''}\\sqrt{{{m}}}"
    top = f"{num0} + {root}" if num0 else root
    answer = top if den == 1 else f"\\frac{{{top}}}{{{den}}}"
    poly = (
        f"{'' if a == 1 else a}x^2"
        + (f" {_signed(b)}x" if b else "")
        + (f" {_signed(c)}" if c else "")
    )
    poly = poly.replace(" + 1x", " + x").replace(" - 1x", " - x")
    return (
        f"Find the larger real root of ${poly} = 0$. Give an exact answer.",
        answer,
        f"The discriminant is $({b})^2 - 4 \\cdot {a} \\cdot ({c}) = {disc}$, so the larger "
        f"root is $\\frac{{{-b} + \\sqrt{{{disc}}}}}{{{2 * a}}} = {answer}$.",
        f"import math\na, b, c = {a}, {b}, {c}\n"
        f"print((-b + math.sqrt(b * b - 4 * a * c)) / (2 * a))",
    )


# ---------------------------------------------------------------------------- number theory


def _nt1(rng: np.random.Generator) -> Draft:
    g = _int(rng, 2, 30)
    a, b = g * _int(rng, 2, 40), g * _int(rng, 2, 40)
    ans = math.gcd(a, b)
    return (
        f"What is the greatest common divisor of ${a}$ and ${b}$?",
        str(ans),
        f"By the Euclidean algorithm, $\\gcd({a}, {b}) = {ans}$.",
        f"import math\nprint(math.gcd({a}, {b}))",
    )


def _nt2(rng: np.random.Generator) -> Draft:
    a, b = _int(rng, 4, 90), _int(rng, 4, 90)
    ans = math.lcm(a, b)
    return (
        f"What is the least common multiple of ${a}$ and ${b}$?",
        str(ans),
        f"$\\operatorname{{lcm}}({a}, {b}) = \\frac{{{a} \\cdot {b}}}{{\\gcd({a}, {b})}} = {ans}$.",
        f"import math\nprint(math.lcm({a}, {b}))",
    )


def _nt3(rng: np.random.Generator) -> Draft:
    a, e, m = _int(rng, 2, 60), _int(rng, 10, 200), _int(rng, 3, 60)
    ans = pow(a, e, m)
    return (
        f"What is the remainder when ${a}^{{{e}}}$ is divided by ${m}$?",
        str(ans),
        f"By repeated squaring modulo ${m}$, ${a}^{{{e}}} \\equiv {ans} \\pmod{{{m}}}$.",
        f"print(pow({a}, {e}, {m}))",
    )


def _nt4(rng: np.random.Generator) -> Draft:
    exps = {p: _int(rng, 0, 3 if p < 7 else 1) for p in (2, 3, 5, 7, 11)}
    exps[2] = max(exps[2], 1)
    return _divisor_count(exps)


def _divisor_count(exps: dict[int, int]) -> Draft:
    """How many divisors the number with prime exponents ``exps`` has."""
    n = math.prod(p**k for p, k in exps.items())
    ans = math.prod(k + 1 for k in exps.values())
    fact = " \\cdot ".join(f"{p}^{{{k}}}" if k > 1 else str(p) for p, k in exps.items() if k)
    count = " \\cdot ".join(f"({k} + 1)" for k in exps.values() if k)
    return (
        f"How many positive divisors does ${n}$ have?",
        str(ans),
        f"${n} = {fact}$, so it has ${count} = {ans}$ divisors.",
        f"import math\nn = {n}\n"
        f"print(sum(2 - (d * d == n) for d in range(1, math.isqrt(n) + 1) if n % d == 0))",
    )


_COPRIME_PAIRS = [
    (m1, m2) for m1 in range(3, 20) for m2 in range(m1 + 1, 24) if math.gcd(m1, m2) == 1
]


def _nt5(rng: np.random.Generator) -> Draft:
    m1, m2 = _COPRIME_PAIRS[_int(rng, 0, len(_COPRIME_PAIRS) - 1)]
    x = _int(rng, 1, m1 * m2)
    r1, r2 = x % m1, x % m2
    return (
        f"Find the smallest positive integer $x$ such that $x \\equiv {r1} \\pmod{{{m1}}}$ and "
        f"$x \\equiv {r2} \\pmod{{{m2}}}$.",
        str(x),
        f"Since $\\gcd({m1}, {m2}) = 1$, the Chinese remainder theorem gives one solution "
        f"modulo ${m1 * m2}$; checking ${r1}, {r1 + m1}, {r1 + 2 * m1}, \\ldots$ gives $x = {x}$.",
        f"print(next(x for x in range(1, {m1 * m2 + 1}) if x % {m1} == {r1} and x % {m2} == {r2}))",
    )


# ---------------------------------------------------------------------------- combinatorics


def _comb1(rng: np.random.Generator) -> Draft:
    n = _int(rng, 5, 15)
    return _committee(n, _int(rng, 2, n - 2))


def _committee(n: int, k: int) -> Draft:
    """Committees of ``k`` from ``n`` people."""
    ans = math.comb(n, k)
    return (
        f"In how many ways can a committee of ${k}$ people be chosen from ${n}$ people?",
        str(ans),
        f"$\\binom{{{n}}}{{{k}}} = {ans}$.",
        f"import math\nprint(math.comb({n}, {k}))",
    )


def _comb2(rng: np.random.Generator) -> Draft:
    n = _int(rng, 5, 15)
    return _podium(n, _int(rng, 2, 4))


def _podium(n: int, k: int) -> Draft:
    """Ordered first ``k`` places among ``n`` runners."""
    ans = math.perm(n, k)
    product = " \\cdot ".join(str(n - i) for i in range(k))
    return (
        f"${n}$ runners race. In how many ways can the first ${k}$ places be awarded (no ties)?",
        str(ans),
        f"${product} = {ans}$.",
        f"import math\nprint(math.perm({n}, {k}))",
    )


def _comb3(rng: np.random.Generator) -> Draft:
    letters = "ABCDEFGH"[: _int(rng, 2, 4)]
    counts = [_int(rng, 1, 3) for _ in letters]
    word = "".join(letter * c for letter, c in zip(letters, counts, strict=True))
    word = "".join(word[i] for i in rng.permutation(len(word)))
    ans = math.factorial(len(word)) // math.prod(math.factorial(c) for c in counts)
    reps = " ".join(f"{c}!" for c in Counter(word).values())
    return (
        f"How many distinct arrangements of the letters of the word {word} are there?",
        str(ans),
        f"$\\frac{{{len(word)}!}}{{{reps}}} = {ans}$.",
        f"from collections import Counter\nfrom math import factorial, prod\n"
        f"word = '{word}'\n"
        f"print(factorial(len(word)) // prod(factorial(c) for c in Counter(word).values()))",
    )


def _comb4(rng: np.random.Generator) -> Draft:
    k, n = _int(rng, 2, 5), _int(rng, 3, 15)
    return _stars_and_bars(n, k)


def _stars_and_bars(n: int, k: int) -> Draft:
    """Solutions of ``x_1 + ... + x_k = n`` in non-negative integers."""
    ans = math.comb(n + k - 1, k - 1)
    xs = " + ".join(f"x_{i + 1}" for i in range(k))
    return (
        f"How many solutions in non-negative integers does ${xs} = {n}$ have?",
        str(ans),
        f"Stars and bars: $\\binom{{{n} + {k} - 1}}{{{k} - 1}} = {ans}$.",
        f"import math\nprint(math.comb({n + k - 1}, {k - 1}))",
    )


def _comb5(rng: np.random.Generator) -> Draft:
    a, b, c = sorted(int(v) for v in rng.choice([2, 3, 4, 5, 6, 7, 9, 10, 11], 3, replace=False))
    n = _int(rng, 50, 1000)

    def cnt(d: int) -> int:
        return n // d

    ab, ac, bc, abc = math.lcm(a, b), math.lcm(a, c), math.lcm(b, c), math.lcm(a, b, c)
    ans = n - cnt(a) - cnt(b) - cnt(c) + cnt(ab) + cnt(ac) + cnt(bc) - cnt(abc)
    return (
        f"How many integers from $1$ to ${n}$ are divisible by none of ${a}$, ${b}$ and ${c}$?",
        str(ans),
        f"Inclusion-exclusion: ${n} - {cnt(a)} - {cnt(b)} - {cnt(c)} + {cnt(ab)} + {cnt(ac)} + "
        f"{cnt(bc)} - {cnt(abc)} = {ans}$.",
        f"print(sum(1 for i in range(1, {n + 1}) if i % {a} and i % {b} and i % {c}))",
    )


_GENERATORS: dict[str, tuple[Callable[[np.random.Generator], Draft], ...]] = {
    "arith": (_arith1, _arith2, _arith3, _arith4, _arith5),
    "algebra": (_algebra1, _algebra2, _algebra3, _algebra4, _algebra5),
    "numtheory": (_nt1, _nt2, _nt3, _nt4, _nt5),
    "combinatorics": (_comb1, _comb2, _comb3, _comb4, _comb5),
}


# ---------------------------------------------------------------------------- version 1
# Larger spaces for the (topic, level) pairs of EMPTY_V0 (33 to 300 distinct questions in
# version 0): same skills, wider ranges, a second kind of question where the range alone is small.


def _algebra3_v1(rng: np.random.Generator) -> Draft:
    a = _int(rng, 1, 5)
    r = _int(rng, -15, 15)
    s = _int(rng, -15, 15)
    while s == r:
        s = _int(rng, -15, 15)
    r, s = min(r, s), max(r, s)
    b, c = -a * (r + s), a * r * s
    lead = "" if a == 1 else str(a)
    poly = f"{lead}x^2" + (f" {_signed(b)}x" if b else "") + (f" {_signed(c)}" if c else "")
    poly = poly.replace(" + 1x", " + x").replace(" - 1x", " - x")
    divide = f"Dividing by ${a}$, the" if a > 1 else "The"
    return (
        f"Find all real solutions of ${poly} = 0$. List them separated by commas.",
        f"{r}, {s}",
        f"{divide} quadratic factors as $(x {_signed(-r)})(x {_signed(-s)}) = 0$, so $x = {r}$ "
        f"or $x = {s}$.",
        f"import math\na, b, c = {a}, {b}, {c}\nd = math.isqrt(b * b - 4 * a * c)\n"
        f"print(f'{{(-b - d) // (2 * a)}}, {{(-b + d) // (2 * a)}}')",
    )


_NT4_V1_EXPONENTS = {2: (1, 5), 3: (0, 3), 5: (0, 2), 7: (0, 2), 11: (0, 1), 13: (0, 1)}


def _nt4_v1(rng: np.random.Generator) -> Draft:
    return _divisor_count({p: _int(rng, lo, hi) for p, (lo, hi) in _NT4_V1_EXPONENTS.items()})


def _comb1_v1(rng: np.random.Generator) -> Draft:
    if _int(rng, 0, 1) == 0:
        n = _int(rng, 5, 30)
        return _committee(n, _int(rng, 2, n - 2))
    w, m = _int(rng, 3, 10), _int(rng, 3, 10)
    a, b = _int(rng, 1, w - 1), _int(rng, 1, m - 1)
    ans = math.comb(w, a) * math.comb(m, b)
    return (
        f"In how many ways can a committee of ${a}$ women and ${b}$ men be chosen from ${w}$ "
        f"women and ${m}$ men?",
        str(ans),
        f"Choose the women and the men independently: $\\binom{{{w}}}{{{a}}} \\cdot "
        f"\\binom{{{m}}}{{{b}}} = {math.comb(w, a)} \\cdot {math.comb(m, b)} = {ans}$.",
        f"import math\nprint(math.comb({w}, {a}) * math.comb({m}, {b}))",
    )


def _comb2_v1(rng: np.random.Generator) -> Draft:
    n = _int(rng, 5, 60)
    return _podium(n, _int(rng, 2, 5))


def _comb4_v1(rng: np.random.Generator) -> Draft:
    k = _int(rng, 2, 6)
    if _int(rng, 0, 1) == 0:
        return _stars_and_bars(_int(rng, 3, 30), k)
    xs = " + ".join(f"x_{i + 1}" for i in range(k))
    n = _int(rng, k + 1, 30)
    ans = math.comb(n - 1, k - 1)
    return (
        f"How many solutions in positive integers does ${xs} = {n}$ have?",
        str(ans),
        f"Stars and bars (give each variable 1 first): $\\binom{{{n} - 1}}{{{k} - 1}} = {ans}$.",
        f"import math\nprint(math.comb({n - 1}, {k - 1}))",
    )


_GENERATORS_V1: dict[str, tuple[Callable[[np.random.Generator], Draft], ...]] = {
    "arith": _GENERATORS["arith"],
    "algebra": (_algebra1, _algebra2, _algebra3_v1, _algebra4, _algebra5),
    "numtheory": (_nt1, _nt2, _nt3, _nt4_v1, _nt5),
    "combinatorics": (_comb1_v1, _comb2_v1, _comb3, _comb4_v1, _comb5),
}
