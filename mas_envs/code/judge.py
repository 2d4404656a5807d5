"""Judging programs: run a program on test cases in the sandbox and compare outputs.

A :class:`Case` is one test: ``stdio`` (stdin text -> expected stdout), ``call`` (the ``repr`` of a
positional-argument tuple -> the ``repr`` of the expected return value) or ``script`` (a HumanEval
assert run next to the function; passes when it raises nothing).

Programs run only through :mod:`mas_envs.sandbox`, one sandbox process per (program, batch of
cases) with :mod:`mas_envs.code.harness` inside; every batch of one env step goes to the sandbox in
one ``run_many`` call, so the pool runs them concurrently. Raw results are cached per (program,
case input, limits) in a bounded cache shared by every env in the process (so an env, its clones
and its tree branches never run the same program on the same input twice, and a clone gets exactly
the result its original got).

Comparison (:func:`outputs_match`, :func:`values_match`) happens here, never in the sandbox:
* ``stdio``: whitespace-separated tokens must be equal; where the EXPECTED token is a
  non-integer number (``0.5``, ``1e-9``), a number within 1e-6 of it (relative or absolute)
  passes too. An expected integer takes exactly that integer: ``5.0`` is not ``5``, and
  ``1000000006.0`` is not ``1000000007``. Trailing whitespace and blank lines never matter;
  letter case does.
* ``call``: Python equality of plain values, lists and tuples interchangeable (JSON-sourced tests
  have no tuples); an expected float takes a number within 1e-6, an expected int only a number
  equal to it (``5.0`` for ``5``, never ``1000000006.0`` for ``1000000007``); a bool equals only a
  bool (``True`` is not ``1``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "Case",
    "CaseResult",
    "Request",
    "outputs_match",
    "run_requests",
    "values_match",
]

CaseKind = Literal["stdio", "call", "script"]
HARNESS_SOURCE = (Path(__file__).with_name("harness.py")).read_text(encoding="utf-8")
_MARK = "@@R "


@dataclass(frozen=True)
class Case:
    """One test case.

    Attributes:
        kind: ``"stdio"``, ``"call"`` or ``"script"``.
        input: stdin text; for ``call`` the ``repr`` of the positional-argument tuple; for
            ``script`` the assert statement(s).
        expected: expected stdout; for ``call`` the ``repr`` of the expected value; unused for
            ``script``.
    """

    kind: CaseKind
    input: str
    expected: str = ""


@dataclass(frozen=True)
class CaseResult:
    """The verdict of one program on one case.

    Attributes:
        passed: The program's output matched the expected one.
        status: ``"pass"``, ``"wrong"`` (ran, wrong output), ``"error"`` (crashed or does not
            compile), ``"timeout"``, ``"output_limit"``, ``"skipped"`` (not run: the batch already
            had too many timeouts) or ``"sandbox_error"``.
        output: What the program printed (``stdio``) or returned (``call``, as ``repr``).
        error: The tail of stderr or the reason for the status.
    """

    passed: bool
    status: str
    output: str = ""
    error: str = ""


@dataclass(frozen=True)
class Request:
    """One program to run on some cases.

    Attributes:
        program: The program's source.
        cases: The cases to run it on.
        fn_name: The function under test (``call`` and ``script`` cases).
        setup: Trusted code the checker of ``script`` cases runs first (the problem's helpers).
        hidden: The cases are hidden tests: nothing of them may reach what an agent sees. They
            run in their own sandbox runs, after every run of the call's visible cases, and a
            visible case never reuses their results (see :func:`run_requests`).
    """

    program: str
    cases: tuple[Case, ...]
    fn_name: str | None = None
    setup: str = ""
    hidden: bool = False


# ---------------------------------------------------------------------------- comparison


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _is_int_token(token: str) -> bool:
    return token.lstrip("+-").isdigit()


def outputs_match(got: str, expected: str, *, v0: bool = False) -> bool:
    """Whether ``got`` stdout matches ``expected`` (tokens; within 1e-6 of an expected float).

    ``v0=True``: ``mas/Code-v0``'s rule, kept for its board: the tolerance applied as soon as
    either token was not an integer, so ``1000000006.0`` passed for ``1000000007``."""
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        if _is_int_token(y) and (not v0 or _is_int_token(x)):
            return False  # tolerance is for expected floats only: 5.0 is not the integer 5
        fx, fy = _number(x), _number(y)
        if fx is None or fy is None or not math.isclose(fx, fy, rel_tol=1e-6, abs_tol=1e-6):
            return False
    return True


def values_match(got: Any, expected: Any, depth: int = 0, *, v0: bool = False) -> bool:
    """Whether two plain values are equal (lists = tuples; within 1e-6 of an expected float;
    ``v0=True``: of either float, ``mas/Code-v0``'s rule)."""
    if depth > 100:
        return False
    if isinstance(got, bool) != isinstance(expected, bool):
        return False  # True is not 1 here: a bool answer is not a number
    if isinstance(expected, float) or isinstance(got, float):
        if isinstance(got, bool) or isinstance(expected, bool):
            return got == expected
        if isinstance(got, float) and isinstance(expected, int) and not v0:
            return got == expected  # exact: no tolerance for an expected integer
        if isinstance(got, int | float) and isinstance(expected, int | float):
            if math.isnan(got) and math.isnan(expected):
                return True
            return math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-6)
        return False
    seq = (list, tuple)
    if isinstance(got, seq) and isinstance(expected, seq):
        return len(got) == len(expected) and all(
            values_match(g, e, depth + 1, v0=v0) for g, e in zip(got, expected, strict=True)
        )
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(
            values_match(got[k], expected[k], depth + 1, v0=v0) for k in expected
        )
    if type(got) is not type(expected) and not (isinstance(got, int) and isinstance(expected, int)):
        return False
    try:
        return bool(got == expected)
    except Exception:
        return False


def literal(text: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``text`` is a Python literal, else ``(False, None)``."""
    if text == "set()":
        return True, set()
    try:
        return True, ast.literal_eval(text)
    except Exception:  # SyntaxError, ValueError, RecursionError, MemoryError...
        return False, None


def judge(case: Case, status: str, output: str, error: str, *, v0: bool = False) -> CaseResult:
    """Turn a raw harness result into a verdict against ``case``'s expected output (``v0``:
    ``mas/Code-v0``'s numbers rule, :func:`outputs_match`)."""
    if status != "ok":
        return CaseResult(False, status, output, error)
    if case.kind == "script":
        passed = True
    elif case.kind == "call":
        if output == case.expected:  # fast path: same repr, same value
            return CaseResult(True, "pass", output, error)
        ok_got, got = literal(output)
        ok_exp, exp = literal(case.expected)
        passed = ok_got and ok_exp and values_match(got, exp, v0=v0)
    else:
        passed = outputs_match(output, case.expected, v0=v0)
    return CaseResult(passed, "pass" if passed else "wrong", output, error)


# ---------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run.

    Attributes:
        timeout_s: Wall-clock seconds per test case.
        memory_mb: Memory limit of the sandbox process (harness + the running test).
        max_timeouts: After this many timeouts in one batch the remaining cases are skipped
            (they fail): a program that loops forever costs ``max_timeouts * timeout_s``, not
            ``len(cases) * timeout_s``.
        output_cap: Bytes of output allowed per case, at least; a case whose expected output is
            longer allows twice its length plus 4 KiB. More is an ``output_limit``. (Only
            outputs longer than about half the cap reveal their approximate length to the
            program, through the limit.)
    """

    timeout_s: float = 2.0
    memory_mb: int = 512
    max_timeouts: int = 2
    output_cap: int = 65_536


class _Cache:
    """A bounded LRU map from (program, case input, limits) to a raw harness result."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[bytes, tuple[str, str, str]] = OrderedDict()

    def get(self, key: bytes) -> tuple[str, str, str] | None:
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key: bytes, value: tuple[str, str, str]) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.size:
            self.data.popitem(last=False)


CACHE = _Cache(50_000)
"""The process-wide result cache (deterministic programs give the same result anyway; for the
others it keeps an env and its clones consistent)."""


def _key(req: Request, case: Case, limits: Limits, hidden: bool) -> bytes:
    h = hashlib.blake2b(digest_size=20)
    parts = (req.program, req.fn_name or "", req.setup, case.kind, case.input, repr(limits))
    for part in (*parts, str(case_cap(case, limits)), "hidden" if hidden else "visible"):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.digest()


def _keys(req: Request, case: Case, limits: Limits) -> tuple[bytes, ...]:
    """The cache keys whose result may serve ``case``: its own, and for a hidden case also a
    visible run's (that run held nothing hidden). A visible case never takes a hidden result."""
    visible = _key(req, case, limits, False)
    return (_key(req, case, limits, True), visible) if req.hidden else (visible,)


_BATCH_BYTES = 3 << 20
"""Sum of the output caps of one batch: its report (JSON, ~1.2x) stays under the sandbox's 8 MiB."""


def case_cap(case: Case, limits: Limits) -> int:
    """Bytes of output allowed for ``case`` (see :class:`Limits`)."""
    return max(limits.output_cap, 2 * len(case.expected.encode("utf-8", "replace")) + 4096)


def _batches(cases: list[tuple[int, Case]], limits: Limits) -> list[list[tuple[int, Case]]]:
    batches: list[list[tuple[int, Case]]] = [[]]
    total = 0
    for item in cases:
        cap = case_cap(item[1], limits) + 1024
        if batches[-1] and total + cap > _BATCH_BYTES:
            batches.append([])
            total = 0
        batches[-1].append(item)
        total += cap
    return batches


def _parse_report(stdout: str, n: int) -> dict[int, tuple[str, str, str]]:
    found: dict[int, tuple[str, str, str]] = {}
    for line in stdout.splitlines():
        if not line.startswith(_MARK):
            continue
        try:
            rec = json.loads(line[len(_MARK) :])
            i = int(rec["i"])
            if 0 <= i < n and i not in found:
                found[i] = (str(rec["status"]), str(rec["out"]), str(rec["err"]))
        except (ValueError, KeyError, TypeError):
            continue
    return found


def _harness_stdin(head: dict[str, Any], tests: list[dict[str, Any]]) -> str:
    """The harness's spec: the header's length, the header, then the tests (harness.py)."""
    header = json.dumps(head, ensure_ascii=True)  # ASCII: its length in bytes is len()
    return f"{len(header)}\n{header}{json.dumps(tests, ensure_ascii=True)}"


def run_requests(
    requests: Sequence[Request], limits: Limits = Limits(), *, v0: bool = False
) -> list[tuple[CaseResult, ...]]:
    """Run every request's program on its cases, in at most two pooled sandbox calls.

    A sandbox run holds the cases of one request only. The runs of visible requests (cases an
    agent sees the results of: the tester's, the examples) all finish before the first run of a
    ``hidden`` request starts, so nothing of a hidden case (its input, output, timing, pids,
    files, processes) can reach a visible result, not even from another request of the call
    running at the same time. Each (program, case) runs once per call and is cached.

    Returns, per request, one :class:`CaseResult` per case, in order (``v0``: compared by
    ``mas/Code-v0``'s numbers rule, :func:`outputs_match`). Never raises for anything a program
    does; a failing sandbox gives ``sandbox_error`` results.
    """
    raw: list[list[tuple[str, str, str] | None]] = []
    phases: dict[bool, list[tuple[int, Request, list[tuple[int, Case]]]]] = {False: [], True: []}
    first: dict[bytes, tuple[int, int]] = {}  # each (program, input) runs once per call
    copies: list[tuple[int, int, tuple[int, int]]] = []
    for r, req in enumerate(requests):
        row: list[tuple[str, str, str] | None] = []
        missing: list[tuple[int, Case]] = []
        for c, case in enumerate(req.cases):
            keys = _keys(req, case, limits)
            hit = next((v for k in keys if (v := CACHE.get(k)) is not None), None)
            row.append(hit)
            if hit is None:
                twin = next((first[k] for k in keys if k in first), None)
                if twin is not None:
                    copies.append((r, c, twin))
                else:
                    first[keys[0]] = (r, c)
                    missing.append((c, case))
        raw.append(row)
        for batch in _batches(missing, limits) if missing else []:
            phases[req.hidden].append((r, req, batch))
    for hidden in (False, True):  # every visible run is over before a hidden one starts
        if phases[hidden]:
            _run_batches(phases[hidden], raw, limits)
    for r, c, (r0, c0) in copies:
        raw[r][c] = raw[r0][c0]
    out = []
    for req, row in zip(requests, raw, strict=True):
        out.append(
            tuple(
                judge(case, *(res or ("sandbox_error", "", "no result")), v0=v0)
                for case, res in zip(req.cases, row, strict=True)
            )
        )
    return out


def _run_batches(
    todo: list[tuple[int, Request, list[tuple[int, Case]]]],
    raw: list[list[tuple[str, str, str] | None]],
    limits: Limits,
) -> None:
    try:
        from mas_envs.sandbox import Job, Verdict, run_many
    except ImportError as e:  # pragma: no cover - the sandbox ships with mas_envs
        raise ImportError(
            f"mas_envs.sandbox is needed to run code ({e}); reinstall mas-rl: pip install -e ."
        ) from e
    jobs = []
    for _, req, batch in todo:
        head = {
            "program": req.program,
            "fn_name": req.fn_name,
            "setup": req.setup,
            "timeout": limits.timeout_s,
            "max_timeouts": limits.max_timeouts,
        }
        tests = [{"kind": c.kind, "input": c.input, "cap": case_cap(c, limits)} for _, c in batch]
        wall = limits.timeout_s * (limits.max_timeouts + 0.25 * len(batch)) + 5.0
        jobs.append(
            Job(
                code=HARNESS_SOURCE,
                stdin=_harness_stdin(head, tests),
                timeout_s=wall,
                memory_mb=limits.memory_mb,
            )
        )
    results = run_many(jobs)
    for (r, req, batch), res in zip(todo, results, strict=True):
        found = _parse_report(res.stdout, len(batch))
        if res.verdict == Verdict.ok:
            lost = ("sandbox_error", "", "the harness reported no result for this case")
        elif res.verdict == Verdict.timeout:
            lost = ("timeout", "", "the whole batch ran out of time")
        elif res.verdict == Verdict.memory_limit:
            lost = ("error", "", "memory limit exceeded")
        elif res.verdict == Verdict.output_limit:
            lost = ("output_limit", "", "output limit exceeded")
        elif res.verdict == Verdict.runtime_error:
            # The harness started (the sandbox works) and died: a program that runs as the same
            # user can kill it; that must not pass for a sandbox failure, which a trainer drops.
            lost = ("error", "", "the harness was killed before this case ran (by the program?)")
        else:
            lost = ("sandbox_error", "", f"sandbox: {res.verdict.name}: {res.stderr[-500:]}")
        for j, (c, case) in enumerate(batch):
            value = found.get(j, lost)
            raw[r][c] = value
            if value[0] != "sandbox_error":
                CACHE.put(_key(req, case, limits, req.hidden), value)
