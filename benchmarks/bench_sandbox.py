"""What the sandbox costs: the warm pool and cold runs against a bare ``subprocess`` run.

Runs the same trivial program (``print(sum(range(1000)))``) these ways, side by side in one run:

* ``bare``: ``subprocess.run([sys.executable, "-c", code], capture_output=True)`` (no isolation);
* ``bare -S``: the same with ``-s -S``: the interpreter start-up the sandbox has (no ``site``,
  which in a big venv costs more than the sandbox itself);
* ``pool``: ``run_python(code)`` through the warm pool (the default; ``MAS_SANDBOX_POOL``);
* ``cold``: ``run_python(code)`` with ``MAS_SANDBOX_POOL=off``: bubblewrap and an interpreter
  per program, the isolation this machine has (``isolation()``);
* ``rlimits-only``: ``run_python(code)`` with ``MAS_SANDBOX_ISOLATION=rlimits-only`` (cold).

and prints the median latency of each and its ratios to ``cold``, ``bare`` and ``bare -S``; then
runs per second with ``--workers`` at a time (default 2, one per core of the dev machines; the
pool then has that many workers) for ``bare``, ``bare -S``, the pool's and cold ``run_many``, and
their ratios. Latency rounds and throughput rounds are interleaved, so load from other users of
the machine hits every variant alike; medians of ``--repeats`` rounds.

    python benchmarks/bench_sandbox.py [--runs 40] [--repeats 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import statistics
import subprocess
import sys
import time
import warnings

from mas_envs.sandbox import Job, Verdict, isolation, pool, run_many, run_python

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
    with concurrent.futures.ThreadPoolExecutor(workers) as threads:
        list(threads.map(lambda _: _bare(flags), range(runs)))
    return runs / (time.perf_counter() - t)


def _throughput_sandbox(runs: int, workers: int) -> float:
    t = time.perf_counter()
    results = run_many([Job(code=CODE)] * runs, max_workers=workers)
    rate = runs / (time.perf_counter() - t)
    assert all(r.stdout == EXPECTED for r in results)
    return rate


@contextlib.contextmanager
def _env(**values: str | None):
    old = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


REFS = {"cold": "x cold", "bare": "x bare", "bare -S": "x bare -S"}


def _print_table(title: str, unit: str, values: dict[str, float], labels: dict[str, str], scale):
    print(f"{title:<40}{unit:>10}" + "".join(f"{r:>11}" for r in REFS.values()))
    for name, v in values.items():
        ratios = "".join(f"{v / values[r]:>11.2f}" for r in REFS)
        print(f"{labels[name]:<40}{v * scale:>10.1f}{ratios}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40, help="programs per round")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; medians are printed")
    ap.add_argument("--workers", type=int, default=2, help="runs at a time; the pool's size")
    args = ap.parse_args()

    pool_env = {pool.ENV_VAR: str(args.workers)}
    cold_env = {pool.ENV_VAR: "off"}
    mode = isolation()  # probe once, outside the timings
    with _env(**pool_env):
        _sandboxed()  # start the pool outside the timings
    with _env(MAS_SANDBOX_ISOLATION="rlimits-only", **cold_env):
        isolation()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"isolation: {mode}   python: {sys.version.split()[0]}   cpus: {os.cpu_count()}")
    print(f"load average before: {load} (other jobs on the machine skew every variant alike)")
    print(f"program: {CODE!r}; {args.runs} runs x {args.repeats} rounds, medians\n")

    names = ["bare", "bare -S", "pool", "cold", "rlimits-only"]
    lat: dict[str, list[float]] = {name: [] for name in names}
    tput: dict[str, list[float]] = {name: [] for name in names[:4]}
    for _ in range(args.repeats):
        lat["bare"].append(_latency(_bare, args.runs))
        lat["bare -S"].append(_latency(lambda: _bare(("-s", "-S")), args.runs))
        with _env(**pool_env):
            lat["pool"].append(_latency(_sandboxed, args.runs))
        with _env(**cold_env):
            lat["cold"].append(_latency(_sandboxed, args.runs))
        with _env(MAS_SANDBOX_ISOLATION="rlimits-only", **cold_env):
            lat["rlimits-only"].append(_latency(_sandboxed, args.runs))
        tput["bare"].append(_throughput_bare(args.runs, args.workers))
        tput["bare -S"].append(_throughput_bare(args.runs, args.workers, ("-s", "-S")))
        with _env(**pool_env):
            tput["pool"].append(_throughput_sandbox(args.runs, args.workers))
        with _env(**cold_env):
            tput["cold"].append(_throughput_sandbox(args.runs, args.workers))

    labels = {
        "bare": "bare subprocess.run",
        "bare -S": "bare subprocess.run -s -S",
        "pool": f"run_python, warm pool of {args.workers}",
        "cold": "run_python, cold (pool off)",
        "rlimits-only": "run_python, rlimits-only (cold)",
    }
    latency = {k: statistics.median(v) for k, v in lat.items()}
    _print_table("latency of one run", "median ms", latency, labels, 1e3)
    rate = {k: statistics.median(v) for k, v in tput.items()}
    many = {k: v.replace("run_python", "run_many") for k, v in labels.items()}
    _print_table(f"runs/s, {args.workers} at a time", "median", rate, many, 1.0)
    pool_ms, cold_ms = lat["pool"], lat["cold"]
    print(
        f"pool vs cold: {statistics.median(cold_ms) / statistics.median(pool_ms):.1f}x the speed "
        f"of one run, {statistics.median(tput['pool']) / statistics.median(tput['cold']):.1f}x "
        f"the throughput; load average after: " + ", ".join(f"{x:.1f}" for x in os.getloadavg())
    )


if __name__ == "__main__":
    main()
