"""``mas-leaderboard {validate,verify,seed,submit,render,check}``: the command line over
:mod:`~mas_trainer.eval.leaderboard.trust`, :mod:`~mas_trainer.eval.leaderboard.render` and
:mod:`~mas_trainer.eval.leaderboard.submit`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from mas_trainer.eval.leaderboard.render import check_rendered, percent, render
from mas_trainer.eval.leaderboard.submit import seed, submit, summary
from mas_trainer.eval.leaderboard.trust import (
    ValidationError,
    default_root,
    record_verified,
    validate_file,
    verify,
)
from mas_trainer.eval.suite import (
    BOARDS,
    DEFAULT_DATA,
    load_result,
)

__all__ = ["main"]

DESCRIPTION = "Leaderboards: validate, verify, place and render result files (``mas-leaderboard``)."

# ---------------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """``mas-leaderboard {validate,verify,submit,render}``; returns the exit code."""
    p = argparse.ArgumentParser(prog="mas-leaderboard", description=DESCRIPTION)
    p.add_argument("--root", type=Path, help="leaderboard folder (default: ./leaderboards)")
    p.add_argument(
        "--data",
        default=DEFAULT_DATA,
        help="folder of `mas-data prepare --out`: the data boards' test files (default "
        f"{DEFAULT_DATA!r})",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="schema, hashes, aggregates and replay of result files")
    v.add_argument("files", nargs="+", type=Path)
    v.add_argument("--no-replay", action="store_true", help="skip replaying episodes in the env")
    f = sub.add_parser("verify", help="re-run the policy and compare every episode")
    f.add_argument("files", nargs="+", type=Path)
    f.add_argument(
        "--record",
        action="store_true",
        help="on success, mark the files verified in verified.json (maintainers)",
    )
    f.add_argument("--device", default="cpu")
    s = sub.add_parser(
        "submit", help="validate, place under results/, re-render, print a PR summary"
    )
    s.add_argument("file", type=Path)
    s.add_argument("--force", action="store_true", help="replace an entry of the same name")
    sd = sub.add_parser(
        "seed", help="(re)make the random and oracle entries of boards, verified (maintainers)"
    )
    sd.add_argument(
        "boards",
        nargs="*",
        help="board names (default: every board that needs no prepared data)",
    )
    r = sub.add_parser("render", help="write LEADERBOARD.md, index.html and the docs page")
    r.add_argument("--check", action="store_true", help="exit 1 if the generated files are stale")
    args = p.parse_args(argv)
    root = args.root or default_root()
    try:
        if args.cmd == "validate":
            for path in args.files:
                result = validate_file(path, root, not args.no_replay, args.data)
                envs = ", ".join(
                    f"{r.get('board', r['env_id'])} {percent(r['aggregate']['success'])}%"
                    for r in result["results"]
                )
                print(f"{path}: valid ({envs})")
        elif args.cmd == "verify":
            failed = False
            for path in args.files:
                result = validate_file(path, root, False, args.data)
                diffs = verify(result, device=args.device, data_dir=args.data)
                if diffs:
                    failed = True
                    print(f"{path}: NOT reproduced:\n  - " + "\n  - ".join(diffs))
                    continue
                print(f"{path}: reproduced exactly")
                if args.record:
                    record_verified(root, path)
                    for out, text in render(root).items():
                        out.write_text(text)
            return 1 if failed else 0
        elif args.cmd == "seed":
            default = [k for k, b in BOARDS.items() if not b.data]
            for path in seed(root, args.boards or default, args.data):
                print(f"seeded {path} (verified)")
        elif args.cmd == "submit":
            placed = submit(args.file, root, force=args.force, data_dir=args.data)
            print(
                summary(
                    load_result(placed[0])
                    | {"results": [load_result(q)["results"][0] for q in placed]},
                    placed,
                    root,
                )
            )
        else:
            if args.check:
                stale = check_rendered(root)
                if stale:
                    print(
                        "stale generated files (run `mas-leaderboard render`): "
                        + ", ".join(str(s) for s in stale),
                        file=sys.stderr,
                    )
                    return 1
                print("generated files are up to date")
                return 0
            for out, text in render(root).items():
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(text)
                print(f"wrote {out}")
    except ValidationError as err:
        print(str(err), file=sys.stderr)
        return 1
    except (FileNotFoundError, FileExistsError, ValueError, KeyError, ImportError) as err:
        print(f"mas-leaderboard: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
