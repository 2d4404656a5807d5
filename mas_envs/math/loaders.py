"""Math problems from local files in the layouts GSM8K, MATH, AIME and OlympiadBench publish.

No dataset ships with mas-rl (none is on PyPI); point ``problems=`` at your local copy.

* ``gsm8k``: jsonl; ``question``; ``answer`` = worked solution ending ``#### 42`` (commas in
  the number dropped); id = line number.
* ``math``: jsonl, json (a list or one record), or a directory of one-record ``*.json`` files
  (the original release); ``problem``; ``answer`` if present (MATH-500), else the last
  ``\\boxed{}`` of ``solution``; ``level`` ("Level 3" or 3), ``type``/``subject``; id =
  ``unique_id``, else the file's path / the line number.
* ``aime``: jsonl or csv; ``Problem`` or ``problem``; ``Answer`` or ``answer``; id = ``ID`` or
  ``id``, else the line number.
* ``olympiadbench``: jsonl; ``question``; ``final_answer`` = a list of answers (joined by
  ``", "``, ``$`` stripped); id = ``id``.

Problem ids are ``"<format>/<file stem>/<record id>"``, e.g. ``"gsm8k/test/17"`` or
``"math/train/algebra/1"`` for ``MATH/train/algebra/1.json``. A malformed file raises
:class:`ProblemFileError` naming the file, the record and the field.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mas_envs.math.problem import Problem
from mas_envs.math.verify import last_boxed

__all__ = ["FORMATS", "ProblemFileError", "detect_format", "hash_split", "load_problems"]

FORMATS = ("gsm8k", "math", "aime", "olympiadbench")


class ProblemFileError(ValueError):
    """A problem file that cannot be read: says which file, which record and which field."""


Record = tuple[str, dict[str, Any]]  # (record id within the file, fields)


def hash_split(problem_id: str) -> str:
    """A stable split for a problem id: 80% train, 10% validation, 10% test (by SHA-256)."""
    bucket = int.from_bytes(hashlib.sha256(problem_id.encode()).digest()[:4], "big") % 10
    return "validation" if bucket == 8 else "test" if bucket == 9 else "train"


def load_problems(path: str | Path, fmt: str | None = None) -> list[Problem]:
    """Read every problem of ``path`` (a file, or a directory of files).

    Args:
        path: A ``.jsonl``, ``.json`` or ``.csv`` file, or a directory whose ``*.json`` /
            ``*.jsonl`` / ``*.csv`` files (searched recursively, in sorted order) hold problems.
        fmt: One of :data:`FORMATS`; ``None`` detects it from the first record's fields.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ProblemFileError: A file or record is malformed (the message names file, record, field).
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"problem file or directory {str(root)!r} does not exist")
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"unknown problem format {fmt!r}; choose one of {list(FORMATS)} or None")
    files = (
        sorted(p for p in root.rglob("*") if p.suffix in (".json", ".jsonl", ".csv"))
        if root.is_dir()
        else [root]
    )
    if not files:
        raise ProblemFileError(f"{root}: no .json, .jsonl or .csv files found")
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for file in files:
        # A directory of one-record .json files (the MATH release) names records by path.
        stem = root.name if root.is_dir() else file.stem
        prefix = file.relative_to(root).with_suffix("").as_posix() if root.is_dir() else ""
        for rid, rec in _records(file):
            if fmt is None:
                fmt = detect_format(rec, f"{file}: record {rid}")
            rid = "/".join(part for part in (prefix, rid) if part) or "1"
            problem = _PARSERS[fmt](rec, f"{fmt}/{stem}", rid, f"{file}: record {rid}")
            if problem.id in seen:
                raise ProblemFileError(
                    f"{file}: record {rid}: duplicate problem id {problem.id!r} (also in "
                    f"{seen[problem.id]}); give records unique ids"
                )
            seen[problem.id] = str(file)
            problems.append(problem)
    return problems


def detect_format(record: dict[str, Any], where: str) -> str:
    """The format whose fields ``record`` has (see the module table)."""
    keys = set(record)
    if "final_answer" in keys:
        return "olympiadbench"
    if "problem" in keys and "solution" in keys:
        return "math"
    if keys & {"Problem", "problem"} and keys & {"Answer", "answer"}:
        return "aime"
    if {"question", "answer"} <= keys:
        return "gsm8k"
    raise ProblemFileError(
        f"{where}: cannot tell the format from fields {sorted(keys)}; expected GSM8K "
        f"(question, answer), MATH (problem, solution), AIME (Problem, Answer) or OlympiadBench "
        f"(question, final_answer), or pass problem_format= one of {list(FORMATS)}"
    )


