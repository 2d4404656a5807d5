"""Answer extraction and equivalence: is a model's final answer the same as the ground truth?

``answers_equal(gold, pred)`` decides whether two final answers (LaTeX or plain text, as a model
writes them inside ``\\boxed{}`` or a program prints them) denote the same mathematical object:
integers, decimals, fractions (``\\frac``, ``\\dfrac``, ``3/4``), expressions (``3\\sqrt2`` vs
``\\sqrt{18}``), tuples (ordered), intervals (bracket types count), unordered lists of solutions,
with LaTeX noise (``\\left``, ``^\\circ``, ``\\%``, ``\\$``, ``\\text{cm}``) ignored.

Two backends:

* ``"math-verify"`` (the ``math`` extra, the paper's grader): used whenever it is installed;
* ``"sympy"``: a small LaTeX-to-sympy converter of our own, used when math-verify is missing.
  It evaluates only text made of digits, operators, brackets and a whitelist of names
  (``sqrt``, ``pi``, ``oo``, ...), so model text never reaches ``eval`` with anything else.

Model text is hostile: answers longer than :data:`MAX_ANSWER_CHARS` are never equal to anything,
and exponent towers / huge factorials / brackets nested deeper than :data:`MAX_NESTING` are compared
as normalised strings instead of evaluated (a ``9^{9^{9^9}}`` would otherwise hang sympy).
Results are cached per (gold, pred, backend).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

__all__ = [
    "BACKENDS",
    "MAX_ANSWER_CHARS",
    "MAX_NESTING",
    "answers_equal",
    "default_backend",
    "last_boxed",
    "majority_answer",
    "normalize",
]

MAX_ANSWER_CHARS = 1000
"""Answers longer than this are treated as wrong without being parsed."""

BACKENDS = ("math-verify", "sympy")

_INT = re.compile(r"[+-]?\d+")
_NUM = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")
_TOWER = re.compile(r"(\^|\*\*)\s*[({]?[^^*]{0,40}(\^|\*\*)")
_BIG_FACTORIAL = re.compile(r"(\d{3,}|[)}\]])\s*!")
_BIG_BINOMIAL = re.compile(r"(binom|choose|C\().*\d{4,}")
_BIG_POWER = re.compile(r"(\^|\*\*)\s*[({]?\s*\d{4,}")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_VAR_PREFIX = re.compile(r"^[a-zA-Z]\s*=\s*(?=[^=])")


def default_backend() -> str:
    """``"math-verify"`` when the package is importable, else ``"sympy"``."""
    try:
        import math_verify  # noqa: F401
    except ImportError:
        return "sympy"
    return "math-verify"


_BOX = re.compile(r"\\boxed|\\fbox")
_BARE_BOX = re.compile(r" \s*([^\s${][^\s$]*)")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, or ``None``.

    Nested braces are matched; an unclosed box counts as no box (the box before it is read).
    ``\\boxed 5`` (no braces, as some models write) gives ``"5"``. Linear in ``len(text)``:
    braces are matched in one pass, so thousands of unclosed boxes cannot make it quadratic.
    """
    starts = [m.end() for m in _BOX.finditer(text)]
    if not starts:
        return None
    closing = _matching_braces(text, starts[0])
    for i in reversed(starts):
        bare = _BARE_BOX.match(text, i)
        if bare:
            return bare.group(1)
        j = i
        while j < len(text) and text[j].isspace():
            j += 1
        k = closing.get(j)
        if k is not None:
            return text[j + 1 : k].strip()
    return None


def _matching_braces(text: str, start: int) -> dict[int, int]:
    """``{index of "{": index of its "}"}`` for the braces of ``text[start:]`` that close."""
    closing: dict[int, int] = {}
    stack: list[int] = []
    for m in re.finditer(r"[{}]", text[start:]):
        if m.group() == "{":
            stack.append(start + m.start())
        elif stack:
            closing[stack.pop()] = start + m.start()
    return closing


def normalize(answer: str) -> str:
    """``answer`` without LaTeX noise: spacing, ``\\left``, units in ``\\text{}``, degrees, ``%``.

    Used for the fast exact-match path and, for answers too costly to evaluate, as the comparison.
    """
    s = answer.strip().strip("$").strip()
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    for noise in ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\displaystyle"):
        s = s.replace(noise, "")
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?", "", s).replace("\\circ", "").replace("°", "")
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "")
    stripped = _TEXT_CMD.sub("", s).strip()
    # A \text{...} next to a value is a unit; a \text{...} alone is the answer itself.
    s = stripped if stripped else _TEXT_CMD.sub(r"\1", s)
    s = _VAR_PREFIX.sub("", s)
    s = re.sub(r"\s+", "", s).rstrip(".")
    if re.fullmatch(r"\([A-Za-z]\)", s):  # a multiple-choice letter: (A) is A
        s = s[1]
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    return s


_FRAC = re.compile(r"([+-]?)\\frac\{([+-]?\d{1,30})\}\{(\d{1,30})\}")
_SLASH = re.compile(r"([+-]?)()(\d{1,30})/(\d{1,30})")


