"""The data sets ``mas-data`` prepares: where each is published, how its files are read and split.

Each :class:`DatasetSpec` finds the publisher's files under a local download (``--from``) and
yields ``(split, problem)`` pairs through the envs' own loaders (:mod:`mas_envs.code.problems`,
:mod:`mas_envs.math.loaders`); :mod:`mas_envs.datasets.prepare` writes them, de-duplicates and
records the manifest. The splits are the paper's (Stronger-MAS, arXiv 2510.11062, and its
public data scripts): code trains on CodeContests' train split and APPS test rows 500-4499 and is
tested on APPS test rows 0-499, CodeContests' test split and LiveCodeBench v6; math trains on
Polaris-53K (later also DAPO-17k and AIME 1983-2024) and is tested on AIME24, AIME25 and
OlympiadBench (its OE_TO_maths_en_COMP part).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mas_envs.code import problems as code_problems
from mas_envs.math import loaders as math_loaders

__all__ = ["DATASETS", "DatasetError", "DatasetSpec", "Options", "Published"]


class DatasetError(ValueError):
    """The download is not what the data set's publisher distributes; says what is wrong."""


@dataclass(frozen=True)
class Options:
    """Choices of one ``mas-data prepare`` run (each applies to the data sets that name it).

    Attributes:
        slices: Row ranges per split, ``{"test": (0, 500), ...}`` (end None: to the end); APPS.
        release: LiveCodeBench release tag (``v6`` = the problems new in release 6, the paper's;
            ``release_v6`` = all six releases; ``v5_v6``, ...).
        config: OlympiadBench configuration (``OE_TO_maths_en_COMP``, the paper's).
        max_tests: Most tests a *training* problem keeps (its public and private tests first,
            then generated ones); 0 keeps all. Held-out problems always keep every test.
        near_threshold: 8-gram overlap share that makes a training problem a near copy of a
            held-out one (0: exact copies only).
        skip_bad_rows: Skip malformed rows (listed in the manifest) instead of stopping.
        validation: Hold out this many training problems (by a stable hash of their ids) as a
            validation split, for data sets without one (Polaris, DAPO): model selection then
            never looks at a test set. 0 (default) keeps the paper's splits.
    """

    slices: Mapping[str, tuple[int, int | None]] | None = None
    release: str = "v6"
    config: str = "OE_TO_maths_en_COMP"
    max_tests: int = 64
    near_threshold: float = 0.5
    skip_bad_rows: bool = False
    validation: int = 0


@dataclass(frozen=True)
class Published:
    """Where a data set is published and which of its files ``prepare`` reads."""

    hub: str
    files: str

    @property
    def url(self) -> str:
        return f"https://huggingface.co/datasets/{self.hub}"

    @property
    def download(self) -> str:
        return f"huggingface-cli download {self.hub} --repo-type dataset --local-dir {{dir}}"


Item = tuple[str, Any]


@dataclasses.dataclass(frozen=True)
class Untested:
    """A record of a code set with no test case (APPS has some): nothing can judge it, so it is
    left out, and the manifest's ``left_out`` lists it (a reader yields it in place of a
    problem)."""

    path: str
    index: int


"""``(split, problem)``: a code :class:`~mas_envs.code.problems.Problem` or a math one."""
Reader = Callable[[list[Path], Options, Callable[[ValueError], None] | None], Iterator[Item]]


@dataclass(frozen=True)
class DatasetSpec:
    """One data set ``mas-data prepare`` knows.

    Attributes:
        name: The ``NAME`` of ``mas-data prepare NAME``; prefix of its problem ids.
        family: ``"code"`` (``mas/Code-v0``) or ``"math"`` (``mas/Math-v*``).
        title: The data set's name as its publishers write it.
        published: Where it is published (the first is the one the paper used).
        splits: The splits it yields, and from what (the paper's).
        patterns: Globs (relative to ``--from``) of the files it reads, in order.
        columns: Fields every file must have, each as its alternatives (a missing one is a wrong
            or partial download).
        options: The :class:`Options` fields it uses.
        read: ``(files, options, on_error) -> (split, problem)`` pairs.
    """

    name: str
    family: str
    title: str
    published: tuple[Published, ...]
    splits: str
    patterns: tuple[str, ...]
    columns: tuple[tuple[str, ...], ...]
    read: Reader
    options: tuple[str, ...] = ()
    select: Callable[[list[Path], Options], list[Path]] | None = field(default=None, repr=False)

    def find(self, source: Path, options: Options) -> list[Path]:
        """The files of this data set under ``source`` (a file, or the download's folder)."""
        if not source.exists():
            raise FileNotFoundError(f"--from {source}: no such file or folder")
        if source.is_file():
            found = [source]
        else:
            found = sorted(
                {
                    p
                    for pat in self.patterns
                    for p in source.glob(pat)
                    # not the download's own .cache/ (metadata, partial files)
                    if p.is_file()
                    and not any(part.startswith(".") for part in p.relative_to(source).parts)
                },
                key=lambda p: p.relative_to(source).as_posix(),
            )
        if self.select is not None:
            found = self.select(found, options)
        if not found:
            where = ", ".join(self.patterns)
            raise DatasetError(
                f"--from {source}: no {self.title} files ({where}); download them with "
                f"`{self.published[0].download.format(dir=source)}`"
            )
        return found


