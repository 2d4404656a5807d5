"""All Sudoku text: system texts, prompt parts, and the parser of what models answer.

Answers come in two forms (the prompt promises both, with 1-based rows and columns):

* the whole grid, one row per line: ``1 2 . 4`` (``.``, ``0`` or ``_`` for an empty cell; any of
  ``, | ; [ ] ( ) ' "`` and spaces between digits; box lines such as ``----+----`` are skipped;
  ``Row 1:`` labels and ``\\boxed{}`` are dropped; all ``n * n`` cells on one line also works,
  so JSON such as ``[[1,2,3,4],[3,4,1,2],...]`` parses);
* a list of fills ``[[row, column, digit], ...]`` (``(r, c, d)`` tuples too), rows and columns
  numbered from 1.

The answer is read from the text after the last ``####`` line; without one, from the last
fenced code block; without one, from the last fill list or the last block of grid rows in the
text (so without ``####`` an answer needs a digit). ``<think>...</think>`` is skipped. Anything
else is a format error with a reason.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from mas_envs import programs
from mas_envs.spaces import clean_text
from mas_envs.sudoku.rules import SIZES, format_grid

__all__ = [
    "Parsed",
    "code_format_text",
    "format_fills",
    "format_text",
    "oracle_program",
    "parse_answer",
    "print_program",
    "rules_text",
    "system_text",
]

_SYSTEM = {
    ("mas", "tool"): (
        "You are the tool agent of a two-agent team that solves Sudoku puzzles. Each turn you "
        "propose a complete solution. Your proposal is checked against the rules but does not "
        "change the board: the planner agent sees it and decides which cells are filled."
    ),
    ("mas", "planner"): (
        "You are the planner agent of a two-agent team that solves Sudoku puzzles. Each turn a "
        "tool agent proposes a solution; you see it, the board and the moves made so far, and "
        "you decide which cells are actually filled."
    ),
    ("single", "planner"): (
        "You solve Sudoku puzzles. Each turn you see the board and the moves made so far, and "
        "you decide which cells to fill."
    ),
    ("code", "tool"): (
        "You are the tool agent of a two-agent team that solves Sudoku puzzles. Each turn you "
        "write a short Python program that solves the puzzle and prints a complete solution. The "
        "program runs in a sandbox; its answer is checked against the rules but does not change "
        "the board: the planner agent sees your program, its output and its answer, and decides "
        "which cells are filled."
    ),
    ("code", "planner"): (
        "You are the planner agent of a two-agent team that solves Sudoku puzzles. Each turn a "
        "tool agent writes a program that solves the puzzle; you see the program, its output, "
        "its answer, the board and the moves made so far, and you decide which cells are "
        "actually filled."
    ),
}


def system_text(mode: str, agent: str) -> str:
    """The system text of ``agent`` in ``mode`` (``"code"``: the team with ``tool_mode="code"``)."""
    return _SYSTEM[mode, agent]


def rules_text(n: int, box: int, turns: int) -> str:
    """The task statement (static for a size)."""
    return (
        f"Sudoku {n}x{n}. Fill the empty cells (.) so that every row, every column and every "
        f"{box}x{box} box holds each of the digits 1-{n} exactly once. The puzzle has exactly "
        f"one solution. Rows and columns are numbered 1-{n} from the top left. The game lasts "
        f"at most {turns} turns."
    )


def format_text(n: int) -> str:
    """The answer format section (static for a size)."""
    return (
        "A move that changes a given clue, or puts a digit twice in a row, column or box, is "
        "rejected and the board stays as it was. Cells filled earlier may be overwritten.\n\n"
        'Answer after a line "####", in one of two forms:\n'
        f"1. The whole board: {n} lines, one per row, {n} digits separated by spaces, "
        '"." for a cell left empty (the | and - box lines are optional), for example\n'
        "####\n" + format_grid(_EXAMPLE[n], n) + "\n"
        "2. A list of cells to fill as [row, column, digit], rows and columns numbered from 1 "
        "(1-based), for example\n"
        "#### [[1, 3, 4], [2, 1, 2]]\n"
        "(this puts 4 in row 1, column 3 and 2 in row 2, column 1)."
    )


def code_format_text(n: int, timeout_s: float) -> str:
    """The tool agent's answer section with ``tool_mode="code"`` (static for a size)."""
    return (
        "A move that changes a given clue, or puts a digit twice in a row, column or box, is "
        "rejected and the board stays as it was.\n\n"
        + programs.code_instructions(
            "solves the puzzle (for example a backtracking search over the digits each empty "
            "cell allows)",
            'print("####")\nfor row in grid:\n    print(" ".join(map(str, row)))'
            f"  # {n} lines such as: " + " ".join(str(d) for d in range(1, n + 1)),
            f"the given clues, one row per line, {n} digits separated by spaces, '.' for an "
            "empty cell",
            timeout_s,
        )
        + f"\nThe answer is read like a direct one: the whole board ({n} lines of {n} digits, "
        "'.' for empty) or a list of fills [[row, column, digit], ...] numbered from 1."
    )


