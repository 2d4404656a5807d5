"""Programs that agents write: find one in a reply, run it in the sandbox once, show it in a prompt.

Three envs let an agent answer with Python: the code env (the coder's program), the math env (the
tool agent's calculation) and the game envs' tool agent in ``tool_mode="code"`` (a program that
prints its plan: Sokoban, Plan-Path, Sudoku). This module holds what they share:

* :func:`extract_code` reads the program out of a reply, with one set of rules for all of them:

  1. Drop reasoning: everything up to the last ``</think>``; an unclosed ``<think>`` means no
     answer.
  2. Fenced blocks (```` ```python ````, ```` ```py ````, ```` ```python3 ```` or a bare
     ```` ``` ````) that are closed: the LAST one is the program (models often show a draft, then
     the final version). Blocks tagged with another language (```` ```text ````, ```` ```bash ````)
     are skipped.
  3. An unclosed block at the end (a cut-off answer): its text, if no closed Python block came
     before.
  4. No fence at all: with ``bare=True`` (the code env) the whole text if it compiles as Python;
     with ``bare=False`` (math and game tool agents) nothing, so prose never reaches the sandbox.

* :class:`ProgramRunner` runs programs in :mod:`mas_envs.sandbox`, at most once per
  ``(code, stdin)``: an env creates one and its clones share it (a tree rollout steps K clones
  with the same candidate program; it runs once). ``prefetch`` runs the new programs of K
  candidate replies in one pooled :func:`mas_envs.sandbox.run_many` call.

* :func:`tool_program`, :func:`program_report` and :func:`code_instructions` are the game envs'
  plan-code step: run the tool's program on the current state (given on its stdin), say why
  nothing came out, and show the program, its output and failures in prompts (capped, passed
  through :func:`mas_envs.spaces.clean_text`); :func:`print_moves_program` writes a move-list
  game's simplest tool reply. The game envs' side of it is :class:`mas_envs.games.TeamGameEnv`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from mas_envs import sandbox
from mas_envs.moves import format_moves
from mas_envs.spaces import clean_text

__all__ = [
    "EMPTY_PROGRAM",
    "NO_PROGRAM",
    "TOOL_MODES",
    "UNCLOSED_THINK",
    "ProgramRun",
    "ProgramRunner",
    "ToolProgram",
    "code_block",
    "code_instructions",
    "extract_code",
    "failure_text",
    "fenced_blocks",
    "find_program",
    "print_moves_program",
    "program_report",
    "runner_for",
    "strip_think",
    "tool_program",
]

TOOL_MODES = ("plan", "code")
"""Game envs' ``tool_mode`` values: the tool answers with a plan (text) or with a program."""

MAX_CODE_ECHO = 3000
"""Characters of a program shown in a prompt (its head; longer ones are cut with a note)."""
MAX_OUTPUT_ECHO = 600
"""Characters of a program's output shown in a prompt (its tail, where the answer is)."""
MAX_ERROR_ECHO = 600
"""Characters of a program's error shown in a prompt (the end of its traceback)."""
MAX_OUTPUT_KEEP = 8000
"""Characters of a program's output that are kept (its tail) and parsed as the answer."""
CACHE_SIZE = 1024
"""Runs a :class:`ProgramRunner` remembers; it forgets them all when full."""
MAX_CACHED_CODE = 32_000
"""Longer programs are run every time rather than held in the cache."""

NO_PROGRAM = "no ```python code block: put your program between ```python and ```"
EMPTY_PROGRAM = "the ```python code block is empty"
UNCLOSED_THINK = "the answer is still inside <think>: close it with </think>, then give the program"

_TAG = re.compile(r"[\w+#.-]*")
_PY_TAGS = {"", "python", "py", "python3", "py3"}
_FAILED = {
    "runtime_error": "it stopped with an error",
    "timeout": "it ran out of time",
    "memory_limit": "it ran out of memory",
    "output_limit": "it printed too much",
    "sandbox_error": "the sandbox failed to run it (not the program's fault)",
}


# ---------------------------------------------------------------------------- extraction


