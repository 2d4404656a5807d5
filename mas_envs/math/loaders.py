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
* ``aime`` also reads the other AIME layouts: ``Question`` (AIME 1983-2024) or ``question``
  (opencompass/AIME2025) for the problem. An answer naming several accepted integers (AIME
  1983-2024's ``080 or 081 (both were accepted)``) grades each of them right.
* ``olympiadbench``: jsonl; ``question``; ``final_answer`` = a list of answers (joined by
  ``", "``, ``$`` stripped); id = ``id``.
* ``dapo``: DAPO-Math-17k's verl layout: ``prompt`` = a list of chat messages whose user message
  wraps the problem in DAPO's answer-format instructions (removed here), ``reward_model`` =
  ``{ground_truth, style}``; id = ``extra_info.index``, else the line number.
* ``mas-rl``: a file ``mas-data prepare`` wrote (field ``layout`` = :data:`PREPARED_LAYOUT`): one
  :class:`~mas_envs.math.problem.Problem` per record, ids and splits as written.

Any format may also come as ``.parquet`` (the ``data`` extra), as the Hugging Face copies are.

Problem ids are ``"<format>/<file stem>/<record id>"``, e.g. ``"gsm8k/test/17"`` or
``"math/train/algebra/1"`` for ``MATH/train/algebra/1.json``. A malformed file raises
:class:`ProblemFileError` naming the file, the record and the field.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mas_envs.math.problem import Problem
from mas_envs.math.verify import last_boxed
from mas_envs.rows import parquet_rows

__all__ = [
    "FORMATS",
    "PREPARED_LAYOUT",
    "ProblemFileError",
    "detect_format",
    "hash_split",
    "iter_problems",
    "load_problems",
    "problem_to_record",
]

FORMATS = ("gsm8k", "math", "aime", "olympiadbench", "dapo", "mas-rl")
PREPARED_LAYOUT = "mas-rl/math-v1"
"""The ``layout`` field of every record ``mas-data prepare`` writes."""
SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")


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
        path: A ``.jsonl``, ``.json``, ``.csv`` or ``.parquet`` file, or a directory whose such
            files (searched recursively, in sorted order) hold problems.
        fmt: One of :data:`FORMATS`; ``None`` detects it from the first record's fields.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ProblemFileError: A file or record is malformed (the message names file, record, field).
    """
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for file, rid, problem in iter_problems(path, fmt):
        if problem.id in seen:
            raise ProblemFileError(
                f"{file}: record {rid}: duplicate problem id {problem.id!r} (also in "
                f"{seen[problem.id]}); give records unique ids"
            )
        seen[problem.id] = str(file)
        problems.append(problem)
    return problems


OnError = Callable[[ProblemFileError], None]
"""Called with each malformed record's error when a reader is told to skip them."""


def iter_problems(
    path: str | Path, fmt: str | None = None, *, on_error: OnError | None = None
) -> Iterator[tuple[Path, str, Problem]]:
    """Read problems one at a time: ``(file, record id, problem)`` in file order.

    Like :func:`load_problems` but streamed (a parquet file is read a batch at a time) and
    without the duplicate-id check. With ``on_error``, a malformed record is reported to it and
    skipped; without, its :class:`ProblemFileError` propagates.
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"problem file or directory {str(root)!r} does not exist")
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"unknown problem format {fmt!r}; choose one of {list(FORMATS)} or None")
    files = sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES) if root.is_dir() else [root]
    if not files:
        raise ProblemFileError(f"{root}: no .json, .jsonl, .csv or .parquet files found")
    for file in files:
        # A directory of one-record .json files (the MATH release) names records by path.
        stem = root.name if root.is_dir() else file.stem
        prefix = file.relative_to(root).with_suffix("").as_posix() if root.is_dir() else ""
        for rid, rec in _records(file, on_error):
            where = f"{file}: record {rid}"
            try:
                if fmt is None:
                    fmt = detect_format(rec, where)
                rid = "/".join(part for part in (prefix, rid) if part) or "1"
                problem = _PARSERS[fmt](rec, f"{fmt}/{stem}", rid, where)
            except ProblemFileError as err:
                if on_error is None:
                    raise
                on_error(err)
                continue
            yield file, rid, problem


def detect_format(record: dict[str, Any], where: str) -> str:
    """The format whose fields ``record`` has (see the module table)."""
    keys = set(record)
    if str(record.get("layout", "")).startswith("mas-rl/"):
        return "mas-rl"
    if {"prompt", "reward_model"} <= keys:
        return "dapo"
    if "final_answer" in keys:
        return "olympiadbench"
    if "problem" in keys and "solution" in keys:
        return "math"
    if keys & {"Problem", "problem", "Question"} and keys & {"Answer", "answer"}:
        return "aime"
    if {"question", "answer"} <= keys:
        return "gsm8k"
    raise ProblemFileError(
        f"{where}: cannot tell the format from fields {sorted(keys)[:20]}; expected GSM8K "
        f"(question, answer), MATH (problem, solution), AIME (Problem, Answer), OlympiadBench "
        f"(question, final_answer), DAPO (prompt, reward_model) or a mas-data prepare file, or "
        f"pass problem_format= one of {list(FORMATS)}"
    )


_EXTRA_CELLS = "\0extra cells"


def _records(file: Path, on_error: OnError | None = None) -> Iterator[Record]:
    if file.suffix == ".parquet":
        for n, row in enumerate(parquet_rows(file, ProblemFileError), start=1):
            yield str(n), row
        return
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemFileError(f"{file}: cannot read as UTF-8 text: {e}") from None
    if file.suffix == ".csv":
        try:
            rows = list(csv.DictReader(text.splitlines(), restkey=_EXTRA_CELLS))
        except csv.Error as e:
            raise ProblemFileError(f"{file}: not valid CSV ({e})") from None
        for n, row in enumerate(rows, start=1):
            if _EXTRA_CELLS in row:  # more cells than header columns
                err = ProblemFileError(
                    f"{file}: record {n}: {len(row) - 1 + len(row[_EXTRA_CELLS])} cells for "
                    f"{len(row) - 1} header columns (a quote or comma is wrong)"
                )
                if on_error is None:
                    raise err
                on_error(err)
                continue
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
                row = _object(json.loads(line), f"{file}: record {n}")
            except (json.JSONDecodeError, ProblemFileError) as e:
                err = (
                    e
                    if isinstance(e, ProblemFileError)
                    else ProblemFileError(f"{file}: record {n} (line {n}): invalid JSON: {e}")
                )
                if on_error is None:
                    raise err from None
                on_error(err)
                continue
            yield str(n), row


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


_SEVERAL = re.compile(r"(\d+(?:\s*(?:,|\bor\b)\s*\d+)+)\s*(?:\([^()]*\))?")
"""An AIME answer naming several accepted integers: ``080 or 081 (both were accepted)``."""


def _aime(rec: dict[str, Any], head: str, rid: str, where: str) -> Problem:
    question = _field(rec, ("Problem", "problem", "Question", "question"), where)
    answer = _field(rec, ("Answer", "answer"), where).strip("$ ")
    pid = f"{head}/{_own_id(rec, ('ID', 'id'), rid)}"
    several = _SEVERAL.fullmatch(answer)
    if several:
        first, *others = re.findall(r"\d+", several.group(1))
        return Problem(pid, question, first, "aime", also_accepted=tuple(others))
    return Problem(pid, question, answer, "aime")


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


DAPO_HEAD = "Solve the following math problem step by step."
DAPO_TAIL = 'Remember to put your answer on its own line after "Answer:".'


def dapo_question(prompt: str) -> str:
    """The problem inside a DAPO-Math-17k user message, without its answer-format instructions.

    DAPO wraps every problem as ``<DAPO_HEAD> The last line of your response should be of the
    form Answer: $Answer ...``, a blank line, the problem, a blank line, ``<DAPO_TAIL>``; the envs
    ask for a boxed answer instead, so the wrapper would contradict their prompts.
    """
    text = prompt.strip()
    if text.startswith(DAPO_HEAD):
        _, sep, rest = text.partition("\n\n")
        text = rest if sep else text
    if text.endswith(DAPO_TAIL):
        text = text[: -len(DAPO_TAIL)]
    return text.strip()


def _dapo(rec: dict[str, Any], head: str, rid: str, where: str) -> Problem:
    prompt = rec.get("prompt")
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    users = [
        m.get("content")
        for m in prompt or []
        if isinstance(m, dict) and m.get("role", "user") == "user"
    ]
    if not users or not isinstance(users[-1], str) or not users[-1].strip():
        raise ProblemFileError(
            f"{where}: field 'prompt': expected a list of chat messages with a user message, "
            f"got {prompt!r:.80}"
        )
    question = dapo_question(users[-1])
    if not question:
        raise ProblemFileError(f"{where}: field 'prompt': the user message holds no problem")
    model = rec.get("reward_model")
    answer = model.get("ground_truth") if isinstance(model, dict) else None
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(answer)
    if not isinstance(answer, str) or not answer.strip():
        raise ProblemFileError(
            f"{where}: field 'reward_model': expected {{ground_truth: <answer>}}, got {model!r:.80}"
        )
    extra = rec.get("extra_info")
    own = extra.get("index") if isinstance(extra, dict) else None
    pid = f"{head}/{str(own).strip() if own is not None and str(own).strip() else rid}"
    return Problem(pid, question, answer.strip(), "dapo")


def problem_to_record(p: Problem) -> dict[str, Any]:
    """One problem as a record of a prepared file (read back by :func:`load_problems`)."""
    return {
        "layout": PREPARED_LAYOUT,
        "id": p.id,
        "split": p.split,
        "source": p.source,
        "topic": p.topic,
        "level": p.level,
        "question": p.question,
        "answer": p.answer,
        "solution": p.solution,
        "code": p.code,
        **({"also_accepted": list(p.also_accepted)} if p.also_accepted else {}),
    }


def _prepared(rec: dict[str, Any], head: str, rid: str, where: str) -> Problem:
    if rec.get("layout") != PREPARED_LAYOUT:
        raise ProblemFileError(
            f"{where}: field 'layout': {rec.get('layout')!r} is not a layout this version reads "
            f"({PREPARED_LAYOUT!r}); prepare the file again with this version's mas-data"
        )
    text = {k: rec.get(k, "") for k in ("id", "source", "topic", "solution", "code")}
    for key, value in text.items():
        if not isinstance(value, str):
            raise ProblemFileError(f"{where}: field {key!r}: expected text")
    split = rec.get("split")
    if split not in (None, "train", "validation", "test"):
        raise ProblemFileError(f"{where}: field 'split': expected train, validation or test")
    level = rec.get("level", 0)
    if isinstance(level, bool) or not isinstance(level, int):
        raise ProblemFileError(f"{where}: field 'level': expected an integer")
    if not text["id"]:
        raise ProblemFileError(f"{where}: field 'id' is missing or empty")
    also = rec.get("also_accepted", [])
    if not isinstance(also, list) or not all(isinstance(a, str) and a.strip() for a in also):
        raise ProblemFileError(
            f"{where}: field 'also_accepted': expected a list of non-empty answers, "
            f"got {also!r:.80}"
        )
    return Problem(
        text["id"],
        _field(rec, ("question",), where),
        _field(rec, ("answer",), where),
        text["source"] or "mas-rl",
        topic=text["topic"],
        level=level,
        solution=text["solution"],
        code=text["code"],
        split=split,
        also_accepted=tuple(also),
    )


_PARSERS = {
    "gsm8k": _gsm8k,
    "math": _math,
    "aime": _aime,
    "olympiadbench": _olympiadbench,
    "dapo": _dapo,
    "mas-rl": _prepared,
}