# ---------------------------------------------------------------------------------- helpers


def _own_id(problem_id: str) -> str:
    """The record's own part of a loader id ``<layout>/<file stem>/<own>`` (or ``<src>/<own>``)."""
    parts = problem_id.split("/", 2)
    return parts[-1]


def _renamed(p: Any, new_id: str, split: str, **extra: Any) -> Any:
    return dataclasses.replace(p, id=new_id, split=split, **extra)


def _code_file(name: str, path: Path, split: str, on_error: Any) -> Iterator[Item]:
    for index, p in code_problems.iter_problems(path, on_error=on_error):
        if p is None:
            yield split, Untested(str(path), index)
        else:
            yield split, _renamed(p, f"{name}/{_own_id(p.id)}", split)


def _math_file(
    name: str, path: Path, fmt: str, split: str, on_error: Any, many: bool, source: str
) -> Iterator[Item]:
    for _, _, p in math_loaders.iter_problems(path, fmt, on_error=on_error):
        own = _own_id(p.id)
        new_id = f"{name}/{path.stem}/{own}" if many else f"{name}/{own}"
        yield split, _renamed(p, new_id, split, source=source)


# ---------------------------------------------------------------------------------- code sets

APPS_SLICES = {"test": (0, 500), "train": (500, 4500), "validation": (4500, None)}


def _read_apps(files: list[Path], opts: Options, on_error: Any) -> Iterator[Item]:
    slices = dict(opts.slices or APPS_SLICES)
    for split in slices:
        if split not in ("train", "validation", "test"):
            raise DatasetError(f"--slice {split}=...: splits are train, validation and test")
    spans = sorted(((lo, hi, s) for s, (lo, hi) in slices.items()), key=lambda t: t[0])
    for (_, hi, a), (lo, _, b) in itertools.pairwise(spans):
        if hi is None or hi > lo:
            raise DatasetError(f"--slice: the rows of {a} and {b} overlap")
    for index, p in code_problems.iter_problems(files[0], on_error=on_error):
        part = next((s for lo, hi, s in spans if lo <= index and (hi is None or index < hi)), None)
        if part is not None:
            yield (
                part,
                Untested(str(files[0]), index)
                if p is None
                else _renamed(p, f"apps/{_own_id(p.id)}", part),
            )


def _select_apps(found: list[Path], opts: Options) -> list[Path]:
    # The paper takes all of its APPS problems from test.jsonl (codeparrot/apps); train.jsonl
    # is not used.
    tests = [p for p in found if p.name == "test.jsonl"] or [
        p for p in found if p.name != "train.jsonl"
    ]
    if len(tests) > 1:
        raise DatasetError(f"several APPS test files: {[str(p) for p in tests]}; pass one")
    return tests


CC_SPLITS = {"train": "train", "valid": "validation", "test": "test"}


def _cc_split(path: Path) -> str:
    m = re.match(r"(train|valid|test)[-_.]", path.name)
    if m is None:
        raise DatasetError(
            f"{path}: cannot tell the CodeContests split from the file name (the release names "
            "its shards train-*.parquet, valid-*.parquet, test-*.parquet)"
        )
    return CC_SPLITS[m.group(1)]


def _read_codecontests(files: list[Path], opts: Options, on_error: Any) -> Iterator[Item]:
    for path in files:
        yield from _code_file("codecontests", path, _cc_split(path), on_error)


LCB_FILES = {f"v{i}": "test.jsonl" if i == 1 else f"test{i}.jsonl" for i in range(1, 7)}


