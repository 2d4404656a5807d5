"""``mas-data``: list the data sets it prepares, and prepare one from its publisher's files.

    mas-data list [--out DIR]
    mas-data prepare NAME --from PATH --out DIR [--release v6] [--config C] [--slice S=A:B] ...

``docs/data.md`` has the one command per data set.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from mas_envs.datasets.catalogue import DATASETS, DatasetError, Options
from mas_envs.datasets.prepare import prepare, read_manifest

__all__ = ["main"]


def _slice(text: str) -> tuple[str, tuple[int, int | None]]:
    split, eq, rows = text.partition("=")
    lo, colon, hi = rows.partition(":")
    try:
        if not (eq and colon):
            raise ValueError
        start = int(lo) if lo else 0
        end = int(hi) if hi else None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--slice {text!r}: expected SPLIT=START:END, e.g. test=0:500 or validation=4500:"
        ) from None
    if start < 0 or (end is not None and end < start):
        raise argparse.ArgumentTypeError(f"--slice {text!r}: need 0 <= START <= END")
    return split, (start, end)


def _list(out: Path | None) -> int:
    for spec in DATASETS.values():
        print(f"{spec.name}  ({spec.family}) {spec.title}")
        for pub in spec.published:
            print(f"    published: {pub.url}  files: {pub.files}")
        print(f"    splits: {spec.splits}")
        print(f"    download: {spec.published[0].download.format(dir=f'raw/{spec.name}')}")
        print(f"    prepare: mas-data prepare {spec.name} --from raw/{spec.name} --out data")
        if out is not None and (out / spec.name / "manifest.json").is_file():
            try:
                m = read_manifest(out / spec.name)
            except DatasetError as e:
                print(f"    in {out}: {e}")
            else:
                counts = ", ".join(f"{s} {v['problems']}" for s, v in m["splits"].items())
                removed = sum(d["removed"] for d in m["dedup"].values())
                print(
                    f"    in {out}: {counts} (prepared {m['created']}; {removed} copies of "
                    "held-out problems removed)"
                )
        elif out is not None:
            print(f"    in {out}: not prepared")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The ``mas-data`` command line."""
    p = argparse.ArgumentParser(
        prog="mas-data",
        description="Prepare the paper's code and math data sets (APPS, CodeContests, "
        "LiveCodeBench, Polaris-53K, DAPO-17k, AIME, OlympiadBench) from the files their "
        "publishers distribute into task files for mas/Code-v0 and mas/Math-v*: the paper's "
        "splits, training data de-duplicated against every held-out problem, and a manifest.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="the data sets, where each is published, what is prepared")
    ls.add_argument("--out", type=Path, help="also show what is prepared in this folder")
    pr = sub.add_parser("prepare", help="prepare one data set from a local download")
    pr.add_argument("name", help=f"the data set: {', '.join(DATASETS)}")
    pr.add_argument(
        "--from",
        dest="source",
        required=True,
        type=Path,
        help="the download: the folder `huggingface-cli download <hub id> --repo-type dataset "
        "--local-dir DIR` made, or one of its files",
    )
    pr.add_argument(
        "--out",
        required=True,
        type=Path,
        help="output folder (writes OUT/NAME/<split>.jsonl and manifest.json); prepare every "
        "data set of a run into the same folder, so training data is checked against all "
        "held-out problems",
    )
    pr.add_argument(
        "--release",
        default=Options.release,
        help="livecodebench: release tag (v6 = the problems new in release 6, the paper's; "
        "release_v6 = all of releases 1-6; v5_v6; ...)",
    )
    pr.add_argument(
        "--config",
        default=Options.config,
        help="olympiadbench: the configuration (default: the paper's OE_TO_maths_en_COMP)",
    )
    pr.add_argument(
        "--slice",
        dest="slices",
        action="append",
        type=_slice,
        metavar="SPLIT=START:END",
        help="apps: rows of test.jsonl per split (repeat; default test=0:500 train=500:4500 "
        "validation=4500:)",
    )
    pr.add_argument(
        "--max-tests",
        type=int,
        default=Options.max_tests,
        help="most tests a training code problem keeps, public and private first (default "
        f"{Options.max_tests}; 0 = all). Held-out problems keep every test.",
    )
    pr.add_argument(
        "--near-threshold",
        type=float,
        default=Options.near_threshold,
        help="share of shared word 8-grams that makes a training problem a near copy of a "
        f"held-out one (default {Options.near_threshold}; 0 = exact copies only)",
    )
    pr.add_argument(
        "--validation",
        type=int,
        default=0,
        metavar="N",
        help="hold out N training problems (stable hash of the id) as a validation split, for "
        "data sets without one (polaris, dapo); default 0: the paper's splits",
    )
    pr.add_argument(
        "--skip-bad-rows",
        action="store_true",
        help="skip malformed rows (counted and listed in the manifest) instead of stopping",
    )
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command == "list":
        return _list(args.out)
    if args.max_tests < 0 or args.validation < 0:
        p.error("--max-tests and --validation must be >= 0")
    if not 0 <= args.near_threshold <= 1:
        p.error("--near-threshold must be in [0, 1]")
    options = Options(
        slices=dict(args.slices) if args.slices else None,
        release=args.release,
        config=args.config,
        max_tests=args.max_tests,
        near_threshold=args.near_threshold,
        skip_bad_rows=args.skip_bad_rows,
        validation=args.validation,
    )
    try:
        done = prepare(
            args.name,
            args.source,
            args.out,
            options,
            progress=lambda s: print(f"\r{s}", end="", file=sys.stderr, flush=True),
        )
    except (DatasetError, ValueError, FileNotFoundError, ImportError) as err:
        print(f"\nmas-data: error: {err}", file=sys.stderr)
        return 2
    print(file=sys.stderr)
    manifest = done.manifest
    folder = args.out / args.name
    for entry in manifest["splits"].values():
        print(f"{folder / entry['file']}: {entry['problems']} problems")
    left = manifest["left_out"]
    for where, n in done.removed.items():
        print(f"{where}: removed {n} copies of held-out problems")
    if left["train_duplicates"]:
        print(f"{args.name}/train: removed {left['train_duplicates']} repeated problems")
    if left["tests_beyond_max_tests"]:
        n = left["tests_beyond_max_tests"]
        print(f"{args.name}/train: left out {n} tests beyond --max-tests")
    if left["malformed_rows"]:
        print(f"{args.name}: skipped {left['malformed_rows']} malformed rows (manifest lists them)")
    print(f"manifest: {folder / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
