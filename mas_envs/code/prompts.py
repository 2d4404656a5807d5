"""All text of the code env: system texts, prompt builders, and the parsers of agents' answers.

Code extraction: :func:`mas_envs.programs.extract_code` (shared with the math env and the game
envs' plan code; the code env accepts a bare program without a fence: ``bare=True``).

Test-case parsing (:func:`parse_cases`): for stdin/stdout problems, pairs of ``**Test Input:**`` /
``**Test Output:**`` markers (any case, ``*``/``#``/``:`` optional), each followed by a fenced
block or plain text up to the next marker; for function problems, ``assert name(args) == value``
statements (literal arguments and value), anywhere in the answer or its code blocks.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

import numpy as np

from mas_envs.code.judge import Case, CaseResult
from mas_envs.code.problems import Problem
from mas_envs.programs import extract_code, fenced_blocks, strip_think
from mas_envs.spaces import clean_text

__all__ = [
    "coder_prompt",
    "extract_code",
    "format_cases",
    "parse_cases",
    "random_cases",
    "random_program",
    "system_text",
    "tester_prompt",
]

MAX_STATEMENT = 12_000
MAX_PROGRAM = 8_000
MAX_FIELD = 600
MAX_ERROR = 600
MAX_SHOWN_CASES = 5

# ---------------------------------------------------------------------------- test cases

_MARKER = re.compile(
    r"^[ \t>#*_]*test[ \t]*(input|output)[ \t]*(?:\d+[ \t]*)?[*_]*[ \t]*:?[ \t]*[*_]*[ \t]*",
    re.I | re.M,
)


def _section(text: str) -> str:
    """A case's input/output: its first fenced block, else the plain text, trimmed."""
    closed, _ = fenced_blocks(text)
    if closed:
        return closed[0][1].rstrip("\n")
    lines = text.strip("\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def _stdio_cases(text: str) -> list[Case]:
    marks = list(_MARKER.finditer(text))
    cases = []
    for k, m in enumerate(marks):
        if m.group(1).lower() != "input" or k + 1 >= len(marks):
            continue
        nxt = marks[k + 1]
        if nxt.group(1).lower() != "output":
            continue
        stop = marks[k + 2].start() if k + 2 < len(marks) else len(text)
        inp = _section(text[m.end() : nxt.start()])
        out = _section(text[nxt.end() : stop])
        if out.strip():
            cases.append(Case("stdio", inp + "\n" if inp else "", out + "\n"))
    return cases


def _assert_case(node: ast.AST, fn_name: str) -> Case | None:
    if not isinstance(node, ast.Assert):
        return None
    t = node.test
    if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)):
        return None
    call = t.left
    if not isinstance(call, ast.Call) or call.keywords:
        return None
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    if name != fn_name:
        return None
    try:
        args = tuple(ast.literal_eval(a) for a in call.args)
        want = ast.literal_eval(t.comparators[0])
    except Exception:
        return None
    return Case("call", repr(args), repr(want))


def _call_cases(text: str, fn_name: str) -> list[Case]:
    cases: list[Case] = []
    for line in text.split("\n"):
        s = line.strip()
        if not s.startswith("assert"):
            continue
        try:
            tree = ast.parse(s)
        except Exception:
            continue
        for node in tree.body:
            case = _assert_case(node, fn_name)
            if case is not None:
                cases.append(case)
    return cases


def parse_cases(text: str, problem: Problem, max_cases: int) -> tuple[list[Case], int]:
    """The tester's cases (at most ``max_cases``) and how many more were ignored."""
    body = strip_think(text)
    if body is None:
        return [], 0
    if problem.kind == "stdio":
        cases = _stdio_cases(body)
    else:
        cases = _call_cases(body, problem.fn_name or "")
    unique = list(dict.fromkeys(cases))
    return unique[:max_cases], max(0, len(unique) - max_cases)


def format_cases(problem: Problem, cases: Sequence[Case]) -> str:
    """Cases in the exact answer format the tester is asked for."""
    if problem.kind != "stdio":
        lines = [f"assert {problem.fn_name}{_call_args(c.input)} == {c.expected}" for c in cases]
        return "```python\n" + "\n".join(lines) + "\n```"
    parts = []
    for c in cases:
        parts.append(
            f"**Test Input:**\n```\n{c.input.rstrip(chr(10))}\n```\n"
            f"**Test Output:**\n```\n{c.expected.rstrip(chr(10))}\n```"
        )
    return "\n\n".join(parts)


def _call_args(args_repr: str) -> str:
    """``"(1, 2)"`` -> ``"(1, 2)"``; ``"(1,)"`` -> ``"(1)"`` (a call, not a tuple)."""
    return args_repr[:-2] + ")" if args_repr.endswith(",)") else args_repr