def print_program(answer: str) -> str:
    """A tool reply whose program just prints ``answer`` (the random policy's)."""
    return f"```python\nprint({answer!r})\n```"


def oracle_program(clues: str) -> str:
    """The oracle tool reply: a backtracking solver (fewest candidates first) over ``clues``
    (:func:`~mas_envs.sudoku.rules.format_grid` text) that prints the whole solved board."""
    return _SOLVER.replace("CLUES_TEXT", clues)


_SOLVER = '''```python
import sys

CLUES = """
CLUES_TEXT
"""
rows = [line.split() for line in CLUES.strip("\\n").split("\\n")]
grid = [[int(x) if x.isdigit() else 0 for x in row] for row in rows]
n = len(grid)
box = int(n**0.5)


def allowed(r, c):
    used = set(grid[r]) | {grid[i][c] for i in range(n)}
    r0, c0 = r - r % box, c - c % box
    used |= {grid[i][j] for i in range(r0, r0 + box) for j in range(c0, c0 + box)}
    return [d for d in range(1, n + 1) if d not in used]


def solve():
    empty = [(len(allowed(r, c)), r, c) for r in range(n) for c in range(n) if not grid[r][c]]
    if not empty:
        return True
    _, r, c = min(empty)
    for d in allowed(r, c):
        grid[r][c] = d
        if solve():
            return True
    grid[r][c] = 0
    return False


if not solve():
    sys.exit("no solution")
print("####")
for row in grid:
    print(" ".join(map(str, row)))
```'''


# Format examples: a board with a few digits, visibly not a solution to copy.
_EXAMPLE = {
    4: bytes([1, 0, 0, 0, 0, 0, 2, 0, 0, 3, 0, 0, 0, 0, 0, 4]),
    9: bytes(
        r + 1 if i == r * 9 + r * 4 % 9 else 0 for r in range(9) for i in range(r * 9, r * 9 + 9)
    ),
}


def format_fills(fills: tuple[tuple[int, int], ...] | list[tuple[int, int]], n: int) -> str:
    """Fills ``(cell, digit)`` as the prompts write them: ``[[1, 3, 4], [2, 1, 2]]`` (1-based)."""
    return "[" + ", ".join(f"[{i // n + 1}, {i % n + 1}, {v}]" for i, v in fills) + "]"


class Parsed(NamedTuple):
    """What an answer says: a whole ``grid``, or ``fills`` ``(cell, digit)``, or a ``reason``.

    Exactly one of ``grid`` (a board, see :mod:`mas_envs.sudoku.rules`) and ``fills`` is set
    when the answer parsed; both are ``None`` and ``reason`` says why when it did not.
    """

    grid: bytes | None
    fills: tuple[tuple[int, int], ...] | None
    reason: str


_DIGIT = re.compile(r"[0-9]")
_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.DOTALL)
_FENCE_MARK = re.compile(r"```[^\n`]*")
_CLEAN_FILLS = {
    n: re.compile(
        r"\s*(?:\[\s*)?(?:[\[(]\s*{d}\s*,\s*{d}\s*,\s*{d}\s*[\])]\s*(?:,\s*)?)+(?:\]\s*)?".replace(
            "{d}", f"[1-{n}]"
        )
    )
    for n in SIZES
}
_TRIPLE = re.compile(r"([1-9])\s*,\s*([1-9])\s*,\s*([1-9])")
_GROUP = re.compile(r"[\[(]([^\[\]()]*)[\])]")
# Unambiguous between groups (no two adjacent ``\s*``), so a failed match cannot backtrack
# exponentially on hostile text.
_FILL_LIST = re.compile(r"\[\s*(?:[\[(][^\[\]()]*[\])]\s*(?:,\s*)?)+\]")
_TOKENS = re.compile(r"[^\s,;]+")
_ROW = re.compile(r"[0-9._]+")
_ROWS_ONLY = {n: re.compile(f"[0-{n}._\\n]*") for n in SIZES}
_LABEL = re.compile(r"^\W*(?:row\s*\d+|r\d+)\s*[:=).\]-]?", re.IGNORECASE)
_SEPARATORS = str.maketrans("", "", " \t\r,|;:[](){}'\"+-=`")
_CELL_BYTES = bytes.maketrans(b"0123456789._", bytes(range(10)) + b"\0\0")
_GRID_HINT = (
    "answer after a '####' line with the whole board ({n} rows of {n} digits, '.' for empty) "
    "or a list of fills [[row, column, digit], ...]"
)


def _fail(reason: str, n: int) -> Parsed:
    return Parsed(None, None, f"{reason}; " + _GRID_HINT.format(n=n))