def fenced_blocks(text: str) -> tuple[list[tuple[str, str]], tuple[str, str] | None]:
    """Closed ```` ``` ```` blocks of ``text`` as (lower-case tag, body), and an unclosed last one.

    A line-by-line scan, linear in the text (a regular expression with a lazy body is quadratic
    on hostile text full of unclosed fences). An opening fence is a line starting with three
    backticks, then an optional tag; only a line of exactly three backticks closes a block.
    """
    closed: list[tuple[str, str]] = []
    tag: str | None = None
    body: list[str] = []
    for line in text.split("\n"):
        s = line.strip()
        if tag is None:
            if s.startswith("```"):
                m = _TAG.match(s[3:].lstrip())
                tag = m.group().lower() if m else ""
                body = []
        elif s == "```":
            closed.append((tag, "\n".join(body)))
            tag = None
        else:
            body.append(line)
    return closed, (tag, "\n".join(body)) if tag is not None else None


def strip_think(text: str) -> str | None:
    """``text`` after the last ``</think>``; ``None`` while a ``<think>`` is still open."""
    end = text.rfind("</think>")
    if end >= 0:
        return text[end + len("</think>") :]
    if "<think>" in text:
        return None
    return text


def _compiles(code: str) -> bool:
    try:
        compile(code, "<answer>", "exec")
    except Exception:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError
        return False
    return True


def extract_code(text: str, *, bare: bool = True) -> str | None:
    """The program in a reply (ending in one newline), or ``None`` when there is none.

    Args:
        text: The agent's whole reply (untrusted; any string).
        bare: Accept a reply without any fence as the program when it compiles (rule 4 of the
            module docstring). ``False`` requires a fenced block.
    """
    body = strip_think(text)
    if body is None:
        return None
    if "```" not in body:  # the common no-code reply: no line scan, no compile unless bare
        code = body if bare and _compiles(body) else ""
    else:
        closed, unclosed = fenced_blocks(body)
        blocks = [code for tag, code in closed if tag in _PY_TAGS]
        if blocks:
            code = blocks[-1]
        elif unclosed is not None and unclosed[0] in _PY_TAGS:
            code = unclosed[1]
        elif closed or unclosed is not None:
            return None
        else:  # backticks inside a line, never as a fence
            code = body if bare and _compiles(body) else ""
    return code.strip("\n") + "\n" if code.strip() else None


def find_program(text: str, *, bare: bool = False) -> tuple[str | None, str]:
    """:func:`extract_code`, with the reason when there is no program.

    Returns:
        ``(program, "")``, or ``(None, reason)`` with reason :data:`NO_PROGRAM`,
        :data:`EMPTY_PROGRAM` (the last Python block is empty) or :data:`UNCLOSED_THINK`.
    """
    code = extract_code(text, bare=bare)
    if code is not None:
        return code, ""
    body = strip_think(text)
    if body is None:
        return None, UNCLOSED_THINK
    if "```" in body:
        closed, unclosed = fenced_blocks(body)
        if unclosed is not None:
            closed.append(unclosed)
        if any(tag in _PY_TAGS for tag, _ in closed):
            return None, EMPTY_PROGRAM
    return None, NO_PROGRAM


# ---------------------------------------------------------------------------- running


class ProgramRun(NamedTuple):
    """What one program did in the sandbox (cached per ``(code, stdin)``).

    Attributes:
        verdict: The sandbox verdict (``"ok"``, ``"runtime_error"``, ``"timeout"``,
            ``"memory_limit"``, ``"output_limit"``, ``"sandbox_error"``).
        stdout: The tail of its output, at most :data:`MAX_OUTPUT_KEEP` characters (answers are
            printed last; a cache should not hold the megabytes the sandbox allows).
        error: The last lines of its stderr (the end of a traceback); empty when it had none.
    """

    verdict: str
    stdout: str
    error: str