# ---------------------------------------------------------------------------- random answers

_STDIO_BODIES = (
    "print(len(data))",
    "print(data[0] if data else 0)",
    "print({k})",
    "print(-{k})",
    "print(' '.join(reversed(data)))",
    "print('NO')",
    "print(sum(len(x) for x in data) + {k})",
)
_CALL_VALUES = ("{k}", "-{k}", "''", "[]", "None", "False", "args[0] if args else {k}", "str({k})")


def random_program(problem: Problem, rng: np.random.Generator) -> str:
    """A well-formed, runnable, almost surely wrong program (random template and constant)."""
    k = int(rng.integers(2, 100))
    if problem.kind == "stdio":
        body = _STDIO_BODIES[int(rng.integers(len(_STDIO_BODIES)))].format(k=k)
        code = f"import sys\n\ndata = sys.stdin.read().split()\n{body}\n"
    else:
        value = _CALL_VALUES[int(rng.integers(len(_CALL_VALUES)))].format(k=k)
        code = f"def {problem.fn_name}(*args):\n    return {value}\n"
    return f"```python\n{code}```"


def random_cases(problem: Problem, rng: np.random.Generator) -> str:
    """Well-formed random test cases (random inputs, random expected outputs)."""
    n = int(rng.integers(1, 4))
    cases = []
    for _ in range(n):
        if problem.kind == "stdio":
            nums = " ".join(str(int(v)) for v in rng.integers(-9, 100, int(rng.integers(1, 5))))
            cases.append(Case("stdio", nums + "\n", f"{int(rng.integers(-9, 100))}\n"))
        else:
            arity = _arity(problem)
            args = tuple(int(v) for v in rng.integers(-9, 100, arity))
            cases.append(Case("call", repr(args), repr(int(rng.integers(-9, 100)))))
    return format_cases(problem, cases)


def _arity(problem: Problem) -> int:
    """Positional parameters of the reference's ``fn_name`` (1 when unknown)."""
    try:
        # A starter ends with an empty body (LiveCodeBench): complete it so it parses.
        tree = ast.parse(problem.reference or problem.starter.rstrip() + "\n        pass\n")
    except Exception:
        return 1
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == problem.fn_name:
            n = len(node.args.args)
            return (
                max(1, n - 1) if node.args.args and node.args.args[0].arg == "self" else max(1, n)
            )
    return 1


# ---------------------------------------------------------------------------- prompts


def _clip(text: str, limit: int) -> str:
    text = clean_text(text)
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [{len(text) - limit} more characters cut]"


def _task(problem: Problem) -> str:
    level = f" ({problem.difficulty})" if problem.difficulty else ""
    head = f"## Problem{level}\n\n{_clip(problem.statement.strip(), MAX_STATEMENT)}\n"
    if problem.kind == "function":
        head += (
            f"\nYour program must define the function `{problem.fn_name}` "
            "(it is called directly; do not read input or print the result)."
        )
        if problem.starter and problem.starter.strip() != problem.statement.strip():
            head += f"\nStarter code:\n```python\n{_clip(problem.starter.strip(), 3000)}\n```"
        head += "\n"
    else:
        head += "\nYour program reads the input from stdin and prints the answer to stdout.\n"
    return head


_CODER_SYSTEM = (
    "You are a careful competitive programmer. You write a complete, correct and efficient "
    "Python 3 program for the problem you are given. Answer with your reasoning (optional) and "
    "then the program in ONE ```python code block; the last ```python block of your answer is "
    "the program that is run."
)
_TESTER_STDIO = (
    "You are a meticulous software tester. You write test cases for a programming problem: "
    "inputs with the exact outputs that a CORRECT program prints. Include edge cases. Write each "
    "case as:\n\n**Test Input:**\n```\n<stdin>\n```\n**Test Output:**\n```\n<expected stdout>\n```"
)
_TESTER_CALL = (
    "You are a meticulous software tester. You write test cases for a programming problem: "
    "calls of the required function with the exact values that a CORRECT implementation "
    "returns. Include edge cases. Write each case as one line in one ```python block:\n\n"
    "```python\nassert {fn}(<arguments>) == <expected value>\n```\n"
    "Arguments and expected values must be Python literals."
)


def system_text(agent: str, problem: Problem) -> str:
    """The system text of ``agent`` for ``problem``."""
    if agent == "coder":
        return _CODER_SYSTEM
    if problem.kind == "stdio":
        return _TESTER_STDIO
    return _TESTER_CALL.format(fn=problem.fn_name)


