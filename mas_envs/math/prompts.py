"""All text of the math env: system texts, prompt builders, and the parsers of what agents write.

Everything echoed back into a prompt (model code, program output, answers, problem statements)
passes through :func:`mas_envs.spaces.clean_text` and is capped in length.
"""

from __future__ import annotations

from typing import NamedTuple

from mas_envs.math.verify import MAX_ANSWER_CHARS, last_boxed
from mas_envs.programs import find_program
from mas_envs.spaces import clean_text

__all__ = [
    "REASONER_SYSTEM",
    "SINGLE_SYSTEM",
    "TOOL_SYSTEM",
    "Parsed",
    "ToolRun",
    "parse_answer",
    "parse_code",
    "program_answer",
    "reasoner_prompt",
    "show_answer",
    "single_prompt",
    "tool_prompt",
]

MAX_CODE_ECHO = 4000
MAX_OUTPUT_ECHO = 2000
MAX_ANSWER_ECHO = 200
MAX_OUTPUT_KEEP = 4000

TOOL_SYSTEM = (
    "You are the tool agent of a team that solves math problems. You write a short Python "
    "program that computes the answer. It runs in a sandbox (Python 3 standard library only, no "
    "input, a few seconds). What it prints is shown to the reasoner, who gives the team's final "
    "answer."
)
REASONER_SYSTEM = (
    "You are the reasoner of a team that solves math problems. A tool agent writes and runs "
    "Python code for the problem; check its result with your own reasoning and give the team's "
    "final answer."
)
SINGLE_SYSTEM = "You solve math problems. Reason step by step and give an exact final answer."

TOOL_FORMAT = (
    "Write one Python program in a ```python code block. It must print the final answer alone "
    "on the last line of its output: an exact value such as 42, 3/4, (2, -3) or sqrt(2)/2, "
    "with no words."
)
ANSWER_FORMAT = (
    "Reason step by step, then give your final answer as \\boxed{...} with an exact value, "
    "e.g. \\boxed{\\frac{3}{4}}. Only the last \\boxed{} counts."
)


class Parsed(NamedTuple):
    """A parse result: the value, or ``None`` and the reason it failed."""

    value: str | None
    reason: str = ""


class ToolRun(NamedTuple):
    """What the tool agent's program did (one sandbox run; cached per code string).

    Attributes:
        verdict: The sandbox verdict name (``"ok"``, ``"runtime_error"``, ``"timeout"``, ...).
        stdout: The tail of its output (at most :data:`MAX_OUTPUT_KEEP` characters): the answer
            is on the last line, and the sandbox allows megabytes that a cache should not hold.
        error: The last lines of stderr (or why nothing ran); empty when all went well.
        answer: The answer it printed (:func:`program_answer` of the whole output), if any.
    """

    verdict: str
    stdout: str
    error: str
    answer: str | None


class ToolTurn(NamedTuple):
    """The tool agent's latest action, as the reasoners see it."""

    turn: int
    code: str
    run: ToolRun | None
    answer: str | None


def parse_code(text: str) -> Parsed:
    """The tool's program: the last fenced Python block of ``text``.

    The rules (``<think>`` skipped, a cut-off last block still counts, other languages' blocks
    skipped) are :func:`mas_envs.programs.extract_code`'s, shared with the code and game envs.
    """
    code, reason = find_program(text)
    return Parsed(code.strip("\n") if code is not None else None, reason)


def parse_answer(text: str) -> Parsed:
    """The content of the last ``\\boxed{...}`` of a reasoner's reply."""
    boxed = last_boxed(text)
    if boxed is None:
        return Parsed(None, "no \\boxed{...} answer: end your reply with \\boxed{your answer}")
    if not boxed.strip():
        return Parsed(None, "the \\boxed{} answer is empty")
    if len(boxed) > MAX_ANSWER_CHARS:
        return Parsed(None, f"the \\boxed{{}} answer is longer than {MAX_ANSWER_CHARS} characters")
    return Parsed(boxed.strip())


def program_answer(stdout: str) -> str | None:
    """The answer a program printed: its last ``\\boxed{}`` if any, else its last non-empty line."""
    boxed = last_boxed(stdout)
    if boxed is not None:
        answer = boxed.strip()
    else:
        lines = [line.strip() for line in stdout.splitlines() if line.strip()]
        answer = lines[-1] if lines else ""
    return answer if answer and len(answer) <= MAX_ANSWER_CHARS else None