class ProgramRunner:
    """Runs programs in the sandbox, at most once per ``(code, stdin)``.

    An env makes one in ``__init__``; ``clone()`` shares it on purpose: a program's result depends
    only on its code and its input. Sandbox failures (``sandbox_error``) are not cached (worth a
    retry), nor are programs longer than :data:`MAX_CACHED_CODE` characters.

    Args:
        timeout_s: Wall-clock limit of one run (CPU time is limited to about the same).
        memory_mb: Memory limit of one run.

    Attributes:
        runs: Programs run in the sandbox so far (cache misses), for tests and benchmarks.
    """

    def __init__(self, timeout_s: float = 5.0, memory_mb: int = 512) -> None:
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self.runs = 0
        self._cache: dict[tuple[str, str], ProgramRun] = {}

    def cached(self, code: str, stdin: str = "") -> ProgramRun | None:
        """The remembered run of ``code`` on ``stdin``, if any (runs nothing)."""
        return self._cache.get((code, stdin))

    def run(self, code: str, stdin: str = "") -> ProgramRun:
        """Run ``code`` with ``stdin`` in the sandbox, or return the remembered run."""
        run = self._cache.get((code, stdin))
        if run is None:
            self.runs += 1
            result = sandbox.run_python(
                code, stdin=stdin, timeout_s=self.timeout_s, memory_mb=self.memory_mb
            )
            run = self._store(code, stdin, result)
        return run

    def prefetch(self, jobs: Iterable[tuple[str, str]]) -> int:
        """Run the ``(code, stdin)`` pairs not run yet, concurrently, and remember the results.

        Returns:
            How many programs ran.
        """
        todo = list(dict.fromkeys(j for j in jobs if j not in self._cache))
        if todo:
            self.runs += len(todo)
            results = sandbox.run_many(
                [
                    sandbox.Job(code, stdin, timeout_s=self.timeout_s, memory_mb=self.memory_mb)
                    for code, stdin in todo
                ]
            )
            for (code, stdin), result in zip(todo, results, strict=True):
                self._store(code, stdin, result)
        return len(todo)

    def prefetch_texts(self, texts: Sequence[str], stdin: str, max_chars: int) -> int:
        """Run the programs of candidate replies ``texts`` on ``stdin`` (see :meth:`prefetch`).

        Replies without a fenced program, non-``str`` ones and ones longer than ``max_chars``
        (the env rejects those before looking for code) are skipped.
        """
        jobs = []
        for text in texts:
            if isinstance(text, str) and len(text) <= max_chars:
                code = extract_code(text, bare=False)
                if code is not None:
                    jobs.append((code, stdin))
        return self.prefetch(jobs)

    def _store(self, code: str, stdin: str, result: sandbox.ExecResult) -> ProgramRun:
        verdict = result.verdict.value
        error = "\n".join(result.stderr.strip().splitlines()[-6:])
        run = ProgramRun(verdict, result.stdout[-MAX_OUTPUT_KEEP:], error)
        if verdict != "sandbox_error" and len(code) <= MAX_CACHED_CODE:
            if len(self._cache) >= CACHE_SIZE:
                self._cache.clear()
            self._cache[code, stdin] = run
        return run


def runner_for(tool_mode: str, timeout_s: float, memory_mb: int) -> ProgramRunner | None:
    """Check a game env's ``tool_mode`` options; the runner for ``"code"``, ``None`` for ``"plan"``.

    Raises:
        ValueError: An option is out of range (the message names it and the allowed values).
    """
    if tool_mode not in TOOL_MODES:
        raise ValueError(
            f"tool_mode must be one of {list(TOOL_MODES)} ('plan': the tool agent answers with a "
            f"plan; 'code': with a program that prints it), got {tool_mode!r}"
        )
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float):
        raise ValueError(f"tool_timeout_s must be a number of seconds, got {timeout_s!r}")
    if not 0 < timeout_s <= 60:
        raise ValueError(f"tool_timeout_s must be in (0, 60] seconds, got {timeout_s!r}")
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or not 32 <= memory_mb <= 8192:
        raise ValueError(f"tool_memory_mb must be an int in [32, 8192], got {memory_mb!r}")
    return ProgramRunner(timeout_s, memory_mb) if tool_mode == "code" else None


# ---------------------------------------------------------------------------- the tool's step