def lcb_release_files(tag: str) -> list[str]:
    """The files of a LiveCodeBench release tag, as the release's loading script maps them."""
    m = re.fullmatch(r"release_(v[1-6]|latest)", tag)
    if m:
        last = 6 if m.group(1) == "latest" else int(m.group(1)[1])
        return [LCB_FILES[f"v{i}"] for i in range(1, last + 1)]
    m = re.fullmatch(r"v([1-6])(?:_v([1-6]))?", tag)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi >= lo:
            return [LCB_FILES[f"v{i}"] for i in range(lo, hi + 1)]
    raise DatasetError(
        f"--release {tag!r}: expected release_v1..release_v6, release_latest, v1..v6 (the "
        "problems new in that release; v6 is the paper's) or vN_vM"
    )


def _select_lcb(found: list[Path], opts: Options) -> list[Path]:
    wanted = lcb_release_files(opts.release)
    if len(found) == 1 and found[0].name not in LCB_FILES.values():
        return found  # a single file given by path: take it as the release asked for
    by_name = {p.name: p for p in found}
    missing = [n for n in wanted if n not in by_name]
    if missing:
        raise DatasetError(
            f"LiveCodeBench release {opts.release!r} needs {wanted}; missing {missing} "
            "(download livecodebench/code_generation_lite whole)"
        )
    return [by_name[n] for n in wanted]


def _read_lcb(files: list[Path], opts: Options, on_error: Any) -> Iterator[Item]:
    for path in files:
        yield from _code_file("livecodebench", path, "test", on_error)


# ---------------------------------------------------------------------------------- math sets


def _math_reader(name: str, fmt: str, split: str) -> Reader:
    def read(files: list[Path], opts: Options, on_error: Any) -> Iterator[Item]:
        for path in files:
            yield from _math_file(name, path, fmt, split, on_error, len(files) > 1, name)

    return read


def _select_olympiad(found: list[Path], opts: Options) -> list[Path]:
    mine = sorted(
        (p for p in found if opts.config in (p.stem, p.parent.name)),
        key=lambda p: p.suffix != ".parquet",
    )
    if not mine:
        configs = sorted({p.parent.name for p in found})
        raise DatasetError(
            f"no OlympiadBench configuration {opts.config!r} among {configs[:12]}; "
            "pass --config NAME"
        )
    return [mine[0]]


def _one_format(found: list[Path], opts: Options) -> list[Path]:
    """Prefer parquet when a download has the same data as parquet and jsonl."""
    parquet = [p for p in found if p.suffix == ".parquet"]
    return parquet or found


# ---------------------------------------------------------------------------------- the table

