"""Where the time of one pooled trivial run goes: a timeline of stamps across the three processes.

Runs ``print(sum(range(1000)))`` through the warm pool ``--runs`` times, one at a time with
``--gap-ms`` between runs (so the pool has its next run ready, as a caller that does other work
between programs sees it), and prints the median time of each phase, p25 and p75:

* this process (``H*``): wrapped pool and runner functions (taking a ready run, the uid, the send,
  seeing the exit, collecting the output, ending the run, the verdict);
* the program's process (``C*``, ``L*``): ``monotonic_ns`` stamps written to the run's stderr by
  a copy of ``zygote.py`` and ``launcher.py`` with stamp lines added (received the job, read its
  spec, wrote the program file, switched uid, wrote ``files=``, the ``S`` marker, the program
  done, ``atexit``, just before ``os._exit``);
* the run's init (``I1``): when it wakes for the program's exit (its stderr is the worker's).

It also prints the CPU time a run costs, counted by the kernel: the zygotes' own (forking the
runs' inits) and their reaped children's (each run's init and program process: their set-up,
the program, their exits and namespaces' teardown in their own context; not the kernel threads
that free a network namespace later), and this process's (the caller and the pool's manager
thread). With 2 cores that sum bounds the pool's throughput (2000 ms of CPU a second).

The clock is the machine's ``CLOCK_MONOTONIC`` (the sandbox has no time namespace). The patched
sources are checked to contain every line a stamp goes after, so a change there fails loudly.

    python benchmarks/profile_pool_run.py [--runs 200] [--gap-ms 10]
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import re
import socket
import statistics
import threading
import time

from mas_envs.sandbox import modes, pool, run_python, runner, uids

CODE = "print(sum(range(1000)))\n"


def _stamp(tag: str) -> str:
    return f'os.write(2, b"@{tag} %d\\n" % __import__("time").monotonic_ns())'


def _patched(source: str, after: list[tuple[str, str]]) -> str:
    for line, tag in after:
        if source.count(line) != 1:
            raise SystemExit(f"profile_pool_run: the line {line!r} is not in the source once")
        indent = line[: len(line) - len(line.lstrip(" "))]
        if line.rstrip().endswith(":"):
            indent += "    "
        source = source.replace(line, f"{line}{indent}{_stamp(tag)}\n")
    return source


ZYGOTE = [
    ("        msg, fds = _recv(chan, 5)\n", "C1_recv"),  # (goes to the worker's stderr)
    ("        job = _read_spec(spec_fd)\n", "C2_spec"),
    ('        _LAUNCHER["setup"](job)  # type: ignore[operator]\n', "C3_setup"),
    ("        code = _exit_status(exc)\n", "C4a_program"),
    ("        code = 0\n", "C4a_program"),
    ("    atexit._run_exitfuncs()\n", "C4b_atexit"),
    ("    status = _flush(status)\n", "C4_exit"),
    ("        if info is None or info.si_pid == main_pid:\n", "I1_initwake"),
]
LAUNCHER = [
    ('    _write_text(spec["code_path"], spec["code"])\n', "L1_codefile"),
    ("    cwd = os.getcwd()\n", "L2_uid"),
    ('    os.close(spec["status_fd"])\n', "L4_S"),
]
ORDER = [
    "H0_take",
    "H1_taken",
    "H2_uid",
    "H3_send",
    "H4_sent",
    "C1_recv",
    "C2_spec",
    "L1_codefile",
    "L2_uid",
    "C3_setup",
    "L4_S",
    "C4a_program",
    "C4b_atexit",
    "C4_exit",
    "I1_initwake",
    "H5a_pollentry",
    "H5_exitseen",
    "H6_collected",
    "H7_ended",
    "H8_result",
    "H9_return",
]


def zygote_cpu_s(workers: list | None = None) -> tuple[float, float]:
    """CPU seconds of the pool's zygotes so far (of ``workers``, default: the running pool's):
    their own, and their reaped children's (every run's init and program process)."""
    own = children = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    if workers is None:
        assert pool._pool is not None
        workers = pool._pool.workers
    for worker in workers:
        pid = worker.proc.pid  # bubblewrap -> its init -> the zygote
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            inits = f.read().split()
        for init in inits:
            with open(f"/proc/{init}/task/{init}/children") as f:
                zygotes = f.read().split()
            for zygote in zygotes:
                with open(f"/proc/{zygote}/stat", "rb") as f:
                    fields = [int(x) for x in f.read().rsplit(b")", 1)[1].split()[11:15]]
                own += (fields[0] + fields[1]) / tick
                children += (fields[2] + fields[3]) / tick
    return own, children


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    os.environ[pool.ENV_VAR] = str(args.workers)

    zygote = _patched(pool.zygote_source(), ZYGOTE)
    launcher = _patched(modes.launcher_source(), LAUNCHER)
    pool.zygote_source = lambda: zygote  # type: ignore[assignment]
    modes.launcher_source = lambda: launcher

    now: dict[str, int] = {}
    worker_lines: list[tuple[str, int]] = []
    main_thread = threading.get_ident()

    class _Stamps(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            for tag, value in re.findall(r"@(\w+) (\d+)", record.getMessage()):
                worker_lines.append((tag, int(value)))

    log = logging.getLogger("mas_envs.sandbox")
    log.addHandler(_Stamps())
    log.propagate = False

    def wrap(obj, name: str, before: str | None, after: str | None) -> None:
        fn = getattr(obj, name)

        def timed(*a, **k):
            if threading.get_ident() != main_thread:  # the manager's calls are not the run's
                return fn(*a, **k)
            if before:
                now[before] = time.monotonic_ns()
            result = fn(*a, **k)
            if after:
                now[after] = time.monotonic_ns()
            return result

        setattr(obj, name, timed)

    wrap(pool._Pool, "_take", "H0_take", "H1_taken")
    wrap(uids.ALLOCATOR, "acquire", None, "H2_uid")
    wrap(socket, "send_fds", "H3_send", "H4_sent")
    wrap(runner, "_collect", None, "H6_collected")
    wrap(pool._Child, "end", None, "H7_ended")
    wrap(runner, "_result", None, "H8_result")
    poll = pool._ChildProc.poll

    def timed_poll(self):
        entered = time.monotonic_ns()
        code = poll(self)
        if code is not None and "H5_exitseen" not in now:
            now["H5a_pollentry"], now["H5_exitseen"] = entered, time.monotonic_ns()
        return code

    pool._ChildProc.poll = timed_poll  # type: ignore[method-assign]

    run_python(CODE)  # start the pool
    time.sleep(0.5)
    phases: dict[str, list[float]] = collections.defaultdict(list)
    totals = []
    load0 = os.getloadavg()[0]
    zygote0, inits0 = zygote_cpu_s()
    host0 = os.times()
    for _ in range(args.runs):
        now.clear()
        worker_lines.clear()
        t0 = time.monotonic_ns()
        res = run_python(CODE)
        now["H9_return"] = time.monotonic_ns()
        assert res.verdict == "ok" and res.stdout == "499500\n", res
        for tag, value in re.findall(r"@(\w+) (\d+)", res.stderr):
            now[tag] = int(value)
        time.sleep(args.gap_ms / 1e3)
        now.update((t, v) for t, v in worker_lines if t0 <= v <= now["H9_return"])
        last = t0
        for tag, value in sorted(now.items(), key=lambda kv: kv[1]):
            phases[tag].append((value - last) / 1e6)
            last = value
        totals.append((now["H9_return"] - t0) / 1e6)
    host1 = os.times()
    time.sleep(0.5)  # the last runs' inits are reaped
    zygote1, inits1 = zygote_cpu_s()
    host_ms = (host1.user + host1.system - host0.user - host0.system) * 1e3 / args.runs
    zygote_ms = (zygote1 - zygote0) * 1e3 / args.runs
    inits_ms = (inits1 - inits0) * 1e3 / args.runs
    q = statistics.quantiles(totals, n=4)
    print(
        f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f}; {args.runs} runs, "
        f"{args.gap_ms:g} ms apart; pool of {args.workers}"
    )
    print(
        f"run_python total: median {statistics.median(totals):.2f} ms "
        f"(p25 {q[0]:.2f}, p75 {q[2]:.2f})"
    )
    print(
        f"CPU per run: {zygote_ms + inits_ms + host_ms:.2f} ms = zygotes {zygote_ms:.2f} + "
        f"the runs' inits and program processes {inits_ms:.2f} + this process {host_ms:.2f} "
        "(the next runs' preparation included; the stamps add a little)"
    )
    print("phase (time since the previous stamp)       median ms    p25    p75   runs")
    for tag in ORDER:
        if len(phases.get(tag, ())) >= 2:
            v = phases[tag]
            qs = statistics.quantiles(v, n=4)
            print(f"  {tag:<40}{statistics.median(v):>9.3f}{qs[0]:>7.3f}{qs[2]:>7.3f}{len(v):>7}")


if __name__ == "__main__":
    main()