def _rational(s: str) -> Fraction | None:
    """The value of a normalised integer, ``a/b`` or ``\\frac{a}{b}``; else ``None``."""
    if _INT.fullmatch(s):
        return Fraction(int(s))
    m = _FRAC.fullmatch(s)
    if m and int(m[3]):
        return Fraction(int(m[2]), int(m[3])) * (-1 if m[1] == "-" else 1)
    m = _SLASH.fullmatch(s)
    if m and int(m[4]):
        return Fraction(int(m[3]), int(m[4])) * (-1 if m[1] == "-" else 1)
    return None


MAX_NESTING = 8
"""Answers with brackets nested deeper than this are compared as text, never parsed: math-verify's
LaTeX parser takes time exponential in the depth (``{{{{{{{{{{{{{{1}}}}}}}}}}}}}}``, depth 14,
took 9 s outside the main thread, where it runs without a timeout). Real answers nest 2-4 deep."""


def _nesting(s: str) -> int:
    """The deepest nesting of ``()``, ``[]`` and ``{}`` in ``s`` (unbalanced ones counted as is)."""
    depth = deepest = 0
    for c in s:
        if c in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in ")]}":
            depth -= 1
    return deepest


def _too_costly(s: str) -> bool:
    """Whether evaluating ``s`` could take sympy or math-verify arbitrarily long (towers, huge
    factorials, deep nesting...)."""
    return _nesting(s) > MAX_NESTING or any(
        p.search(s) for p in (_TOWER, _BIG_FACTORIAL, _BIG_POWER, _BIG_BINOMIAL)
    )


def answers_equal(gold: str, pred: str, backend: str | None = None) -> bool:
    """Whether ``pred`` denotes the same answer as ``gold``.

    Args:
        gold: The ground-truth answer (LaTeX or plain), without ``\\boxed``.
        pred: The candidate answer (LaTeX, or a program's plain output), without ``\\boxed``.
        backend: ``"math-verify"`` or ``"sympy"``; default: :func:`default_backend`.

    Returns:
        True when equal; False when different, unparseable, empty or too long. Never raises on
        model text.
    """
    if backend is None:
        backend = default_backend()
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {list(BACKENDS)}")
    if not isinstance(gold, str) or not isinstance(pred, str):
        raise TypeError(f"answers must be str, got {type(gold).__name__}, {type(pred).__name__}")
    if len(gold) > MAX_ANSWER_CHARS or len(pred) > MAX_ANSWER_CHARS:
        return False
    return _equal_cached(gold, pred, backend)


@functools.lru_cache(maxsize=65536)
def _equal_cached(gold: str, pred: str, backend: str) -> bool:
    g, p = normalize(gold), normalize(pred)
    if not g or not p:
        return False
    if g == p:
        return True
    rg, rp = _rational(g), _rational(p)
    if rg is not None and rp is not None:
        # Exact values with no decimal point: what any checker would decide, 1000x cheaper.
        return rg == rp
    if _too_costly(g) or _too_costly(p):
        return False  # not identical after normalising, and too costly to evaluate
    try:
        if backend == "math-verify":
            return _math_verify_equal(gold, pred)
        return _sympy_equal(g, p)
    except Exception:
        return False


# ---------------------------------------------------------------------------- math-verify


def _math_verify_equal(gold: str, pred: str) -> bool:
    from math_verify import parse, verify

    # math-verify's timeouts use SIGALRM, which only the main thread may set.
    timeout = 2 if threading.current_thread() is threading.main_thread() else None
    parsed = []
    for s in (gold, pred):
        latex = _python_to_latex(s.strip())
        parsed.append(parse(f"\\boxed{{{latex}}}", parsing_timeout=timeout))
    if not parsed[0] or not parsed[1]:
        return False
    return bool(verify(parsed[0], parsed[1], timeout_seconds=timeout))


def _python_to_latex(s: str) -> str:
    """Plain Python-style output (``3/2 + sqrt(13)/2``, ``2*pi``) as LaTeX; other text as is."""
    if "\\" in s or not re.search(r"\*|sqrt\(|\bpi\b|\boo\b", s):
        return s
    import sympy

    try:
        return sympy.latex(_safe_sympify(s))
    except Exception:
        return s


# ---------------------------------------------------------------------------- sympy fallback

_NAMES = {"sqrt", "pi", "oo", "log", "ln", "exp", "sin", "cos", "tan", "E", "I"}
_SAFE_CHARS = re.compile(r"[0-9a-zA-Z+\-*/().,^ ]*")
_LATEX_SUBS = [
    (r"\\infty", " oo "),
    (r"\\pi", " pi "),
    (r"\\(cdot|times)", "*"),
    (r"\\div", "/"),
    (r"\\ln", " log"),
    (r"\\log", " log"),
    (r"\\(sin|cos|tan|exp)", r" \1"),
]


