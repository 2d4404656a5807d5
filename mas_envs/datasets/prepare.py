"""``mas-data prepare``: publisher files -> the envs' task files, de-duplicated, with a manifest.

For a data set ``NAME`` (:data:`~mas_envs.datasets.catalogue.DATASETS`) and an output folder
``DIR``, :func:`prepare` writes ``DIR/NAME/<split>.jsonl`` (one problem per line, in the
``mas-data`` layout of :func:`mas_envs.code.problems.problem_to_record` or
:func:`mas_envs.math.loaders.problem_to_record`) and ``DIR/NAME/manifest.json``, then
de-duplicates the whole folder (:func:`dedupe_folder`): every training and validation problem of
every data set of the same family in ``DIR`` that copies a held-out problem (exactly or nearly,
:mod:`mas_envs.datasets.dedup`) is removed, so the order in which data sets are prepared does not
matter and no test problem is trained on. Test splits are never changed: they stay the benchmark
as published.

The manifest records the inputs (path, size, SHA-256), the options, per split the problem count
and the output's SHA-256, what was left out and why (records without tests, malformed rows when
skipped, duplicates inside a training set, tests beyond ``max_tests``, copies of held-out
problems with the problem they copy), and the versions of mas-rl, Python and pyarrow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import fcntl
import hashlib
import json
import os
import platform
import sys
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from mas_envs.code import problems as code_problems
from mas_envs.datasets.catalogue import (
    DATASETS,
    DatasetError,
    DatasetSpec,
    Options,
    Untested,
    check_columns,
)
from mas_envs.datasets.dedup import HeldOutIndex, fingerprint
from mas_envs.math import loaders as math_loaders
from mas_envs.rows import parquet_columns

__all__ = ["MANIFEST_FORMAT", "SPLITS", "Prepared", "dedupe_folder", "prepare", "read_manifest"]

MANIFEST_FORMAT = "mas-rl/data-manifest-v1"
SPLITS = ("train", "validation", "test")
MAX_LISTED = 200
"""At most this many skipped rows are listed by message in a manifest (all are counted)."""


def _spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        import difflib

        close = difflib.get_close_matches(name, list(DATASETS), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise DatasetError(
            f"unknown data set {name!r}; {hint}mas-data list names them: {', '.join(DATASETS)}"
        )
    return DATASETS[name]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _git_blob_sha1(path: Path) -> str:
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def hub_download_record(source: Path, path: Path, sha256: str) -> dict[str, str]:
    """What ``huggingface-cli download --local-dir`` recorded about ``path``, checked.

    The download keeps ``.cache/huggingface/download/<file>.metadata`` beside the files: the
    repository commit, the file's ETag (the SHA-256 of an LFS file, the git blob hash of
    others) and a time. A file whose bytes no longer match its ETag was cut off or changed
    after the download.

    Returns:
        ``{"revision": commit}`` when the metadata is there, else ``{}``.

    Raises:
        DatasetError: The file does not match the ETag the hub served.
    """
    if not source.is_dir():
        return {}
    meta = source / ".cache" / "huggingface" / "download" / f"{path.relative_to(source)}.metadata"
    try:
        commit, etag = meta.read_text().splitlines()[:2]
    except (OSError, ValueError):
        return {}
    etag = etag.strip().strip('"')
    actual = sha256 if len(etag) == 64 else _git_blob_sha1(path) if len(etag) == 40 else etag
    if actual != etag:
        raise DatasetError(
            f"{path}: its bytes do not match what the hub served (ETag {etag}, file {actual}): "
            "a cut-off or edited download; download it again"
        )
    return {"revision": commit.strip()}


def file_columns(path: Path) -> list[str] | None:
    """The field names of a file's first record (``None`` when that cannot be told cheaply)."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        return parquet_columns(path, DatasetError)
    if name.endswith(".csv"):
        import csv

        with path.open(encoding="utf-8", newline="") as f:
            return next(csv.reader(f), [])
    if name.endswith(".jsonl"):
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    try:
                        first = json.loads(line)
                    except ValueError:
                        return None  # the loader names the bad line
                    return sorted(first) if isinstance(first, dict) else None
    return None


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("mas-rl", "pyarrow"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _text(family: str, record: dict[str, Any]) -> str:
    return str(record["statement"] if family == "code" else record["question"])


def _to_record(family: str, problem: Any) -> dict[str, Any]:
    if family == "code":
        return code_problems.problem_to_record(problem)
    return math_loaders.problem_to_record(problem)


def _cap_tests(problem: Any, max_tests: int) -> tuple[Any, int]:
    """A training code problem with at most ``max_tests`` tests, its public ones first."""
    if not max_tests or len(problem.tests) <= max_tests:
        return problem, 0
    public = set(problem.public)
    ordered = [t for t in problem.tests if t in public] + [
        t for t in problem.tests if t not in public
    ]
    kept = tuple(ordered[:max_tests])
    return dataclasses.replace(problem, tests=kept), len(problem.tests) - len(kept)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One ``prepare`` at a time per output folder (the de-duplication rewrites files)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".mas-data.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_manifest(folder: Path) -> dict[str, Any]:
    """A prepared data set's ``manifest.json``.

    Raises:
        DatasetError: There is none, or it is not a manifest of this format.
    """
    path = folder / "manifest.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DatasetError(f"{path}: not a readable manifest ({e}); prepare again") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise DatasetError(f"{path}: not a {MANIFEST_FORMAT} manifest; prepare again")
    return data


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    tmp = folder / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, folder / "manifest.json")


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What one :func:`prepare` run did.

    Attributes:
        manifest: The data set's manifest (after the folder's de-duplication).
        removed: ``{"<set>/<split>": n}``: copies of held-out problems this run removed, from
            this data set or from others prepared in the same folder before.
    """

    manifest: dict[str, Any]
    removed: dict[str, int]


def prepare(
    name: str,
    source: str | Path,
    out: str | Path,
    options: Options | None = None,
    progress: Callable[[str], None] | None = None,
) -> Prepared:
    """Prepare data set ``name`` from its publisher's files under ``source`` into ``out/name/``.

    Args:
        name: A key of :data:`~mas_envs.datasets.catalogue.DATASETS`.
        source: The download: a folder as ``huggingface-cli download`` leaves it, or one file.
        out: The output folder (shared by all data sets of a run; de-duplicated together).
        options: Choices (splits, release, caps); defaults are the paper's.
        progress: Called with a short status line now and then.

    Returns:
        The manifest and what the folder's de-duplication removed.

    Raises:
        DatasetError: The download is not the publisher's layout (missing files or columns).
        mas_envs.code.problems.ProblemFormatError, mas_envs.math.loaders.ProblemFileError: A row
            is malformed (the message names the file, the row and the field), unless
            ``options.skip_bad_rows``.
    """
    spec = _spec(name)
    opts = options or Options()
    unused = [
        f.name
        for f in dataclasses.fields(Options)
        if f.name in ("slices", "release", "config")
        and f.name not in spec.options
        and getattr(opts, f.name) != f.default
    ]
    if unused:
        raise DatasetError(f"{', '.join(unused)} do(es) not apply to {name}")
    source, out = Path(source), Path(out)
    files = spec.find(source, opts)
    inputs = _inputs(source, files)  # first: a cut-off download fails before any other check
    for f in files:
        columns = file_columns(f)
        if columns is not None:
            check_columns(spec, f, columns)
    with _locked(out):
        _write_set(spec, files, inputs, out / name, opts, progress)
        removed = dedupe_folder(out, spec.family, opts.near_threshold)
        return Prepared(read_manifest(out / name), removed)


def _inputs(source: Path, files: list[Path]) -> list[dict[str, Any]]:
    out = []
    for f in files:
        sha = _sha256(f)
        out.append(
            {
                "path": f.relative_to(source).as_posix() if source.is_dir() else f.name,
                "bytes": f.stat().st_size,
                "sha256": sha,
                **hub_download_record(source, f, sha),
            }
        )
    return out


def _write_set(
    spec: DatasetSpec,
    files: list[Path],
    inputs: list[dict[str, Any]],
    folder: Path,
    opts: Options,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    bad: list[str] = []
    n_bad = 0

    def on_error(err: ValueError) -> None:
        nonlocal n_bad
        n_bad += 1
        if len(bad) < MAX_LISTED:
            bad.append(str(err))

    handles: dict[str, Any] = {}
    counts: dict[str, int] = {}
    ids: dict[str, str] = {}
    seen: dict[str, str] = {}
    duplicates: list[dict[str, str]] = []
    tests_dropped = 0
    untested: list[str] = []
    total = 0
    try:
        for split, problem in spec.read(files, opts, on_error if opts.skip_bad_rows else None):
            if isinstance(problem, Untested):
                untested.append(f"{problem.path}: record {problem.index}")
                continue
            record = _to_record(spec.family, problem)
            if split == "train":
                fp = fingerprint(_text(spec.family, record))
                if fp in seen:  # repeats inside a training set (DAPO holds each ~100 times)
                    duplicates.append({"id": problem.id, "same_as": seen[fp]})
                    continue
                seen[fp] = problem.id
                if spec.family == "code":
                    problem, dropped = _cap_tests(problem, opts.max_tests)
                    tests_dropped += dropped
                    record = _to_record(spec.family, problem)
            if problem.id in ids:
                raise DatasetError(
                    f"{spec.name}: problem id {problem.id!r} appears twice in the download "
                    f"(in {ids[problem.id]} and {split}); ids must be unique"
                )
            ids[problem.id] = split
            if split not in handles:
                handles[split] = (folder / f"{split}.jsonl.tmp").open("w", encoding="utf-8")
            handles[split].write(json.dumps(record, ensure_ascii=False) + "\n")
            counts[split] = counts.get(split, 0) + 1
            total += 1
            if progress and total % 1000 == 0:
                progress(f"{spec.name}: {total} problems")
    except BaseException:
        for h in handles.values():
            h.close()
        for split in handles:
            (folder / f"{split}.jsonl.tmp").unlink(missing_ok=True)
        raise
    for h in handles.values():
        h.close()
    if not counts:
        raise DatasetError(
            f"{spec.name}: no problems in {[str(f) for f in files]} "
            f"({n_bad} malformed rows skipped)"
        )
    if opts.validation:
        _hold_out(spec, folder, opts.validation, counts)
    for split in SPLITS:
        final = folder / f"{split}.jsonl"
        if split in counts:
            os.replace(folder / f"{split}.jsonl.tmp", final)
        else:
            final.unlink(missing_ok=True)  # from an earlier run with other options
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "name": spec.name,
        "family": spec.family,
        "title": spec.title,
        "published": [{"hub": p.hub, "files": p.files, "url": p.url} for p in spec.published],
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(["mas-data", *sys.argv[1:]]) if sys.argv else "",
        "options": {
            k: (dict(v) if isinstance(v, dict) else v) for k, v in dataclasses.asdict(opts).items()
        },
        "inputs": inputs,
        "splits": {
            split: _split_entry(folder / f"{split}.jsonl", counts[split])
            for split in SPLITS
            if split in counts
        },
        "left_out": {
            "malformed_rows": n_bad,
            "malformed_examples": bad,
            "records_without_tests": len(untested),
            "records_without_tests_examples": untested[:MAX_LISTED],
            "train_duplicates": len(duplicates),
            "train_duplicate_examples": duplicates[:MAX_LISTED],
            "tests_beyond_max_tests": tests_dropped,
        },
        "dedup": {},
        "versions": _versions(),
    }
    _write_manifest(folder, manifest)
    return manifest


def _hold_out(spec: DatasetSpec, folder: Path, n: int, counts: dict[str, int]) -> None:
    """Move ``n`` training problems, chosen by a stable hash of their ids, to validation."""
    if "validation" in counts:
        raise DatasetError(f"--validation: {spec.name} has a validation split of its own")
    if counts.get("train", 0) <= n:
        raise DatasetError(
            f"--validation {n}: {spec.name} has only {counts.get('train', 0)} training problems"
        )
    train = folder / "train.jsonl.tmp"
    ranked = sorted(
        (hashlib.sha256(rec["id"].encode()).hexdigest(), rec["id"]) for _, rec in _lines(train)
    )
    chosen = {pid for _, pid in ranked[:n]}
    rest = folder / "train.jsonl.rest"
    with (
        rest.open("w", encoding="utf-8") as keep,
        (folder / "validation.jsonl.tmp").open("w", encoding="utf-8") as held,
    ):
        for line, rec in _lines(train):
            if rec["id"] in chosen:
                rec["split"] = "validation"
                held.write(json.dumps(rec, ensure_ascii=False) + "\n")
            else:
                keep.write(line)
    os.replace(rest, train)
    counts["train"] -= n
    counts["validation"] = n


def _split_entry(path: Path, problems: int) -> dict[str, Any]:
    return {
        "file": path.name,
        "problems": problems,
        "bytes": path.stat().st_size,
        "sha256": _sha256(path),
    }


# ---------------------------------------------------------------------------------- dedup


def _family_sets(out: Path, family: str) -> dict[str, dict[str, Any]]:
    sets = {}
    for folder in sorted(p for p in out.iterdir() if (p / "manifest.json").is_file()):
        manifest = read_manifest(folder)
        if manifest.get("family") == family:
            sets[folder.name] = manifest
    return sets


def _lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield line, json.loads(line)


def dedupe_folder(out: str | Path, family: str, threshold: float = 0.5) -> dict[str, int]:
    """Remove every copy of a held-out problem from the training data of ``out``.

    For the prepared data sets of ``family`` in ``out``: validation problems that copy a test
    problem, and training problems that copy a test or validation problem, of any data set, are
    dropped from their files; each manifest lists what it lost and which held-out problem each
    copied, and the SHA-256 of the held-out files it was checked against.

    Returns:
        ``{"<set>/<split>": problems removed now}`` for the splits that lost any.
    """
    out = Path(out)
    sets = _family_sets(out, family)
    removed_now: dict[str, int] = {}

    def held(split: str) -> list[tuple[str, str]]:
        items = []
        for name, m in sets.items():
            if split in m["splits"]:
                for _, rec in _lines(out / name / f"{split}.jsonl"):
                    items.append((f"{name}/{split}:{rec['id']}", _text(family, rec)))
        return items

    tests = held("test")
    for split, against in (("validation", ("test",)), ("train", ("test", "validation"))):
        extra = held("validation") if "validation" in against else []
        index = HeldOutIndex(tests + extra, threshold)
        checked = {
            f"{name}/{s}": m["splits"][s]["sha256"]
            for name, m in sets.items()
            for s in against
            if s in m["splits"]
        }
        for name, manifest in sets.items():
            if split not in manifest["splits"]:
                continue
            path = out / name / f"{split}.jsonl"
            found = []
            tmp = path.with_suffix(".jsonl.tmp")
            kept = 0
            with tmp.open("w", encoding="utf-8") as f:
                for line, rec in _lines(path):
                    m = index.find(_text(family, rec)) if len(index) else None
                    if m is None:
                        f.write(line)
                        kept += 1
                    else:
                        found.append(
                            {
                                "id": rec["id"],
                                "copies": m.held_out,
                                "method": m.method,
                                "score": m.score,
                            }
                        )
            entry = manifest["dedup"].setdefault(split, {"removed": 0, "matches": []})
            entry["checked_against"] = checked
            entry["threshold"] = threshold
            if found:
                os.replace(tmp, path)
                entry["removed"] += len(found)
                entry["matches"] += found
                manifest["splits"][split] = _split_entry(path, kept)
                removed_now[f"{name}/{split}"] = len(found)
            else:
                tmp.unlink()
            _write_manifest(out / name, manifest)
    return removed_now