DATASETS: dict[str, DatasetSpec] = {
    s.name: s
    for s in [
        DatasetSpec(
            name="apps",
            family="code",
            title="APPS",
            published=(Published("codeparrot/apps", "test.jsonl"),),
            splits="test = test.jsonl rows 0-499, train = rows 500-4499 (the paper's); "
            "validation = rows 4500-4999 (unused by the paper)",
            patterns=("test.jsonl", "*.jsonl", "**/test.jsonl"),
            columns=(("question",), ("input_output",), ("solutions",)),
            read=_read_apps,
            options=("slices", "max_tests"),
            select=_select_apps,
        ),
        DatasetSpec(
            name="codecontests",
            family="code",
            title="CodeContests",
            published=(
                Published(
                    "deepmind/code_contests",
                    "data/train-*.parquet, data/valid-*.parquet, data/test-*.parquet",
                ),
            ),
            splits="train, validation, test = the release's train, valid, test",
            patterns=("**/train-*.parquet", "**/valid-*.parquet", "**/test-*.parquet"),
            columns=tuple(
                (c,)
                for c in (
                    "name",
                    "description",
                    "public_tests",
                    "private_tests",
                    "generated_tests",
                    "solutions",
                    "incorrect_solutions",
                    "difficulty",
                )
            ),
            read=_read_codecontests,
            options=("max_tests",),
        ),
        DatasetSpec(
            name="livecodebench",
            family="code",
            title="LiveCodeBench (code_generation_lite)",
            published=(
                Published("livecodebench/code_generation_lite", "test6.jsonl (release v6)"),
            ),
            splits="test = the problems of the release (default v6: test6.jsonl, the paper's)",
            patterns=("test*.jsonl", "**/test*.jsonl"),
            columns=tuple(
                (c,)
                for c in (
                    "question_id",
                    "question_content",
                    "public_test_cases",
                    "private_test_cases",
                    "metadata",
                )
            ),
            read=_read_lcb,
            options=("release",),
            select=_select_lcb,
        ),
        DatasetSpec(
            name="polaris",
            family="math",
            title="Polaris-53K",
            published=(Published("POLARIS-Project/Polaris-Dataset-53K", "*.jsonl"),),
            splits="train = every problem (the paper's math training set)",
            patterns=("*.jsonl", "*.parquet", "**/*.jsonl", "**/*.parquet"),
            columns=(("problem",), ("answer",)),
            read=_math_reader("polaris", "aime", "train"),
            select=_one_format,
        ),
        DatasetSpec(
            name="dapo",
            family="math",
            title="DAPO-Math-17k",
            published=(Published("BytedTsinghua-SIA/DAPO-Math-17k", "data/dapo-math-17k.parquet"),),
            splits="train = every distinct problem (the release repeats each ~100 times)",
            patterns=("**/*.parquet",),
            columns=(("prompt",), ("reward_model",)),
            read=_math_reader("dapo", "dapo", "train"),
        ),
        DatasetSpec(
            name="aime-1983-2024",
            family="math",
            title="AIME 1983-2024",
            published=(
                Published("di-zhang-fdu/AIME_1983_2024", "AIME_Dataset_1983_2024.csv"),
                Published("gneubig/aime-1983-2024", "AIME_Dataset_1983_2024.csv"),
            ),
            splits="train = every problem (AIME 2024 problems also in aime24 are removed)",
            patterns=("*.csv", "**/*.csv", "**/*.parquet"),
            columns=(("ID",), ("Question",), ("Answer",)),
            read=_math_reader("aime-1983-2024", "aime", "train"),
            select=_one_format,
        ),
        DatasetSpec(
            name="aime24",
            family="math",
            title="AIME 2024",
            published=(
                Published("Maxwell-Jia/AIME_2024", "*.parquet (ID, Problem, Solution, Answer)"),
                Published("HuggingFaceH4/aime_2024", "data/train-*.parquet (id, problem, answer)"),
            ),
            splits="test = the 30 problems of AIME 2024 I and II",
            patterns=("*.parquet", "**/*.parquet", "*.jsonl", "**/*.jsonl"),
            columns=(("Problem", "problem"), ("Answer", "answer")),
            read=_math_reader("aime24", "aime", "test"),
            select=_one_format,
        ),
        DatasetSpec(
            name="aime25",
            family="math",
            title="AIME 2025",
            published=(
                Published("opencompass/AIME2025", "aime2025-I.jsonl, aime2025-II.jsonl"),
                Published("yentinglin/aime_2025", "*.parquet (id, problem, answer)"),
            ),
            splits="test = the 30 problems of AIME 2025 I and II",
            patterns=("*.jsonl", "**/*.jsonl", "*.parquet", "**/*.parquet"),
            columns=(("question", "problem", "Problem"), ("answer", "Answer")),
            read=_math_reader("aime25", "aime", "test"),
            select=_one_format,
        ),
        DatasetSpec(
            name="olympiadbench",
            family="math",
            title="OlympiadBench",
            published=(
                Published(
                    "Hothan/OlympiadBench",
                    "OlympiadBench/OE_TO_maths_en_COMP/OE_TO_maths_en_COMP.parquet",
                ),
            ),
            splits="test = the OE_TO_maths_en_COMP configuration (open-ended, text-only, "
            "English competition maths; the paper's)",
            patterns=("**/*.parquet", "**/*.jsonl", "**/*.json"),
            columns=(("question",), ("final_answer",)),
            read=_math_reader("olympiadbench", "olympiadbench", "test"),
            options=("config",),
            select=_select_olympiad,
        ),
    ]
}
"""Every data set ``mas-data`` prepares, by name."""


def check_columns(spec: DatasetSpec, path: Path, columns: Sequence[str]) -> None:
    """Raise :class:`DatasetError` when ``path`` lacks a field the publisher's files have."""
    have = set(columns)
    for alternatives in spec.columns:
        if not have & set(alternatives):
            want = " or ".join(repr(c) for c in alternatives)
            raise DatasetError(
                f"{path}: no column {want} (columns: {sorted(have)[:20]}); {spec.title} as "
                f"{spec.published[0].hub} publishes it has one: a wrong or partial download?"
            )