def _program_block(program: str | None) -> str:
    if program is None:
        return "(no program yet)"
    return f"```python\n{_clip(program.rstrip(), MAX_PROGRAM)}\n```"


def _case_report(problem: Problem, cases: Sequence[Case], results: Sequence[CaseResult]) -> str:
    """Pass/fail per case, with details of the first failing ones."""
    passed = sum(r.passed for r in results)
    lines = [f"{passed} of {len(cases)} test cases passed."]
    shown = 0
    for i, (c, r) in enumerate(zip(cases, results, strict=True), 1):
        if r.passed:
            continue
        if shown == MAX_SHOWN_CASES:
            lines.append(f"(further failing cases not shown: {len(cases) - passed - shown})")
            break
        shown += 1
        if problem.kind == "stdio":
            inp = f"Input:\n```\n{_clip(c.input.rstrip(), MAX_FIELD)}\n```"
            exp = f"Expected output:\n```\n{_clip(c.expected.rstrip(), MAX_FIELD)}\n```"
        else:
            inp = f"Call: `{_clip((problem.fn_name or '') + _call_args(c.input), MAX_FIELD)}`"
            exp = f"Expected: `{_clip(c.expected, MAX_FIELD)}`"
        verdict = {
            "wrong": "wrong answer",
            "error": "runtime error",
            "timeout": "time limit exceeded",
            "output_limit": "output limit exceeded",
            "skipped": "not run (too many time-outs before it)",
        }.get(r.status, r.status)
        got = ""
        if r.status == "wrong":
            got = f"\nGot:\n```\n{_clip(r.output.rstrip(), MAX_FIELD)}\n```"
        err = ""
        if r.error and r.status != "wrong":
            tail = r.error.strip()[-MAX_ERROR:]
            err = f"\nError:\n```\n{clean_text(tail)}\n```"
        lines.append(f"\nCase {i}: {verdict}\n{inp}\n{exp}{got}{err}")
    return "\n".join(lines)


def coder_prompt(
    problem: Problem,
    *,
    turn: int,
    max_turns: int,
    program: str | None,
    cases: Sequence[Case] | None,
    results: Sequence[CaseResult] | None,
    cases_by: str,
    note: str,
) -> str:
    """The coder's prompt: task, its latest program, the test feedback, the answer format."""
    parts = [_task(problem), f"## Turn {turn + 1} of {max_turns}\n"]
    if program is not None:
        parts.append(f"## Your current program\n\n{_program_block(program)}\n")
    if cases and results is not None:
        parts.append(
            f"## Your program on the {cases_by}\n\n{_case_report(problem, cases, results)}\n"
        )
    elif cases:
        shown = _clip(format_cases(problem, cases), MAX_PROGRAM)
        parts.append(f"## The {cases_by}\n\n{shown}\n")
    if note:
        parts.append(f"## Note\n\n{clean_text(note)}\n")
    ask = "Write" if program is None else "Fix or improve your program if needed, and write"
    parts.append(
        f"## Your answer\n\n{ask} the complete program in one ```python code block "
        "(the last ```python block of your answer is run)."
    )
    return "\n".join(parts)


def tester_prompt(
    problem: Problem,
    *,
    turn: int,
    max_turns: int,
    program: str | None,
    cases: Sequence[Case] | None,
    results: Sequence[CaseResult] | None,
    max_cases: int,
    note: str,
) -> str:
    """The tester's prompt: task, the coder's latest program, how it did on the tester's cases."""
    parts = [_task(problem), f"## Turn {turn + 1} of {max_turns}\n"]
    parts.append(f"## The coder's current program\n\n{_program_block(program)}\n")
    if cases:
        shown = _clip(format_cases(problem, cases), MAX_PROGRAM)
        parts.append(f"## Your previous test cases\n\n{shown}\n")
        if results is not None and program is not None:
            parts.append(
                f"## The coder's program on your test cases\n\n"
                f"{_case_report(problem, cases, results)}\n"
            )
    if note:
        parts.append(f"## Note\n\n{clean_text(note)}\n")
    if problem.kind == "stdio":
        fmt = "**Test Input:**\n```\n<stdin>\n```\n**Test Output:**\n```\n<expected stdout>\n```"
    else:
        fmt = f"```python\nassert {problem.fn_name}(<arguments>) == <expected value>\n```"
    parts.append(
        f"## Your answer\n\nWrite 1 to {max_cases} test cases that a correct program passes and "
        "that expose bugs in a wrong one (if the program above looks wrong, target its bug). "
        f"Use exactly this format for each case:\n\n{fmt}"
    )
    return "\n".join(parts)
