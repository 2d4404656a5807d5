"""What the sandbox costs: latency and throughput against a bare ``subprocess`` run.

Runs the same trivial program (``print(sum(range(1000)))``) four ways, side by side in one run:

* ``bare``: ``subprocess.run([sys.executable, "-c", code], capture_output=True)`` (no isolation);
* ``bare -S``: the same with ``-s -S``: the interpreter start-up the sandbox has (no ``site``,
  which in a big venv costs more than the sandbox itself);
* ``sandbox``: ``run_python(code)`` with the isolation this machine has (``isolation()``);
* ``rlimits-only``: ``run_python(code)`` with ``MAS_SANDBOX_ISOLATION=rlimits-only``.

and prints the median latency of each and its ratios to ``bare`` and ``bare -S``, then runs per
second with a pool of ``--workers`` (default 2, one per core of the dev machines) for ``bare``,
``bare -S`` and ``sandbox`` (``run_many``), and their ratios. Medians of ``--repeats`` rounds.

    python benchmarks/bench_sandbox.py [--runs 40] [--repeats 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import statistics
import subprocess
import sys
import time
import warnings

from mas_envs.sandbox import Job, Verdict, isolation, run_many, run_python

CODE = "print(sum(range(1000)))"
EXPECTED = "499500\n"


def _bare(flags: tuple[str, ...] = ()) -> None:
    out = subprocess.run([sys.executable, *flags, "-c", CODE], capture_output=True, text=True)
    assert out.stdout == EXPECTED, out


def _sandboxed() -> None:
    res = run_python(CODE)
    assert res.verdict == Verdict.ok and res.stdout == EXPECTED, res


def _latency(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _throughput_bare(runs: int, workers: int, flags: tuple[str, ...] = ()) -> float:
    t = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda _: _bare(flags), range(runs)))
    return runs / (time.perf_counter() - t)


def _throughput_sandbox(runs: int, workers: int) -> float:
    t = time.perf_counter()
    results = run_many([Job(code=CODE)] * runs, max_workers=workers)
    rate = runs / (time.perf_counter() - t)
    assert all(r.stdout == EXPECTED for r in results)
    return rate


def _with_mode(value: str | None, fn):
    old = os.environ.get("MAS_SANDBOX_ISOLATION")
    if value is None:
        os.environ.pop("MAS_SANDBOX_ISOLATION", None)
    else:
        os.environ["MAS_SANDBOX_ISOLATION"] = value
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn()
    finally:
        if old is None:
            os.environ.pop("MAS_SANDBOX_ISOLATION", None)
        else:
            os.environ["MAS_SANDBOX_ISOLATION"] = old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40, help="programs per round")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; medians are printed")
    ap.add_argument("--workers", type=int, default=2, help="pool size for the throughput test")
    args = ap.parse_args()

    mode = isolation()  # probe once, outside the timings
    _with_mode("rlimits-only", isolation)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"isolation: {mode}   python: {sys.version.split()[0]}   cpus: {os.cpu_count()}")
    print(f"load average before: {load} (other jobs on the machine skew every variant alike)")
    print(f"program: {CODE!r}; {args.runs} runs x {args.repeats} rounds, medians\n")

    lat: dict[str, list[float]] = {"bare": [], "bare -S": [], "sandbox": [], "rlimits-only": []}
    tput: dict[str, list[float]] = {"bare": [], "bare -S": [], "sandbox": []}
    for _ in range(args.repeats):
        # Interleaved, so that load from other users of the machine hits every variant alike.
        lat["bare"].append(_latency(_bare, args.runs))
        lat["bare -S"].append(_latency(lambda: _bare(("-s", "-S")), args.runs))
        lat["sandbox"].append(_latency(_sandboxed, args.runs))
        lat["rlimits-only"].append(
            _with_mode("rlimits-only", lambda: _latency(_sandboxed, args.runs))
        )
        tput["bare"].append(_throughput_bare(args.runs, args.workers))
        tput["bare -S"].append(_throughput_bare(args.runs, args.workers, ("-s", "-S")))
        tput["sandbox"].append(_throughput_sandbox(args.runs, args.workers))

    base = statistics.median(lat["bare"])
    base_s = statistics.median(lat["bare -S"])
    print(f"{'latency of one run':<38}{'median ms':>10}{'x bare':>9}{'x bare -S':>11}")
    for name, values in lat.items():
        label = f"sandbox ({mode})" if name == "sandbox" else name
        m = statistics.median(values)
        print(f"{label:<38}{m * 1e3:>10.1f}{m / base:>9.2f}{m / base_s:>11.2f}")
    print()
    rate = {name: statistics.median(values) for name, values in tput.items()}
    print(f"{f'runs/s, pool of {args.workers}':<38}{'median':>10}{'x bare':>9}{'x bare -S':>11}")
    for name, r in rate.items():
        label = "sandbox run_many" if name == "sandbox" else f"{name} subprocess"
        print(f"{label:<38}{r:>10.1f}{r / rate['bare']:>9.2f}{r / rate['bare -S']:>11.2f}")
    extra = statistics.median(lat["sandbox"]) - base_s
    print(
        f"\nsandbox latency over the same interpreter start-up (bare -S): {extra * 1e3:.1f} ms/run"
    )


if __name__ == "__main__":
    main()