def _cap(text: str, limit: int) -> str:
    text = clean_text(text)
    return text if len(text) <= limit else text[: limit - 20] + "\n... (truncated)"


def _cap_tail(text: str, limit: int) -> str:
    """The end of ``text`` (where a program prints its answer), cleaned, within ``limit``."""
    text = clean_text(text)
    return text if len(text) <= limit else "(truncated) ...\n" + text[-(limit - 20) :]


def show_answer(ans: str | None) -> str:
    """An answer as agents see it: ``\\boxed{...}`` (capped), or ``(no answer)``."""
    return "(no answer)" if ans is None else f"\\boxed{{{_cap(ans, MAX_ANSWER_ECHO)}}}"


def tool_result_text(tool: ToolTurn) -> str:
    """The tool's program and what it printed, as shown to reasoners and in the tool's history."""
    run = tool.run
    if run is None:
        return "The tool agent wrote no runnable program."
    if run.verdict == "ok" and tool.answer is not None:
        shown = f"Its output:\n{_cap_tail(run.stdout.strip(), MAX_OUTPUT_ECHO)}"
    elif run.verdict == "ok":
        shown = "It printed nothing usable as an answer."
    else:
        shown = f"It failed ({run.verdict}):\n{_cap(run.error, MAX_OUTPUT_ECHO)}"
    return f"```python\n{_cap(tool.code, MAX_CODE_ECHO)}\n```\n{shown}"


def tool_prompt(
    question: str, turn: int, history: tuple[str, ...], previous: ToolTurn | None
) -> str:
    """The tool agent's prompt: problem, earlier turns, its previous program, the format."""
    parts = [f"Problem:\n{question}"]
    if history:
        parts.append("Earlier turns:\n" + "\n".join(history))
    if previous is not None:
        parts.append(f"Your previous program:\n{tool_result_text(previous)}")
    if turn:
        parts.append(
            f"Turn {turn + 1}: the team has not agreed yet. Write a program (a corrected one if "
            "yours failed or disagreed with the reasoner)."
        )
    parts.append(TOOL_FORMAT)
    return "\n\n".join(parts)


def reasoner_prompt(
    question: str,
    tool: ToolTurn | None,
    history: tuple[str, ...],
    teammates: tuple[tuple[str, str | None], ...],
) -> str:
    """A reasoner's prompt: problem, the tool's program and output this turn, history, format.

    Args:
        question: The problem statement (already cleaned).
        tool: The tool agent's action this turn, or ``None`` if it has not acted.
        history: One line per earlier event, oldest first.
        teammates: ``(name, latest answer)`` of the other reasoners (when there are several).
    """
    parts = [f"Problem:\n{question}"]
    if history:
        parts.append("Earlier turns:\n" + "\n".join(history))
    if tool is not None and tool.run is None:
        parts.append("The tool agent wrote no runnable program this turn.")
    elif tool is not None:
        parts.append(f"The tool agent's program this turn:\n{tool_result_text(tool)}")
    if teammates:
        parts.append(
            "Latest answers of the other reasoners:\n"
            + "\n".join(f"- {name}: {show_answer(ans)}" for name, ans in teammates)
        )
    parts.append(ANSWER_FORMAT)
    return "\n\n".join(parts)


def single_prompt(question: str, history: tuple[str, ...]) -> str:
    """The single agent's prompt (``mode="single"``): problem, earlier format errors, format."""
    parts = [f"Problem:\n{question}"]
    if history:
        parts.append("Earlier turns:\n" + "\n".join(history))
    parts.append(ANSWER_FORMAT)
    return "\n\n".join(parts)


def history_line(turn: int, agent: str, event: str) -> str:
    """One line of history: ``Turn 2, reasoner: answered \\boxed{5}``."""
    return f"- Turn {turn + 1}, {agent}: {event}"


def answered(ans: str | None) -> str:
    """A history event for an answer."""
    return f"answered {show_answer(ans)}"


def printed(tool: ToolTurn) -> str:
    """A history event for a tool program's result (short: the answer or the failure)."""
    run = tool.run
    if run is None:
        return "wrote no runnable program"
    if run.verdict != "ok":
        last = run.error.strip().splitlines()[-1:] or [run.verdict]
        return f"its program failed ({run.verdict}): {_cap(last[0], MAX_ANSWER_ECHO)}"
    if tool.answer is None:
        return "its program printed nothing usable as an answer"
    return f"its program printed {_cap(tool.answer, MAX_ANSWER_ECHO)}"