def _records(file: Path) -> Iterator[Record]:
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemFileError(f"{file}: cannot read as UTF-8 text: {e}") from None
    if file.suffix == ".csv":
        for n, row in enumerate(csv.DictReader(text.splitlines()), start=1):
            yield str(n), dict(row)
        return
    if file.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ProblemFileError(f"{file}: record 1: invalid JSON: {e}") from None
        if not isinstance(data, list):  # one record per file (the MATH release): no number
            yield "", _object(data, f"{file}: record 1")
            return
        for n, row in enumerate(data, start=1):
            yield str(n), _object(row, f"{file}: record {n}")
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ProblemFileError(
                    f"{file}: record {n} (line {n}): invalid JSON: {e}"
                ) from None
            yield str(n), _object(row, f"{file}: record {n}")


def _object(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise ProblemFileError(f"{where}: expected a JSON object, got {type(row).__name__}")
    return row


def _field(rec: dict[str, Any], names: tuple[str, ...], where: str) -> str:
    """The first present field of ``names`` as non-empty text (numbers are accepted)."""
    for name in names:
        if name in rec:
            value = rec[name]
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise ProblemFileError(
                    f"{where}: field {name!r}: expected text or a number, got "
                    f"{type(value).__name__}"
                )
            text = str(value).strip()
            if not text:
                raise ProblemFileError(f"{where}: field {name!r} is empty")
            return text
    raise ProblemFileError(f"{where}: missing field {' or '.join(repr(n) for n in names)}")


def _own_id(rec: dict[str, Any], names: tuple[str, ...], rid: str) -> str:
    """The record's own id field (first of ``names`` present), else its position ``rid``."""
    for name in names:
        value = rec.get(name)
        if value is not None and str(value).strip():
            return str(value).strip().removesuffix(".json")
    return rid


def _gsm8k(rec: dict[str, Any], head: str, rid: str, where: str) -> Problem:
    question = _field(rec, ("question",), where)
    full = _field(rec, ("answer",), where)
    if "####" not in full:
        raise ProblemFileError(f"{where}: field 'answer' has no '#### <number>' final line")
    work, _, final = full.rpartition("####")
    answer = final.strip().replace(",", "")
    if not answer:
        raise ProblemFileError(f"{where}: field 'answer' has nothing after '####'")
    work = re.sub(r"<<[^>]*>>", "", work).strip()  # calculator annotations
    return Problem(f"{head}/{rid}", question, answer, "gsm8k", solution=work)


def _math(rec: dict[str, Any], head: str, rid: str, where: str) -> Problem:
    question = _field(rec, ("problem",), where)
    if "answer" in rec:
        answer = _field(rec, ("answer",), where)
    else:
        boxed = last_boxed(_field(rec, ("solution",), where))
        if not boxed:
            raise ProblemFileError(f"{where}: field 'solution' has no \\boxed{{...}} answer")
        answer = boxed
    level_text = str(rec.get("level", ""))
    m = re.search(r"\d+", level_text)
    topic = str(rec.get("type") or rec.get("subject") or "")
    pid = f"{head}/{_own_id(rec, ('unique_id',), rid)}"
    return Problem(pid, question, answer, "math", topic=topic, level=int(m.group()) if m else 0)


def _aime(rec: dict[str, Any], head: str, rid: str, where: str) -> Problem:
    question = _field(rec, ("Problem", "problem"), where)
    answer = _field(rec, ("Answer", "answer"), where)
    pid = f"{head}/{_own_id(rec, ('ID', 'id'), rid)}"
    return Problem(pid, question, answer.strip("$ "), "aime")


def _olympiadbench(rec: dict[str, Any], head: str, rid: str, where: str) -> Problem:
    question = _field(rec, ("question",), where)
    final = rec.get("final_answer")
    if isinstance(final, str):
        final = [final]
    if not isinstance(final, list) or not final or not all(isinstance(a, str) for a in final):
        raise ProblemFileError(
            f"{where}: field 'final_answer': expected a non-empty list of strings, "
            f"got {final!r:.80}"
        )
    answer = ", ".join(a.strip().strip("$").strip() for a in final)
    if not answer:
        raise ProblemFileError(f"{where}: field 'final_answer' is empty")
    pid = f"{head}/{_own_id(rec, ('id',), rid)}"
    topic = str(rec.get("subfield") or rec.get("subject") or "")
    return Problem(pid, question, answer, "olympiadbench", topic=topic)


_PARSERS = {"gsm8k": _gsm8k, "math": _math, "aime": _aime, "olympiadbench": _olympiadbench}
