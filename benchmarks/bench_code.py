"""How the code env judges programs, beside the naive way, measured side by side in one run.

Three ways to get a program's verdicts on a problem's hidden tests through the sandbox, each
timed as milliseconds per program (median over repeats, interleaved so load hits all alike):

* ``per-test``: one sandbox run per test case (``run_many`` over the tests: what a judge that
  starts the program once per test does; the reference system ran plain subprocesses per test);
* ``harness``: ours, one sandbox run per program with the harness forking one child per test
  (``mas_envs.code.judge.run_requests``, cache bypassed by a fresh comment per program);
* and for a tree step with K candidate programs: K env steps one after another versus
  ``env.prefetch`` (one pooled call) followed by the K steps.

Run::

    nice -n 10 python benchmarks/bench_code.py            # about a minute
    nice -n 10 python benchmarks/bench_code.py --quick
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import mas_envs
from mas_envs.code import judge
from mas_envs.code.problems import load_problems
from mas_envs.sandbox import Job, isolation, run_many

PROBLEMS = ("builtin/sum-two", "builtin/two-sum", "builtin/max-subarray")
_fresh = itertools.count()


def _unique(program: str) -> str:
    return f"# run {next(_fresh)} {time.time()}\n{program}"


def per_test(problem) -> float:
    """One sandbox run per test (stdin problems only: a call test needs a wrapper)."""
    program = _unique(problem.reference)
    jobs = [Job(code=program, stdin=c.input, timeout_s=5.0) for c in problem.tests]
    t = time.perf_counter()
    results = run_many(jobs)
    wall = time.perf_counter() - t
    assert all(
        judge.outputs_match(r.stdout, c.expected)
        for r, c in zip(results, problem.tests, strict=True)
    )
    return wall


def harness(problem) -> float:
    req = judge.Request(_unique(problem.reference), problem.tests, problem.fn_name, problem.setup)
    t = time.perf_counter()
    res = judge.run_requests([req])[0]
    wall = time.perf_counter() - t
    assert all(r.passed for r in res)
    return wall


def tree_step(k: int, use_prefetch: bool) -> float:
    env = mas_envs.make("mas/Code-v0")
    env.reset(options={"problem_id": "builtin/two-sum"})
    ref = env.problem.reference
    texts = [f"```python\n{_unique(ref)}```" for _ in range(k)]
    t = time.perf_counter()
    if use_prefetch:
        env.prefetch(texts, "coder")
    for text in texts:
        env.clone().step(text)
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 9")
    parser.add_argument("--k", type=int, default=4, help="candidates per tree step")
    args = parser.parse_args()
    repeats = 3 if args.quick else 9
    by_id = {p.id: p for p in load_problems("builtin")}
    stdin = [by_id[i] for i in PROBLEMS if by_id[i].kind == "stdio"]
    times: dict[str, list[float]] = {"per-test": [], "harness": [], "seq": [], "prefetch": []}
    for _ in range(repeats):
        for p in stdin:
            times["per-test"].append(per_test(p))
            times["harness"].append(harness(p))
        times["seq"].append(tree_step(args.k, False))
        times["prefetch"].append(tree_step(args.k, True))
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    n_tests = statistics.median(len(p.tests) for p in stdin)
    print(f"isolation: {isolation()}; {len(stdin)} stdin problems, {n_tests:g} tests each")
    print(f"per-test sandbox runs : {med['per-test']:8.1f} ms per program")
    print(f"harness (ours)        : {med['harness']:8.1f} ms per program")
    print(f"  speed-up            : {med['per-test'] / med['harness']:8.2f}x")
    print(f"tree step, K={args.k} sequential : {med['seq']:8.1f} ms")
    print(f"tree step, K={args.k} prefetch   : {med['prefetch']:8.1f} ms")
    print(f"  speed-up                : {med['seq'] / med['prefetch']:8.2f}x")


if __name__ == "__main__":
    main()
