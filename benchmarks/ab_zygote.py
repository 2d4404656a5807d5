"""Two or more versions of the pool's zygote, side by side in one process (A/B rounds interleaved).

Each argument is ``NAME=SOURCE``: ``SOURCE`` is a file (``mas_envs/sandbox/zygote.py``, a patched
copy) or ``git:REV:PATH`` (``git:main:mas_envs/sandbox/zygote.py``, read with ``git show``). Each
round restarts the pool of ``--workers`` with each version in turn (the order reversed every other
round, so a load that drifts hits every version alike), then times ``--runs`` trivial programs
back to back (``run_python``, the median of the round) and ``run_many`` of ``--runs`` programs
``--workers`` at a time (runs per second). Prints the median over rounds of each and its ratio
to the first version, with the load average. ``--caps`` adds capabilities to the workers'
bubblewrap (for a version that needs one more; every version then runs with it).

    python benchmarks/ab_zygote.py old=git:main:mas_envs/sandbox/zygote.py new=/tmp/zygote.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

from mas_envs.sandbox import Job, pool, run_many, run_python

CODE = "print(sum(range(1000)))"
EXPECTED = "499500\n"


def _source(spec: str) -> str:
    if spec.startswith("git:"):
        rev_path = spec[4:]
        return subprocess.run(
            ["git", "show", rev_path], capture_output=True, text=True, check=True
        ).stdout
    with open(spec, encoding="utf-8") as f:
        return f.read()


def _round(source: str, runs: int, workers: int) -> tuple[float, float]:
    pool.shutdown()
    pool.zygote_source = lambda: source  # type: ignore[assignment]
    assert run_python(CODE).stdout == EXPECTED  # start the pool outside the timings
    time.sleep(0.3)  # and let it get its runs ready
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        res = run_python(CODE)
        times.append(time.perf_counter() - t)
        assert res.verdict == "ok" and res.stdout == EXPECTED, res
    t = time.perf_counter()
    results = run_many([Job(code=CODE)] * runs, max_workers=workers)
    rate = runs / (time.perf_counter() - t)
    assert all(r.stdout == EXPECTED for r in results)
    return statistics.median(times), rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("versions", nargs="+", help="NAME=FILE or NAME=git:REV:PATH")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=40, help="programs per round and version")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--caps", nargs="*", default=[], help="e.g. CAP_SYS_NICE")
    args = ap.parse_args()
    os.environ[pool.ENV_VAR] = str(args.workers)
    pool._WORKER_CAPS = (*pool._WORKER_CAPS, *args.caps)
    versions = dict(v.split("=", 1) for v in args.versions)
    sources = {name: _source(spec) for name, spec in versions.items()}
    lat: dict[str, list[float]] = {name: [] for name in sources}
    rate: dict[str, list[float]] = {name: [] for name in sources}
    load = os.getloadavg()[0]
    for r in range(args.rounds):
        order = list(sources) if r % 2 == 0 else list(sources)[::-1]
        for name in order:
            ms, per_s = _round(sources[name], args.runs, args.workers)
            lat[name].append(ms * 1e3)
            rate[name].append(per_s)
    pool.shutdown()
    print(
        f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}; {args.rounds} rounds x "
        f"{args.runs} runs per version; pool of {args.workers}"
    )
    first = next(iter(sources))
    base_ms, base_rate = statistics.median(lat[first]), statistics.median(rate[first])
    for name in sources:
        ms, per_s = statistics.median(lat[name]), statistics.median(rate[name])
        rounds = " ".join(f"{x:.2f}" for x in lat[name])
        print(
            f"{name:<12} run_python {ms:6.2f} ms (x{ms / base_ms:.2f}; rounds {rounds})  "
            f"run_many x{args.workers} {per_s:6.1f}/s (x{per_s / base_rate:.2f})"
        )


if __name__ == "__main__":
    main()