def _fills(groups: list[str], tokenized: list[list[str]], n: int) -> Parsed:
    """Fills from the bracketed groups of an answer (each must be ``row, column, digit``)."""
    fills: dict[int, int] = {}
    for group, tokens in zip(groups, tokenized, strict=True):
        joined = "".join(tokens)
        if len(tokens) != 3 or not (joined.isascii() and joined.isdigit()):
            shown = clean_text(group.strip()[:30])
            return _fail(f"fill [{shown}] is not [row, column, digit]", n)
        if max(map(len, tokens)) > 20:  # int() raises past 4300 digits; none is in range
            shown = clean_text(group.strip()[:30])
            return _fail(f"fill [{shown}...]: rows, columns and digits are 1 to {n}", n)
        r, c, v = int(tokens[0]), int(tokens[1]), int(tokens[2])
        if not (1 <= r <= n and 1 <= c <= n):
            return _fail(
                f"fill [{r}, {c}, {v}]: rows and columns are numbered 1 to {n} (1-based)", n
            )
        if not 1 <= v <= n:
            return _fail(f"fill [{r}, {c}, {v}]: digits are 1 to {n}", n)
        cell = (r - 1) * n + c - 1
        if fills.setdefault(cell, v) != v:
            return _fail(f"row {r}, column {c} is filled twice with different digits", n)
    if len(fills) > n * n:  # pragma: no cover - more distinct cells than the board has
        return _fail("more fills than cells", n)
    return Parsed(None, tuple(fills.items()), "")


def _grid_runs(region: str) -> list[list[str]]:
    """Blocks of consecutive grid-row lines (box lines and blank lines do not break a block)."""
    runs: list[list[str]] = []
    run: list[str] = []
    for line in region.splitlines():
        cells = line.translate(_SEPARATORS)
        if not cells:
            continue  # blank or a box line such as ----+----
        if not _ROW.fullmatch(cells):
            label = _LABEL.match(line)
            cells = line[label.end() :].translate(_SEPARATORS) if label else ""
            if not (cells and _ROW.fullmatch(cells)):
                if run:
                    runs.append(run)
                    run = []
                continue
        run.append(cells)
    if run:
        runs.append(run)
    return runs


def _grid(region: str, n: int) -> Parsed:
    flat = region.translate(_SEPARATORS)
    if _ROWS_ONLY[n].fullmatch(flat):
        # Fast path: every line is a row of valid cells, a box line or blank.
        rows = flat.split()
        if (len(rows) == n and set(map(len, rows)) == {n}) or (
            len(rows) == 1 and len(rows[0]) == n * n
        ):
            return Parsed("".join(rows).encode("ascii").translate(_CELL_BYTES), None, "")
    runs = _grid_runs(region)
    rows = runs[-1] if runs else []
    if not rows:
        return _fail("no grid or fill list found", n)
    if len(rows) == 1 and len(rows[0]) == n * n:
        text = rows[0]
    elif len(rows) == n and all(len(row) == n for row in rows):
        text = "".join(rows)
    else:
        sizes = ", ".join(str(len(row)) for row in rows[:12])
        return _fail(
            f"found {len(rows)} grid row{'s' * (len(rows) != 1)} with {sizes} cells, "
            f"expected {n} rows of {n}",
            n,
        )
    grid = text.encode("ascii").translate(_CELL_BYTES)
    if max(grid) > n:
        i = next(i for i, v in enumerate(grid) if v > n)
        return _fail(f"digit {grid[i]} in row {i // n + 1} is not in 1-{n}", n)
    return Parsed(grid, None, "")


def parse_answer(text: str, n: int) -> Parsed:
    """Read a grid or a fill list out of a model's whole answer (see the module docstring).

    Args:
        text: The model's answer (untrusted; any string).
        n: The board size.

    Returns:
        A :class:`Parsed`; its ``reason`` is non-empty when nothing valid was found.
    """
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "####" in text:
        region = text.rsplit("####", 1)[1]
    elif not _DIGIT.search(text):  # prose without any answer: the common format error
        return _fail("no grid or fill list found", n)
    else:
        fences = _FENCE.findall(text)
        if fences:
            region = fences[-1]
        else:
            lists = _FILL_LIST.findall(text)
            if lists:
                groups = _GROUP.findall(lists[-1])
                tokenized = [_TOKENS.findall(g) for g in groups]
                if 3 in map(len, tokenized):
                    return _fills(groups, tokenized, n)
            return _grid(text.replace("\\boxed", "\n"), n)
    if "`" in region:
        region = _FENCE_MARK.sub("\n", region)
    if "\\boxed" in region:  # math-tuned models box their answers: \boxed{...}
        region = region.replace("\\boxed", "\n")
    if "[" in region or "(" in region:
        if _CLEAN_FILLS[n].fullmatch(region):
            # Fast path: nothing but fills of in-range digits, as the prompt asks (the general
            # path below gives the same result, slower; it also explains errors).
            fills: dict[int, int] = {}
            for r, c, v in _TRIPLE.findall(region):
                if fills.setdefault((ord(r) - 49) * n + ord(c) - 49, ord(v) - 48) != ord(v) - 48:
                    break  # one cell, two digits: let the general path say so
            else:
                return Parsed(None, tuple(fills.items()), "")
        groups = _GROUP.findall(region)
        tokenized = [_TOKENS.findall(g) for g in groups]
        if 3 in map(len, tokenized):
            return _fills(groups, tokenized, n)
    return _grid(region, n)