def _latex_to_plain(s: str) -> str:
    """``\\frac{a}{b}`` -> ``((a)/(b))``, ``\\sqrt[n]{x}`` -> ``((x)**(1/(n)))``, braces -> ()."""
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt\s*(\d+)", r"\\sqrt{\1}", s)
    for pattern, repl in _LATEX_SUBS:
        s = re.sub(pattern, repl, s)
    out = []
    i = 0
    while i < len(s):
        if s.startswith("\\frac", i):
            num, i = _group(s, i + 5)
            den, i = _group(s, i)
            out.append(f"(({_latex_to_plain(num)})/({_latex_to_plain(den)}))")
        elif s.startswith("\\sqrt", i):
            i += 5
            index = "2"
            if i < len(s) and s[i] == "[":
                close = s.index("]", i)
                index, i = s[i + 1 : close], close + 1
            arg, i = _group(s, i)
            out.append(f"(({_latex_to_plain(arg)})**(1/({_latex_to_plain(index)})))")
        else:
            out.append(s[i])
            i += 1
    return "".join(out).replace("{", "(").replace("}", ")").replace("^", "**")


def _group(s: str, i: int) -> tuple[str, int]:
    """The brace group (or single character) starting at ``s[i]`` and the index after it."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        raise ValueError("missing argument")
    if s[i] != "{":
        return s[i], i + 1
    depth = 0
    for k in range(i, len(s)):
        depth += {"{": 1, "}": -1}.get(s[k], 0)
        if depth == 0:
            return s[i + 1 : k], k + 1
    raise ValueError("unbalanced braces")


def _safe_sympify(plain: str) -> Any:
    """Parse restricted plain text with sympy; refuse anything outside the whitelist."""
    from sympy.parsing.sympy_parser import (
        convert_xor,
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )

    if not _SAFE_CHARS.fullmatch(plain):
        raise ValueError(f"unsafe characters in {plain!r}")
    for name in re.findall(r"[a-zA-Z]+", plain):
        if name not in _NAMES and len(name) > 1 and not all(c in "xyzabcnmk" for c in name):
            raise ValueError(f"unknown name {name!r}")
    plain = re.sub(r"\bln\b", "log", plain)
    transformations = (*standard_transformations, implicit_multiplication_application, convert_xor)
    return parse_expr(plain, transformations=transformations, evaluate=True)


def _split_top(s: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


def _structure(s: str) -> tuple[str, list[str]]:
    """(kind, elements): kind is ``"x"`` (one value), ``"set"``, or the bracket pair of a tuple."""
    if s.startswith("\\{") and s.endswith("\\}"):
        return "set", _split_top(s[2:-2])
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and len(_split_top(s[1:-1])) > 1:
        return s[0] + s[-1], _split_top(s[1:-1])
    parts = _split_top(s)
    return ("set", parts) if len(parts) > 1 else ("x", parts)


def _sympy_equal(g: str, p: str) -> bool:
    kind_g, elems_g = _structure(g)
    kind_p, elems_p = _structure(p)
    if kind_g != kind_p or len(elems_g) != len(elems_p):
        return False
    values_g = [_value(e) for e in elems_g]
    values_p = [_value(e) for e in elems_p]
    if kind_g == "set":
        unused = list(values_p)
        for v in values_g:
            match = next((u for u in unused if _values_equal(v, u)), None)
            if match is None:
                return False
            unused.remove(match)
        return True
    return all(_values_equal(a, b) for a, b in zip(values_g, values_p, strict=True))


def _value(element: str) -> Any:
    e = _VAR_PREFIX.sub("", element.strip())
    if _NUM.fullmatch(e):
        return Fraction(e)
    if re.fullmatch(r"[+-]?\d+/\d+", e):
        return Fraction(e)
    return _safe_sympify(_latex_to_plain(e))


def _values_equal(a: Any, b: Any) -> bool:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a == b
    import sympy

    a, b = (
        sympy.Rational(v.numerator, v.denominator) if isinstance(v, Fraction) else v for v in (a, b)
    )
    if a == b:  # also settles oo == oo, where a - b is nan
        return True
    diff = a - b
    if diff.free_symbols:
        return bool(sympy.simplify(diff) == 0)
    value = complex(sympy.N(diff, 30))
    scale = max(1.0, abs(complex(sympy.N(b, 30))))
    return abs(value) <= 1e-9 * scale


def majority_answer(answers: Sequence[str | None], backend: str | None = None) -> str | None:
    """The team's answer: the largest group of verified-equal answers, ties to the earliest.

    ``None`` entries (no answer yet) do not vote. The group's earliest answer represents it.
    Returns ``None`` when nobody answered.
    """
    groups: list[list[int]] = []
    for i, ans in enumerate(answers):
        if ans is None:
            continue
        for group in groups:
            if answers_equal(answers[group[0]] or "", ans, backend):
                group.append(i)
                break
        else:
            groups.append([i])
    if not groups:
        return None
    # max() keeps the first of equal keys, and groups are ordered by their earliest member.
    best = max(groups, key=len)
    return answers[best[0]]
