"""Two or more versions of the pool's zygote, side by side in one process (A/B rounds interleaved).

Each argument is ``NAME=SOURCE``: ``SOURCE`` is a file (``mas_envs/sandbox/zygote.py``, a patched
copy) or ``git:REV:PATH`` (``git:main:mas_envs/sandbox/zygote.py``, read with ``git show``), run by
this tree's pool; or ``pool:REV`` (``pool:main``): the pool *and* the zygote of that revision
(``mas_envs/sandbox/pool.py`` loaded as a module of its own beside this tree's, for a change to
both; the rest of ``mas_envs.sandbox`` is this tree's, so it must be the same). Each
round restarts the pool of ``--workers`` with each version in turn (the order reversed every other
round, so a load that drifts hits every version alike), then times ``--runs`` trivial programs
back to back (``run_python``, the median of the round; and the CPU they cost, counted by the
kernel: this process's and the zygotes' with every run's init and program process) and
``run_many`` of ``--runs`` programs ``--workers`` at a time (runs per second). Prints the median
over rounds of each and its ratio to the first version, with the load average. ``--caps`` adds
capabilities to the workers' bubblewrap (for a version that needs one more; every version then
runs with it).

    python benchmarks/ab_zygote.py old=git:main:mas_envs/sandbox/zygote.py new=/tmp/zygote.py
    python benchmarks/ab_zygote.py old=pool:main new=mas_envs/sandbox/zygote.py
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from profile_pool_run import zygote_cpu_s

from mas_envs.sandbox import Job, entry, pool, run_many, run_python

CODE = "print(sum(range(1000)))"
EXPECTED = "499500\n"
_POOLS: list[Any] = [pool]


def _git_show(rev_path: str) -> str:
    return subprocess.run(
        ["git", "show", rev_path], capture_output=True, text=True, check=True
    ).stdout


def _source(spec: str) -> str:
    if spec.startswith("git:"):
        return _git_show(spec[4:])
    with open(spec, encoding="utf-8") as f:
        return f.read()


def _pool_of(rev: str, into: str) -> tuple[Any, str]:
    """The pool module of revision ``rev`` (its own module, which never replaces this tree's
    ``mas_envs.sandbox.pool``) and its zygote's source."""
    path = os.path.join(into, f"pool_{len(os.listdir(into))}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(_git_show(f"{rev}:mas_envs/sandbox/pool.py"))
    spec = importlib.util.spec_from_file_location(f"mas_envs.sandbox._ab_pool_{rev}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module, _git_show(f"{rev}:mas_envs/sandbox/zygote.py")


def _cpu_s(module: Any) -> float:
    """CPU seconds so far of this process and of the pool's zygotes with their reaped children
    (every run's init and program process), as the kernel counted them."""
    return sum(os.times()[:2]) + sum(zygote_cpu_s(module._pool.workers))


def _round(version: tuple[Any, str], runs: int, workers: int) -> tuple[float, float, float]:
    module, source = version
    for other in _POOLS:
        other.shutdown()
    entry.pool = module  # the entry point sends warm runs to this version's pool
    module.zygote_source = lambda: source
    assert run_python(CODE).stdout == EXPECTED  # start the pool outside the timings
    time.sleep(0.3)  # and let it get its runs ready
    times = []
    cpu0 = _cpu_s(module)
    for _ in range(runs):
        t = time.perf_counter()
        res = run_python(CODE)
        times.append(time.perf_counter() - t)
        assert res.verdict == "ok" and res.stdout == EXPECTED, res
    time.sleep(0.3)  # the last runs' inits are reaped (and as many runs made ready as were used)
    cpu = (_cpu_s(module) - cpu0) / runs
    t = time.perf_counter()
    results = run_many([Job(code=CODE)] * runs, max_workers=workers)
    rate = runs / (time.perf_counter() - t)
    assert all(r.stdout == EXPECTED for r in results)
    return statistics.median(times), rate, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("versions", nargs="+", help="NAME=FILE or NAME=git:REV:PATH")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=40, help="programs per round and version")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--caps", nargs="*", default=[], help="e.g. CAP_SYS_NICE")
    args = ap.parse_args()
    os.environ[pool.ENV_VAR] = str(args.workers)
    versions = dict(v.split("=", 1) for v in args.versions)
    sources: dict[str, tuple[Any, str]] = {}
    scratch = tempfile.mkdtemp(prefix="ab_zygote-")
    for name, spec in versions.items():
        if spec.startswith("pool:"):
            sources[name] = _pool_of(spec[5:], scratch)
            _POOLS.append(sources[name][0])
        else:
            sources[name] = (pool, _source(spec))
    for module in _POOLS:
        module._WORKER_CAPS = (*module._WORKER_CAPS, *args.caps)
    lat: dict[str, list[float]] = {name: [] for name in sources}
    rate: dict[str, list[float]] = {name: [] for name in sources}
    cpu: dict[str, list[float]] = {name: [] for name in sources}
    load = os.getloadavg()[0]
    for r in range(args.rounds):
        order = list(sources) if r % 2 == 0 else list(sources)[::-1]
        for name in order:
            ms, per_s, cpu_s = _round(sources[name], args.runs, args.workers)
            lat[name].append(ms * 1e3)
            rate[name].append(per_s)
            cpu[name].append(cpu_s * 1e3)
    for module in _POOLS:
        module.shutdown()
    print(
        f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}; {args.rounds} rounds x "
        f"{args.runs} runs per version; pool of {args.workers}"
    )
    first = next(iter(sources))
    base_ms, base_rate = statistics.median(lat[first]), statistics.median(rate[first])
    base_cpu = statistics.median(cpu[first])
    for name in sources:
        ms, per_s = statistics.median(lat[name]), statistics.median(rate[name])
        cpu_ms = statistics.median(cpu[name])
        rounds = " ".join(f"{x:.2f}" for x in lat[name])
        print(
            f"{name:<12} run_python {ms:6.2f} ms (x{ms / base_ms:.2f}; rounds {rounds})  "
            f"run_many x{args.workers} {per_s:6.1f}/s (x{per_s / base_rate:.2f})  "
            f"CPU per run {cpu_ms:.2f} ms (x{cpu_ms / base_cpu:.2f})"
        )


if __name__ == "__main__":
    main()
