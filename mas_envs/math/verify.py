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

Every evaluation is bounded in time, in any thread: :func:`compare_answers` says ``"equal"``,
``"different"`` or ``"unverifiable"`` (the comparison did not finish within
:data:`GRADE_TIMEOUT_S`; :func:`answers_equal` counts it as not equal). Exact matches and plain
numbers are decided at once; what needs math-verify or sympy runs

* on the main thread: in this process, under a ``SIGALRM`` interval timer (math-verify's own
  signal timeouts would need the main thread too, and do not cover the sympy backend);
* on any other thread (a trainer's rollout threads), or when the main thread's alarm timer is
  busy: in a grader worker process (a fresh interpreter that loads this file; at most
  :data:`MAX_WORKERS` of them, started when first needed, each reused), which is killed and
  replaced when it overruns. ``(x+y+z+1)^{99}`` (14 characters, past every guard below) keeps
  math-verify and sympy busy for over a minute; off the main thread it used to have no limit.

Results are cached per (gold, pred, backend).
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, Literal

__all__ = [
    "BACKENDS",
    "GRADE_TIMEOUT_S",
    "MAX_ANSWER_CHARS",
    "MAX_NESTING",
    "MAX_WORKERS",
    "Outcome",
    "answers_equal",
    "compare_answers",
    "default_backend",
    "last_boxed",
    "majority_answer",
    "normalize",
]

MAX_ANSWER_CHARS = 1000
"""Answers longer than this are treated as wrong without being parsed."""

BACKENDS = ("math-verify", "sympy")

GRADE_TIMEOUT_S = 5.0
"""Seconds one comparison may spend in math-verify or sympy; then it is ``"unverifiable"``.
(math-verify's own limits were 2 s per parse and 2 s for the comparison, on the main thread.)"""
MAX_WORKERS = max(1, min(4, os.cpu_count() or 1))
"""Grader worker processes at most (comparisons off the main thread wait for a free one)."""
WORKER_START_S = 120.0
"""Seconds a grader worker may take to start (importing sympy and math-verify on a busy host)."""

Outcome = Literal["equal", "different", "unverifiable"]

log = logging.getLogger("mas_envs.math")

_INT = re.compile(r"[+-]?\d+")
_NUM = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")
_TOWER = re.compile(r"(\^|\*\*)\s*[({]?[^^*,]{0,40}(\^|\*\*)")  # not across list items
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
        True when equal; False when different, unparseable, empty, too long or unverifiable
        in :data:`GRADE_TIMEOUT_S` (see :func:`compare_answers`). Never raises on model text.
    """
    return compare_answers(gold, pred, backend) == "equal"


def compare_answers(gold: str, pred: str, backend: str | None = None) -> Outcome:
    """Compare two final answers, in bounded time from any thread.

    Args:
        gold: The ground-truth answer (LaTeX or plain), without ``\\boxed``.
        pred: The candidate answer, without ``\\boxed``.
        backend: ``"math-verify"`` or ``"sympy"``; default: :func:`default_backend`.

    Returns:
        ``"equal"``; ``"different"`` (also: unparseable, empty or too long); or
        ``"unverifiable"``: the evaluation did not finish within :data:`GRADE_TIMEOUT_S` (or
        its grader worker could not run). Never raises on model text.

    Example:
        >>> compare_answers("\\frac{1}{2}", "0.5")
        'equal'
    """
    if backend is None:
        backend = default_backend()
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {list(BACKENDS)}")
    if not isinstance(gold, str) or not isinstance(pred, str):
        raise TypeError(f"answers must be str, got {type(gold).__name__}, {type(pred).__name__}")
    if len(gold) > MAX_ANSWER_CHARS or len(pred) > MAX_ANSWER_CHARS:
        return "different"
    return _compare_cached(gold, pred, backend)


@functools.lru_cache(maxsize=65536)
def _compare_cached(gold: str, pred: str, backend: str) -> Outcome:
    g, p = normalize(gold), normalize(pred)
    if not g or not p:
        return "different"
    if g == p:
        return "equal"
    rg, rp = _rational(g), _rational(p)
    if rg is not None and rp is not None:
        # Exact values with no decimal point: what any checker would decide, 1000x cheaper.
        return "equal" if rg == rp else "different"
    if _too_costly(g) or _too_costly(p):
        return "different"  # not identical after normalising, and too costly to evaluate
    return _bounded(gold, pred, backend, GRADE_TIMEOUT_S)


def _evaluate(gold: str, pred: str, backend: str) -> bool:
    """The costly comparison itself (no time limit of its own)."""
    try:
        if backend == "math-verify":
            return _math_verify_equal(gold, pred)
        return _sympy_equal(normalize(gold), normalize(pred))
    except Exception:
        return False


# ---------------------------------------------------------------------------- time limits


class _Overrun(BaseException):
    """Raised by the alarm; a BaseException, so sympy's ``except Exception`` cannot swallow it."""


class _Alarm:
    armed = False
    """Whether an alarm raises now: only while :func:`_with_alarm` runs its function."""


def _on_alarm(signum: int, frame: Any) -> None:
    if _Alarm.armed:
        raise _Overrun


def _alarm_free() -> bool:
    """Whether this thread may use ``SIGALRM`` now (the main thread, no timer of someone else)."""
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    )


