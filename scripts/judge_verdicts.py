"""Record the code judge's verdicts on honest programs, and compare two records.

A change to the judge (harness, sandbox, comparison) must not change what honest programs get.
This runs every reference solution and every known wrong program of the built-in problems, and
for HumanEval the reference and seven wrong programs per problem (returning ``None``, ``0``,
``""`` or its first argument, raising, ``sys.exit`` in the call, not compiling, no function), on
every hidden test and on the public examples as feedback cases, and writes one line per
(program, case): status, output and the last line of the error.

    python scripts/judge_verdicts.py record before.json        # on the old tree
    python scripts/judge_verdicts.py record after.json         # on the new one
    python scripts/judge_verdicts.py compare before.json after.json

``PYTHONPATH=/path/to/old/checkout`` runs an older tree with this venv. ``record`` takes about
5 minutes on the 2-core dev machine; ``--no-humaneval`` skips HumanEval.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import re
import sys
import time

from mas_envs.code import judge
from mas_envs.code.problems import load_problems

WRONG_BODIES = {
    "none": "    return None\n",
    "zero": "    return 0\n",
    "empty": "    return ''\n",
    "first-arg": "    return next(iter(locals().values()), None)\n",
    "raises": "    raise ValueError('not done')\n",
    "exits": "    import sys\n    sys.exit(0)\n",
    "no-compile": "    return (\n",
}
_VOLATILE = re.compile(r"\b\d+(\.\d+)? ?s\b|pid \d+|0x[0-9a-f]+")


def _programs(problem) -> list[tuple[str, str]]:
    out = [("reference", problem.reference)] if problem.reference else []
    out += [(f"wrong{i}", w) for i, w in enumerate(problem.wrong)]
    if problem.id.startswith("humaneval/"):
        out += [(name, problem.starter + body) for name, body in WRONG_BODIES.items()]
        out.append(("no-function", "x = 1\n"))
    return out


def _request(problem, program: str, cases, visible: bool):
    params = inspect.signature(judge.Request).parameters
    kw = {"hidden": not visible} if "hidden" in params else {}
    return judge.Request(program, tuple(cases), problem.fn_name, problem.setup, **kw)


def record(path: str, humaneval: bool) -> None:
    problems = list(load_problems("builtin"))
    if humaneval:
        problems += list(load_problems("humaneval"))
    jobs = []
    for p in problems:
        for name, program in _programs(p):
            jobs.append((p, name, program, p.tests, "hidden"))
            if p.public:
                jobs.append((p, name, program, p.public, "feedback"))
    lines = {}
    t = time.monotonic()
    for start in range(0, len(jobs), 16):
        chunk = jobs[start : start + 16]
        reqs = [_request(p, prog, cases, kind == "feedback") for p, _, prog, cases, kind in chunk]
        for (p, name, _, cases, kind), results in zip(chunk, judge.run_requests(reqs), strict=True):
            for i, (case, res) in enumerate(zip(cases, results, strict=True)):
                err = res.error.strip().splitlines()[-1:] or [""]
                key = f"{p.id} {name} {kind} {i}"
                lines[key] = {
                    "status": res.status,
                    "output": hashlib.sha1(res.output.encode("utf-8", "replace")).hexdigest(),
                    "error": _VOLATILE.sub("#", err[0])[:200],
                    "case": case.kind,
                }
        print(f"\r{min(start + 16, len(jobs))}/{len(jobs)} runs", end="", file=sys.stderr)
    print(f"\n{len(lines)} verdicts in {time.monotonic() - t:.0f} s", file=sys.stderr)
    with open(path, "w") as f:
        json.dump(lines, f, indent=0, sort_keys=True)


def compare(a_path: str, b_path: str) -> int:
    with open(a_path) as f:
        a = json.load(f)
    with open(b_path) as f:
        b = json.load(f)
    missing = sorted(set(a) ^ set(b))
    differ = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    hidden = sum(" hidden " in k for k in set(a) & set(b))
    print(
        f"{len(set(a) & set(b))} verdicts in both ({hidden} on hidden tests), "
        f"{len(differ)} differ, {len(missing)} in only one"
    )
    for k in differ[:50]:
        print(f"  {k}: {a[k]} -> {b[k]}")
    for k in missing[:20]:
        print(f"  only in {'first' if k in a else 'second'}: {k}")
    return 1 if differ or missing else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="run the honest programs and write their verdicts")
    rec.add_argument("out")
    rec.add_argument("--no-humaneval", action="store_true")
    cmp_ = sub.add_parser("compare", help="compare two records; exit 1 if they differ")
    cmp_.add_argument("a")
    cmp_.add_argument("b")
    args = parser.parse_args()
    if args.cmd == "record":
        record(args.out, not args.no_humaneval)
    else:
        sys.exit(compare(args.a, args.b))


if __name__ == "__main__":
    main()