class ToolProgram(NamedTuple):
    """A game tool agent's program and what it printed (immutable: clones share it).

    Attributes:
        turn: The turn it was written in (0-based).
        code: The program; ``""`` when the reply had none.
        run: Its sandbox run; ``None`` when there was no program.
        reason: Why it gave no output to read (no program, or how it failed); ``""`` when it
            exited normally.
    """

    turn: int
    code: str
    run: ProgramRun | None
    reason: str

    @property
    def output(self) -> str | None:
        """What it printed (the tail that is read as the answer); ``None`` if it failed."""
        return self.run.stdout if self.run is not None and not self.reason else None

    @property
    def verdict(self) -> str:
        """Its run's sandbox verdict; ``""`` when there was no program."""
        return self.run.verdict if self.run is not None else ""


def tool_program(runner: ProgramRunner, text: str, stdin: str, turn: int) -> ToolProgram:
    """Find the program in ``text`` and run it on ``stdin`` (the current state as text)."""
    code, reason = find_program(text)
    if code is None:
        return ToolProgram(turn, "", None, reason)
    run = runner.run(code, stdin)
    if run.verdict == "ok":
        return ToolProgram(turn, code, run, "")
    last = run.error.strip().splitlines()[-1:] or [run.verdict]
    why = f"the program failed ({run.verdict}): {_FAILED.get(run.verdict, run.verdict)}"
    if run.verdict == "runtime_error":
        why += f": {clean_text(last[0][:200])}"
    return ToolProgram(turn, code, run, why)


def failure_text(verdict: str) -> str:
    """Why a program with sandbox verdict ``verdict`` gave no answer, in words for a prompt."""
    return _FAILED.get(verdict, verdict)


def _cap_head(text: str, limit: int) -> str:
    text = clean_text(text)
    return text if len(text) <= limit else text[: limit - 30] + "\n# ... (cut: too long)"


def _cap_tail(text: str, limit: int) -> str:
    text = clean_text(text)
    return text if len(text) <= limit else "(cut) ...\n" + text[-(limit - 20) :]


def code_block(code: str) -> str:
    """``code`` as a ```` ```python ```` block for a prompt: cleaned, its head if it is long."""
    return f"```python\n{_cap_head(code.rstrip(), MAX_CODE_ECHO)}\n```"


def program_report(program: ToolProgram, whose: str) -> str:
    """The program and what it did, for a prompt; ``whose`` starts it, e.g. ``"The tool agent's"``.

    Example::

        The tool agent's program (turn 1):
        ```python
        print("####", "U, R")
        ```
        Its output:
        #### U, R
    """
    head = f"{whose} program (turn {program.turn + 1})"
    run = program.run
    if run is None:
        return f"{head}: none, the answer had {NO_PROGRAM.split(':', 1)[0]}."
    if run.verdict == "ok":
        out = run.stdout.strip()
        shown = f"Its output:\n{_cap_tail(out, MAX_OUTPUT_ECHO)}" if out else "It printed nothing."
    else:
        error = _cap_tail(run.error.strip(), MAX_ERROR_ECHO)
        shown = f"It failed ({run.verdict}): {_FAILED.get(run.verdict, run.verdict)}."
        if error:
            shown += f"\n{error}"
    return f"{head}:\n{code_block(program.code)}\n{shown}"


def code_instructions(task: str, example: str, stdin: str, timeout_s: float) -> str:
    """How a game's tool agent answers in ``tool_mode="code"`` (the end of its prompt).

    Args:
        task: What the program computes, e.g. ``"finds the moves that ..."``.
        example: Python lines that print an answer in the game's format.
        stdin: What the program reads on its standard input, e.g. ``"the board shown above"``.
        timeout_s: The time limit of a run.
    """
    return (
        f"Answer with a Python program in one ```python block: a program that {task}, then "
        f"prints the answer after a line '####' (only what follows the last '####' it prints "
        f"counts), for example:\n{example}\n"
        f"It runs in a sandbox: Python 3 with the standard library only, no network, at most "
        f"{timeout_s:g} seconds. Its standard input is {stdin} (read it with sys.stdin.read()); "
        f"you may also write it into the program. The planner sees your program, its "
        f"output and the answer it printed."
    )


def print_moves_program(moves: tuple[str, ...] | list[str]) -> str:
    """A tool reply whose program just prints the move list ``moves`` (``#### U, R``): the random
    and numeric tool replies of the move-list games (Sokoban, Plan-Path)."""
    return f'```python\nprint("#### {format_moves(moves)}")\n```'
