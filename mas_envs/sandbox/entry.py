"""The sandbox's entry points, :func:`run_python` and :func:`run_many`: where each program is
sent down the warm path or the cold one.

* Warm (:mod:`mas_envs.sandbox.pool`): a fresh fork of a zygote that is already inside its
  bubblewrap, a few milliseconds a program. It serves only the isolation it can give in full
  (root, bubblewrap, uid switch, cgroups) and only while ``MAS_SANDBOX_POOL`` is not ``off``.
* Cold (:func:`mas_envs.sandbox.runner.run_cold`): bubblewrap and an interpreter per program.

Both paths are built on the same pieces of :mod:`mas_envs.sandbox.runner` (the limits, the
output collection, the verdict), so a program gets the same verdict on either. This is the only
module that imports both; :func:`run_one` is the one place that chooses.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Sequence

from mas_envs.sandbox import modes, pool, runner
from mas_envs.sandbox.result import ExecResult, Job


def run_python(
    code: str,
    *,
    stdin: str = "",
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    files: dict[str, str] | None = None,
) -> ExecResult:
    """Run untrusted Python source in the sandbox and return how it ended.

    Never raises for anything the program does: crashes, limits and even a failing sandbox come
    back as a :class:`Verdict`. Raises only for a bad call (wrong types, bad limits, a file path
    that leaves the working directory).

    Args:
        code: The program, run as ``__main__`` by the same Python version as the caller's, with
            the standard library only (no site-packages).
        stdin: Text on its standard input; after it the program reads end-of-file.
        timeout_s: Wall-clock limit in seconds (CPU time is limited to about the same).
        memory_mb: Memory limit in MiB.
        files: Files to put in the working directory first: ``{"data/in.txt": "text"}``.

    Returns:
        The verdict, exit code, captured stdout/stderr (capped) and wall time.

    Example:
        >>> run_python("print(input()[::-1])", stdin="abc").stdout
        'cba\\n'
    """
    job = Job(code=code, stdin=stdin, timeout_s=timeout_s, memory_mb=memory_mb, files=files)
    runner.check_job(job)
    return run_one(runner.current_mode(), job)


def run_many(jobs: Sequence[Job], *, max_workers: int | None = None) -> list[ExecResult]:
    """Run many programs concurrently, at most ``max_workers`` at a time; results in input order.

    Args:
        jobs: The programs and their arguments (see :class:`Job`).
        max_workers: Concurrent runs; default: the number of CPUs this process may use.

    Returns:
        One :class:`ExecResult` per job, in the order of ``jobs``.
    """
    jobs = list(jobs)
    for job in jobs:
        if not isinstance(job, Job):
            raise TypeError(f"run_many expects mas_envs.sandbox.Job items, got {type(job)!r}")
        runner.check_job(job)
    if not jobs:
        return []
    if max_workers is None:
        usable = getattr(os, "sched_getaffinity", None)
        max_workers = len(usable(0)) if usable else (os.cpu_count() or 1)
    if max_workers < 1:
        raise ValueError(f"max_workers must be >= 1, got {max_workers}")
    mode = runner.current_mode()  # detect (and warn) once, before the threads start
    workers = min(max_workers, len(jobs))
    if workers == 1:
        return [run_one(mode, job) for job in jobs]
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="sandbox") as threads:
        return list(threads.map(lambda job: run_one(mode, job), jobs))


def run_one(mode: modes.Mode, job: Job) -> ExecResult:
    """Run one checked ``job``: in the warm pool when it serves ``mode``, else cold."""
    if pool.wanted(mode):
        res = pool.run(mode, job)
        if res is not None:  # None: the pool could not start, or switched itself off
            return res
    return runner.run_cold(mode, job)