def _with_alarm(fn: Callable[[], bool], timeout: float) -> Outcome:
    """``fn()`` under an interval timer on the main thread; ``"unverifiable"`` when it overruns."""
    old = signal.signal(signal.SIGALRM, _on_alarm)
    outcome: Outcome = "unverifiable"
    try:
        _Alarm.armed = True
        # The interval re-raises every 50 ms in case a library catches BaseException once.
        signal.setitimer(signal.ITIMER_REAL, timeout, 0.05)
        outcome = "equal" if fn() else "different"
    except _Overrun:
        pass
    finally:
        # An alarm can come at any point until the flag is down (under load a second one came
        # before the timer was off, and raised in the caller); from then on it is a no-op.
        while True:
            try:
                _Alarm.armed = False
                break
            except _Overrun:
                continue
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, old)
    return outcome


def _bounded(gold: str, pred: str, backend: str, timeout: float) -> Outcome:
    if _alarm_free():
        return _with_alarm(lambda: _evaluate(gold, pred, backend), timeout)
    return _POOL.compare(gold, pred, backend, timeout)


class _Worker:
    """One grader process: JSON requests on its stdin, one JSON answer line each."""

    def __init__(self) -> None:
        code = (
            "import importlib.util as u, sys\n"
            "s = u.spec_from_file_location('_mas_math_verify_worker', sys.argv[1])\n"
            "m = u.module_from_spec(s)\n"
            "s.loader.exec_module(m)\n"
            "m._worker_main()\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.buf = b""

    def _line(self, deadline: float) -> bytes | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def ready(self) -> bool:
        return self._line(time.monotonic() + WORKER_START_S) == b"ready"

    def ask(self, gold: str, pred: str, backend: str, timeout: float) -> Outcome | None:
        """The worker's outcome; ``None`` when it did not answer in time (then kill it)."""
        assert self.proc.stdin is not None
        request = {"gold": gold, "pred": pred, "backend": backend, "timeout": timeout}
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            return None
        # The worker bounds itself with its alarm; this deadline is for a worker that is stuck.
        line = self._line(time.monotonic() + timeout + 2.0)
        if line is None:
            return None
        outcome = json.loads(line)
        return outcome if outcome in ("equal", "different", "unverifiable") else None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()


class _Pool:
    """Grader workers shared by all threads of this process (started when first needed)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.idle: list[_Worker] = []
        self.busy = 0
        self.pid = os.getpid()

    def _acquire(self) -> _Worker | None:
        with self.cond:
            if self.pid != os.getpid():  # a forked child: the parent's workers are not ours
                self.idle, self.busy, self.pid = [], 0, os.getpid()
            while not self.idle and self.busy >= MAX_WORKERS:
                self.cond.wait()
            self.busy += 1
            if self.idle:
                return self.idle.pop()
        try:
            worker = _Worker()
            if worker.ready():
                return worker
            worker.kill()
        except OSError:
            pass
        self._release(None)
        return None

    def _release(self, worker: _Worker | None) -> None:
        with self.cond:
            self.busy -= 1
            if worker is not None:
                self.idle.append(worker)
            self.cond.notify()

    def compare(self, gold: str, pred: str, backend: str, timeout: float) -> Outcome:
        worker = self._acquire()
        if worker is None:
            log.warning("mas_envs.math: no grader worker could start; answer unverifiable")
            return "unverifiable"
        outcome = worker.ask(gold, pred, backend, timeout)
        if outcome is None:
            worker.kill()
            self._release(None)
            return "unverifiable"
        self._release(worker)
        return outcome

    def close(self) -> None:
        with self.cond:
            workers, self.idle = self.idle, []
        for worker in workers:
            worker.kill()


_POOL = _Pool()
atexit.register(_POOL.close)


def _worker_main() -> None:
    """A grader worker's loop (run by :class:`_Worker` in a fresh interpreter)."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever a library prints must not mix with the answers
    import sympy  # noqa: F401  - loaded now, not inside the first comparison's time

    if default_backend() == "math-verify":
        import math_verify  # noqa: F401
    # One comparison per backend before "ready": their first parse builds grammars and caches
    # (seconds on a busy host), which must not count against the first real answer's time.
    for backend in BACKENDS:
        _evaluate("\\frac{1}{2}", "0.5", backend)  # never raises
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        gold, pred, backend = str(req["gold"]), str(req["pred"]), str(req["backend"])
        outcome = _with_alarm(functools.partial(_evaluate, gold, pred, backend), req["timeout"])
        out.write(json.dumps(outcome) + "\n")
        out.flush()


# ---------------------------------------------------------------------------- math-verify


def _math_verify_equal(gold: str, pred: str) -> bool:
    from math_verify import parse, verify

    # No math-verify timeouts: its SIGALRM would replace ours (see _bounded), which covers the
    # whole comparison, our own conversions included.
    _quiet_math_verify()
    parsed = []
    for s in (gold, pred):
        latex = _python_to_latex(s.strip())
        parsed.append(parse(f"\\boxed{{{latex}}}", parsing_timeout=None))
    if not parsed[0] or not parsed[1]:
        return False
    return bool(verify(parsed[0], parsed[1], timeout_seconds=None))


@functools.cache
def _quiet_math_verify() -> None:
    """Drop math-verify's warning that its timeouts are off: ours are on (see _bounded)."""

    class _NoTimeoutWarning(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "Timeout is disabled" not in record.getMessage()

    for name in ("math_verify.utils", "math_verify.grader", "math_verify.parser", "math_verify"):
        logging.getLogger(name).addFilter(_NoTimeoutWarning())


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
    # In sympy's own numbers (a float overflows at 1e309), and only when both are finite: with
    # an infinite answer the scale was infinite too, and "oo" (or "1e309") equalled everything.
    gap, size = sympy.N(abs(diff), 30), sympy.N(abs(b), 30)
    if not (gap.is_finite and size.is_finite):
        return False
    return bool(gap <= sympy.Float(1e-9) * sympy.Max(1, size))


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
