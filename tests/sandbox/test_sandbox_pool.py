"""The warm sandbox pool: same results as cold runs, nothing carried from one run to the next.

``tests/sandbox/test_sandbox.py`` runs every normal and hostile program of the sandbox both through
the pool and cold. This file checks what is particular to the pool: honest programs give the same
results both ways (many of them), a run cannot leave anything for the next run of the same
worker (files, processes, modules, environment, signal handlers, network state, ...), the
zygote's memory never holds a program or its data, a worker that dies is replaced, and the pool
goes away with its process (shut down, forked, or killed with SIGKILL).

Every hostile program is bounded (sleeps and loops end by themselves within a minute).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import types
import uuid

import pytest
from test_sandbox import _marker, _survivors

from mas_envs.sandbox import (
    ExecResult,
    Job,
    Verdict,
    cgroup,
    isolation,
    modes,
    pool,
    run_many,
    run_python,
    runner,
)

pytestmark = pytest.mark.filterwarnings("ignore:mas_envs.sandbox:RuntimeWarning")


def _pool_works_here() -> bool:
    return pool.supports(runner.current_mode())


needs_pool = pytest.mark.skipif(
    not _pool_works_here(),
    reason=f"the warm pool needs root, bubblewrap and cgroups ({isolation()})",
)


@pytest.fixture
def one_worker(monkeypatch):
    """A pool of one worker: consecutive runs are forks of the same zygote."""
    monkeypatch.setenv(pool.ENV_VAR, "1")
    run_python("pass")
    assert pool.active() and len(pool._pool.workers) == 1
    yield pool._pool
    assert pool._off is None


def _cold(job: Job):
    return runner.run_cold(runner.current_mode(), job)


def _comparable(res) -> tuple:
    """A result without what differs between any two runs: addresses, how much output a
    program killed at the output limit had written by the time it was killed."""
    texts = []
    for text in (res.stdout, res.stderr):
        text = re.sub(r"0x[0-9a-f]+", "0x?", text)
        texts.append(re.sub(r"cut: \d+ of \d+ bytes not kept", "cut: ? of ? bytes not kept", text))
    return (res.verdict, res.exit_code, *texts)


# ---------------------------------------------------------------- same results as cold runs

PARITY = [
    "print('hello')",
    ("import sys\nfor line in sys.stdin: print(line.strip()[::-1])", "abc\ndef\n"),
    ("print(input().upper(), '✓ 日本')", "héllo\n"),
    "import sys; sys.exit(0)",
    "import sys; sys.exit(3)",
    "import sys; sys.exit('bye')",
    "import sys; sys.exit(None)",
    "import sys; sys.exit(256 + 7)",
    "import sys; sys.exit(-1)",
    "import sys; sys.exit(True)",
    "raise SystemExit(2**40 + 5)",
    "raise SystemExit(2**70)",
    "raise SystemExit([1, 2])",
    "import os; os._exit(7)",
    "x = 1\n1 / 0",
    "def f(:\n  pass",
    "import os; os.kill(os.getpid(), 11)",
    "import os, signal; os.kill(os.getpid(), signal.SIGTERM)",
    "raise KeyboardInterrupt",
    "import no_such_module",
    "help",
    "exit()",
    "def f(n):\n    try:\n        return f(n + 1)\n    except RecursionError:\n        return n\n"
    "print(f(0))",  # the depth a recursion reaches
    "import sys\nprint(sorted(sys.modules))",
    "import sys\nprint(sorted(sys.path_importer_cache))",
    "import sys\nprint(sys.path, sys.argv, sys.flags, sys.getrecursionlimit(), __name__, __file__)",
    "import sys\nprint(sys.getswitchinterval(), sys.getdefaultencoding(), sys.stdout.encoding,"
    " sys.stdin.encoding, sys.stdout.errors, sys.stdin.errors, sys.stdout.line_buffering)",
    ("import sys\nprint(sys.stdin.seekable(), sys.stdin.isatty(), sys.stdout.isatty())", "x"),
    ("import sys\nprint(sys.stdin.read(3)); sys.stdin.seek(0); print(sys.stdin.read())", "abcdef"),
    ("x = input()\ny = input()", "only one line\n"),
    "import os\nprint(sorted(os.environ.items()))",
    "import os\nprint(os.getcwd(), os.listdir('.'), os.listdir('/tmp'), os.listdir('/dev/shm'))",
    "import os\nprint(os.listdir('/code'), open('/code/main.py').read())",
    "import os\nprint(sorted(os.listdir('/proc/self/fd')))",
    "import os\nprint(os.getpid(), os.getppid(), os.getsid(0), os.getpgrp(), oct(os.umask(0o22)))",
    "import os\nprint(os.getuid() == os.geteuid() >= 2 * 10**9, os.getgid() == os.getuid(),"
    " os.getgroups())",
    "import resource\nprint([(n, resource.getrlimit(getattr(resource, n)))"
    " for n in sorted(dir(resource)) if n.startswith('RLIMIT_')])",
    "import signal\nprint([(s.name, str(signal.getsignal(s)))"
    " for s in sorted(signal.valid_signals())"
    " if s not in (signal.SIGKILL, signal.SIGSTOP)])",
    "import signal\nprint(signal.pthread_sigmask(signal.SIG_BLOCK, []))",
    "import gc\nprint(gc.isenabled(), gc.get_threshold())",
    "import random\nrandom.seed(5)\nprint(random.random(), random.randrange(10**9))",
    "print(list({'apple', 'pear', 'fig', 'kiwi', 'plum'}), hash('abc'))",
    "import os\nprint(os.uname().nodename)",
    "print(open('/proc/self/status').read().split('Seccomp:')[1].split()[0],"
    " open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0])",
    "print([line.split(':')[0].strip() for line in open('/proc/net/dev').read().splitlines()[2:]])",
    "import socket\ntry:\n    s = socket.socket()\nexcept OSError as e:\n"
    "    print('no socket:', e)\nelse:\n    s.bind(('127.0.0.1', 0))\n    s.listen()\n"
    "    c = socket.create_connection(s.getsockname())\n    print('loopback ok')",
    "import time\nprint(time.tzname, time.timezone)",
    "import json, re, collections, math\n"
    "print(json.dumps({'a': [1, 2]}), re.findall('a+', 'caaab'),"
    " collections.Counter('abca').most_common(1), math.comb(10, 3))",
    "import threading\nout = []\n"
    "ts = [threading.Thread(target=out.append, args=(i,)) for i in range(4)]"
    "\nfor t in ts: t.start()\nfor t in ts: t.join()\nprint(sorted(out))",
    "import threading, time\ndef late():\n    time.sleep(0.2)\n    print('thread done')\n"
    "threading.Thread(target=late).start()\nprint('main done')",
    "import atexit\natexit.register(print, 'bye from atexit')\nprint('hi')",
    "import atexit\ndef bad():\n    raise ValueError('boom')\natexit.register(bad)\nprint('x')",
    # The pool runs the interpreter's callbacks at exit, whichever atexit module registered them
    "import atexit, sys\natexit.register(print, 'still runs')\ndel sys.modules['atexit']\n"
    "import atexit as again\nagain.register(print, 'second module')\nprint(atexit is again)",
    "import atexit\natexit.register(print, 'cleared')\natexit._clear()\nprint('none at exit')",
    "class A:\n    def __del__(self):\n        print('del A')\na = A()\nprint('end')",
    "out = open(1, 'w')\nout.write('written, never flushed by the program\\n')",
    "import sys\nsys.stdout.write('no newline')",
    "import sys\nprint('to err', file=sys.stderr)\nprint('to out')",
    "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(0.2)\nos._exit(3)",
    "import sys\nsys.stdout.close()",
    "import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', 'print(6 * 7)'],"
    " capture_output=True, text=True).stdout)",
    "import multiprocessing\nif __name__ == '__main__':\n    with multiprocessing.Pool(2) as p:\n"
    "        print(p.map(abs, [-1, -2, -3]))",
    (
        "import helper\nprint(helper.VALUE, open('data/in.txt').read())",
        "",
        {"helper.py": "VALUE = 41\n", "data/in.txt": "ünï"},
    ),
    ("import json\nprint(json.VALUE)", "", {"json.py": "VALUE = 'shadowed'\n"}),
    ("while True:\n    pass", "", None, 1.0),
    ("x = bytearray(600 << 20)", "", None, 5.0, 128),
    (  # the cgroup's OOM killer stops children of the program: memory_limit
        "import os\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
        "        chunks = [bytearray(8 << 20) for _ in range(24)]\n        os._exit(0)\n"
        "    kids.append(pid)\nraise SystemExit(any(os.waitpid(p, 0)[1] for p in kids))",
        "",
        None,
        20.0,
        256,
    ),
    ("import sys\nsys.stdout.write('x' * (9 << 20))", "", None, 10.0),
    (
        "import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return list(map(f, [n]))\nf(0)",
        "",
        None,
        20.0,
    ),
]


def _job(case: str | tuple) -> Job:
    """A corpus entry: the code, or (code, stdin, files, timeout_s, memory_mb) cut short."""
    parts = (case,) if isinstance(case, str) else case
    code, stdin, files, timeout_s, memory_mb = (*parts, *("", "", None, 5.0, 512)[len(parts) :])
    return Job(code=code, stdin=stdin, files=files, timeout_s=timeout_s, memory_mb=memory_mb)


@needs_pool
def test_honest_programs_give_the_same_results_as_cold_runs(monkeypatch):
    monkeypatch.setenv(pool.ENV_VAR, "2")
    jobs = [_job(case) for case in PARITY]
    pooled = run_many(jobs, max_workers=2)
    assert pool.active()
    cold = [_cold(job) for job in jobs]
    for job, p, c in zip(jobs, pooled, cold, strict=True):
        assert _comparable(p) == _comparable(c), job.code
    # They are not trivially alike: the corpus covers every verdict.
    assert {r.verdict for r in cold} == set(Verdict) - {Verdict.sandbox_error}


@needs_pool
def test_results_match_over_many_generated_programs(monkeypatch):
    monkeypatch.setenv(pool.ENV_VAR, "2")
    jobs = []
    for i in range(120):
        ops = ["+", "-", "*", "//", "%", "**"]
        expr = f"{i} {ops[i % 6]} {i % 7 + (i % 6 in (3, 4))}"
        body = f"x = {expr}\nprint(x, {i!r} * 'ab', sep='|')"
        if i % 5 == 0:
            body += f"\nimport sys\nsys.exit({i % 4})"
        if i % 7 == 0:
            body += "\nraise ValueError(x)"
        jobs.append(Job(code=body, stdin=f"{i}\n" * (i % 3)))
    pooled = run_many(jobs, max_workers=3)
    cold = [_cold(job) for job in jobs]
    assert [_comparable(r) for r in pooled] == [_comparable(r) for r in cold]
    assert sum(r.verdict == Verdict.ok for r in cold) > 50


# ---------------------------------------------------------------- nothing carried between runs

LEAVE_BEHIND = """
import builtins, os, random, signal, socket, subprocess, sys
for d in ("/sandbox", "/tmp", "/dev/shm"):
    with open(os.path.join(d, "left.txt"), "w") as f:
        f.write(MARK)
os.makedirs("/sandbox/deep/er", exist_ok=True)
# A daemon that leaves the process group and waits to be found by the next run (bounded).
subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(30)", MARK],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
os.environ["LEFT"] = MARK
os.putenv("LEFT2", MARK)
builtins.print = lambda *a, **k: None
builtins.LEFT = MARK
sys.modules["left_module"] = type(sys)("left_module")
import json; json.dumps = None
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGUSR1, lambda *a: None)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
random.seed(1234)
os.umask(0o077)
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
keep = [open("/dev/null") for _ in range(20)]
for n in range(40):  # the pid counter
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
# Network state: packet counters, a TIME_WAIT socket, an abstract Unix socket. With the seccomp
# filter no socket can be made at all (and the runs share their worker's network namespace).
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
except PermissionError:
    for family in (socket.AF_INET6, socket.AF_UNIX):
        try:
            socket.socket(family)
        except PermissionError:
            continue
        raise SystemExit(f"socket({family!r}) was allowed")
else:
    for _ in range(37):
        u.sendto(b"x", ("127.0.0.1", 9))
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
    c = socket.create_connection(srv.getsockname()); a, _ = srv.accept(); c.close(); a.close()
    abstract = socket.socket(socket.AF_UNIX); abstract.bind("\\0" + MARK); abstract.listen()
# A socketpair bound to an abstract name, sent over itself so that it outlives the run (until the
# kernel's garbage collector finds the cycle): its name and a parked message were in the worker's
# network namespace for the next run to read.
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
a.bind("\\0park-" + MARK)
b.send(MARK.encode())
socket.send_fds(b, [b"x"], [a.fileno(), b.fileno()])
# System V shared memory outlives its creator (refused by seccomp; without it, a fresh ipc
# namespace per run).
import ctypes
libc = ctypes.CDLL(None)
libc.shmget(0x5EC1, 4096, 0o1666)  # IPC_CREAT | 0666
libc.semget(0x5EC1, 1, 0o1666)
libc.msgget(0x5EC1, 0o1666)
sys.stdout.write("left\\n")
"""

LOOK = """
import builtins, json, os, random, resource, signal, sys
seen = {
    "files": [sorted(os.listdir(d)) for d in ("/sandbox", "/tmp", "/dev/shm")],
    "env": sorted(k for k in os.environ if k.startswith("LEFT")),
    "builtins": hasattr(builtins, "LEFT") or builtins.print.__name__ != "print",
    "modules": "left_module" in sys.modules or json.dumps({}) != "{}",
    "signals": [str(signal.getsignal(s)) for s in (signal.SIGTERM, signal.SIGUSR1)],
    "mask": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "umask": os.umask(0o22),
    "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
    "fds": sorted(os.listdir("/proc/self/fd")),
    "pid": os.getpid(),
    "procs": sorted(p for p in os.listdir("/proc") if p.isdigit()),
    "udp": open("/proc/net/snmp").read().split("Udp:")[2].split()[:4],
    "tcp": len(open("/proc/net/tcp").read().splitlines()),
    "unix": [l for l in open("/proc/net/unix").read().splitlines() if "@" in l],
    "random": random.random() != random.Random(1234).random(),
    "sysv": __import__("ctypes").CDLL(None).shmget(0x5EC1, 0, 0),
    # every System V object of this ipc namespace (a header line each when there is none)
    "sysv_all": [len(open(f"/proc/sysvipc/{k}").readlines()) for k in ("shm", "sem", "msg")],
}
print(json.dumps(seen, sort_keys=True))
"""


@needs_pool
def test_a_run_leaves_nothing_for_the_next_run_of_the_same_worker(one_worker):
    zygotes = _zygote_pids(one_worker)
    baseline = run_python(LOOK)
    assert baseline.verdict == Verdict.ok, baseline.stderr
    mark = _marker()
    for _ in range(3):  # every run the worker keeps ready has had an earlier run before it
        res = run_python(f"MARK = {mark!r}\n{LEAVE_BEHIND}", timeout_s=20)
        assert (res.verdict, res.stdout) == (Verdict.ok, "left\n"), res.stderr
        assert _survivors(mark) == []  # run_python returns when none of its processes is left
        after = run_python(LOOK)
        assert after.verdict == Verdict.ok, after.stderr
        assert json.loads(after.stdout) == json.loads(baseline.stdout)
        assert mark not in after.stdout + after.stderr
    seen = json.loads(baseline.stdout)
    assert seen["files"] == [[], [], []] and seen["pid"] == 2 and seen["procs"] == ["1", "2"]
    assert seen["udp"][0] == "0" and seen["tcp"] == 1  # no network state left by anyone
    assert seen["unix"] == []
    assert seen["sysv"] == -1 and seen["sysv_all"] == [1, 1, 1]  # no System V object at all
    assert _zygote_pids(one_worker) == zygotes  # the same worker served every run
    # And a cold run sees the same (its own fresh sandbox).
    assert json.loads(_cold(Job(LOOK)).stdout) == seen


CONCURRENT_LISTENER = """
import ctypes, os, socket
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
ctypes.CDLL(None).connect(a.fileno(), b"\\0\\0", 2)  # AF_UNSPEC: no peer, anyone may send
a.bind("\\0conc-" + MARK)
a.settimeout(4)
try:
    msg, fds, _, _ = socket.recv_fds(a, 100, 4)
    print("got", msg, [os.read(fd, 100) for fd in fds])
except OSError:
    print("nothing")
"""

# It connects its own socketpair's socket to the listener's abstract name (a datagram socket may
# change its peer) and passes a descriptor of a file in its private /tmp.
CONCURRENT_TALKER = """
import os, socket, time
with open("/tmp/mine", "w") as f:
    f.write(MARK)
fd = os.open("/tmp/mine", os.O_RDONLY)
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
seen, sent = [], False
end = time.monotonic() + 3
while time.monotonic() < end and not sent:
    seen = [l.split()[-1] for l in open("/proc/net/unix").read().splitlines()[1:] if "@" in l]
    try:
        a.connect("\\0conc-" + MARK)
        socket.send_fds(a, [MARK.encode()], [fd])
        sent = True
    except OSError:
        time.sleep(0.05)
print("sent" if sent else "not sent", seen)
"""


@needs_pool
def test_concurrent_pooled_runs_cannot_talk_through_abstract_unix_names(monkeypatch):
    monkeypatch.setenv(pool.ENV_VAR, "2")
    mark = _marker()
    jobs = [
        Job(f"MARK = {mark!r}\n{CONCURRENT_LISTENER}", timeout_s=10),
        Job(f"MARK = {mark!r}\n{CONCURRENT_TALKER}", timeout_s=10),
    ]
    listener, talker = run_many(jobs, max_workers=2)
    assert pool.active()
    assert listener.verdict == Verdict.ok, listener.stderr
    assert talker.verdict == Verdict.ok, talker.stderr
    assert (listener.stdout, talker.stdout) == ("nothing\n", "not sent []\n")


def _zygote_pids(p) -> list[int]:
    """The pool's zygotes: the interpreters that bubblewrap started (the runs' inits are theirs)."""
    out = []
    for worker in p.workers:
        for pid in worker.group.pids():
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{ppid}/comm") as f:
                    if stat.split("(", 1)[1].startswith("python") and f.read().strip() == "bwrap":
                        out.append(pid)
    return out


def _memory_holds(pid: int, needle: bytes) -> bool:
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if not perms.startswith("r"):
                continue
            start, end = (int(x, 16) for x in addr.split("-"))
            try:
                mem.seek(start)
                if needle in mem.read(end - start):
                    return True
            except (OSError, OverflowError, ValueError):
                continue
    return False


@needs_pool
def test_the_zygote_and_the_next_runs_never_hold_a_program_or_its_data(one_worker):
    secret = uuid.uuid4().hex
    code = f"import sys\nSECRET = {secret!r}\nprint(SECRET[::-1], sys.stdin.read()[::-1])"
    res = run_python(code, stdin=f"in-{secret}", files={"f.txt": f"file-{secret}"})
    assert res.stdout.startswith(secret[::-1])
    res = run_python("print(1)")  # the next run: forked after the first
    assert res.stdout == "1\n"
    needles = [secret.encode(), secret[::-1].encode()]
    holders = _zygote_pids(one_worker)
    deadline = time.monotonic() + 20
    while len(one_worker.ready) < pool.READY_PER_WORKER and time.monotonic() < deadline:
        time.sleep(0.01)
    with one_worker.cond:
        for child in one_worker.ready:  # runs made ready since, waiting for a job
            holders.append(child.init_pid)
            with open(f"/proc/{child.init_pid}/task/{child.init_pid}/children") as f:
                holders += [int(p) for p in f.read().split()]
    assert len(holders) >= 3
    for pid in holders:
        for needle in needles:
            assert not _memory_holds(pid, needle), f"process {pid} holds a run's data"
    # The scan can find a string that is there.
    assert _memory_holds(os.getpid(), needles[0])


@needs_pool
def test_a_program_cannot_reach_its_worker(one_worker):
    before = _zygote_pids(one_worker)
    code = """
import os, signal
for target in (1, -1, os.getppid(), 0):
    try:
        os.kill(target, signal.SIGKILL if target != 0 else 0)
        print("signalled", target)
    except OSError as e:
        print("refused", target, type(e).__name__)
print(sorted(p for p in os.listdir("/proc") if p.isdigit()))
"""
    res = run_python(code)
    assert res.verdict == Verdict.ok, res.stderr
    assert "signalled 1" not in res.stdout and "signalled -1" not in res.stdout
    assert res.stdout.splitlines()[-1] == "['1', '2']"  # its init and itself: nothing else
    assert run_python("print(2)").stdout == "2\n"
    assert _zygote_pids(one_worker) == before


# ---------------------------------------------------------------- failures of the pool itself


@needs_pool
def test_a_worker_that_dies_is_replaced(one_worker):
    (zygote,) = _zygote_pids(one_worker)
    os.kill(zygote, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while _zygote_pids(one_worker) in ([], [zygote]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run_python("print(3)").stdout == "3\n"
    (replacement,) = _zygote_pids(one_worker)
    assert replacement != zygote
    # The manager handled the dead worker's control socket and pipes, in whatever order their
    # events came (a pipe closed by an earlier event of the same batch once killed the manager).
    time.sleep(0.2)
    assert one_worker.thread.is_alive() and one_worker.broken is None


@needs_pool
def test_a_run_whose_worker_dies_ends_and_the_pool_goes_on(one_worker):
    result = {}
    mark = _marker()
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(30)', {mark!r}])\n"
        "print('started', flush=True)\ntime.sleep(30)"
    )
    thread = threading.Thread(target=lambda: result.update(res=run_python(code, timeout_s=40)))
    thread.start()
    deadline = time.monotonic() + 20
    while not _survivors(mark) and time.monotonic() < deadline:
        time.sleep(0.02)
    (zygote,) = _zygote_pids(one_worker)
    os.kill(zygote, signal.SIGKILL)
    thread.join(30)
    res = result["res"]
    assert res.verdict == Verdict.runtime_error and res.exit_code == -signal.SIGKILL, res
    assert res.stdout == "started\n"
    assert _survivors(mark) == []
    assert run_python("print(4)").stdout == "4\n"


def test_stopping_a_run_kills_its_program_at_once_not_only_its_init():
    """A timeout or the output limit SIGKILLs the program's own process, as a cold run's group
    kill does: the init's exit kills the rest of its namespace later, and on a loaded machine a
    program still writing its output got to finish (exit 0 instead of -9 at the output limit)."""
    procs = [subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)"])]
    procs.append(subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)"]))
    init, program = procs
    child = pool._Child(None, b"", None, None, 0.0)  # type: ignore[arg-type]
    child.pidfd, child.prog_pidfd = os.pidfd_open(init.pid), os.pidfd_open(program.pid)
    try:
        child.kill()
        assert program.wait(10) == -signal.SIGKILL and init.wait(10) == -signal.SIGKILL
        assert child.killed
    finally:
        for fd in (child.pidfd, child.prog_pidfd):
            os.close(fd)
        for proc in procs:
            proc.kill()
            proc.wait()


@needs_pool
def test_a_pool_that_cannot_start_warns_and_runs_go_cold(monkeypatch):
    pool.shutdown()
    monkeypatch.setattr(pool, "_off", None)
    monkeypatch.setenv(pool.ENV_VAR, "2")
    monkeypatch.setattr(pool, "_worker_command", lambda *a: ["/bin/false"])
    with pytest.warns(RuntimeWarning, match="warm sandbox pool is off"):
        res = run_python("print(5)")
    assert res.stdout == "5\n" and not pool.active()
    assert run_python("print(6)").stdout == "6\n"  # cold, without another warning
    monkeypatch.setattr(pool, "_off", None)


def test_the_entry_point_asks_the_pool_first_and_runs_cold_when_it_cannot_serve(monkeypatch):
    """``entry.run_one`` is the one place that chooses: the pool while it is wanted, else cold;
    a pool that gives up on a job (``None``) sends it cold too."""
    warm = ExecResult(Verdict.ok, 0, "warm\n", "", 0.0)
    asked = []
    monkeypatch.setattr(pool, "wanted", lambda mode: True)
    monkeypatch.setattr(pool, "run", lambda mode, job: asked.append(job.code) or warm)
    assert run_python("print(1)") is warm and asked == ["print(1)"]
    monkeypatch.setattr(pool, "run", lambda mode, job: asked.append(job.code))
    assert run_python("print(2)").stdout == "2\n" and asked[-1] == "print(2)"
    monkeypatch.setattr(pool, "wanted", lambda mode: False)
    monkeypatch.setattr(pool, "run", lambda mode, job: pytest.fail("the pool asked when unwanted"))
    assert [r.stdout for r in run_many([Job(code="print(3)"), Job(code="print(4)")])] == [
        "3\n",
        "4\n",
    ]


def test_the_switch(monkeypatch):
    monkeypatch.setenv(pool.ENV_VAR, "off")
    assert pool.size() == 0 and not pool.wanted(runner.current_mode())
    monkeypatch.setattr(pool, "_get", lambda *a: pytest.fail("a pool with MAS_SANDBOX_POOL=off"))
    assert run_python("print(7)").stdout == "7\n"
    monkeypatch.setenv(pool.ENV_VAR, "3")
    assert pool.size() == 3
    monkeypatch.setenv(pool.ENV_VAR, "auto")  # sized to the CPUs this process may use
    assert pool.size() == max(2, min(len(os.sched_getaffinity(0)), pool.MAX_AUTO_SIZE))
    monkeypatch.setenv(pool.ENV_VAR, "many")
    with pytest.raises(ValueError, match="MAS_SANDBOX_POOL='many' is not 'auto', 'off'"):
        run_python("pass")


class _FakeRay:
    """What pool.ray_cpus reads of ``ray`` in a worker process that claimed ``cpus``."""

    WORKER_MODE, SCRIPT_MODE = 1, 0

    def __init__(self, cpus: float | None, mode: int = 1) -> None:
        self.resources = {} if cpus is None else {"CPU": cpus, "memory": 1e9}
        self.worker = types.SimpleNamespace(mode=mode)

    def is_initialized(self) -> bool:
        return True

    def get_runtime_context(self):
        return types.SimpleNamespace(
            worker=self.worker, get_assigned_resources=lambda: dict(self.resources)
        )


def test_auto_size_in_a_ray_worker_follows_its_cpu_claim(monkeypatch):
    """A Ray actor on a big node gets a pool of its own CPU claim (rounded up, 2 to 16), not
    one worker per CPU of the node; MAS_SANDBOX_POOL still overrides; a driver is not a worker."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    monkeypatch.setenv(pool.ENV_VAR, "auto")
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    assert pool.ray_cpus() is None and pool.size() == pool.MAX_AUTO_SIZE  # no Ray: the node
    for claim, want in ((4.0, 4), (2.5, 3), (0.25, 2), (None, 2), (64.0, pool.MAX_AUTO_SIZE)):
        monkeypatch.setitem(sys.modules, "ray", _FakeRay(claim))
        assert pool.ray_cpus() == (claim or 0.0) and pool.size() == want, claim
    monkeypatch.setenv(pool.ENV_VAR, "5")
    assert pool.size() == 5
    monkeypatch.setenv(pool.ENV_VAR, "auto")
    monkeypatch.setitem(sys.modules, "ray", _FakeRay(4.0, mode=_FakeRay.SCRIPT_MODE))
    assert pool.ray_cpus() is None and pool.size() == pool.MAX_AUTO_SIZE  # the driver
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.setitem(sys.modules, "ray", _FakeRay(8.0))
    assert pool.size() == 3  # never more than the CPUs this process may use


LAZY = """
import os, sys
import mas_envs
from mas_envs.sandbox import pool, run_python
env = mas_envs.make("mas/Math-v0")
env.reset(seed=0)
env.clone().step("no program here")
def kids():  # of every thread (the pool's manager thread starts the workers)
    tasks = f"/proc/{os.getpid()}/task"
    return [p for t in os.listdir(tasks) for p in open(f"{tasks}/{t}/children").read().split()]
before = (pool.active(), kids())
assert run_python("print(1)").stdout == "1\\n"
print(before, pool.active(), len(kids()) >= pool.size() >= 2)
"""


@needs_pool
def test_the_pool_starts_with_the_first_program_not_before():
    env = {**os.environ, pool.ENV_VAR: "auto"}
    out = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["(False,", "[])", "True", "True"]


# ---------------------------------------------------------------- the pool goes with its process


def _pool_cgroups(owner: int) -> list[str]:
    found = []
    for controller in cgroup.CONTROLLERS:
        try:
            parent = cgroup.parent_dir(controller)
        except OSError:
            continue
        found += [n for n in os.listdir(parent) if n.startswith(f"{cgroup.PREFIX}{owner}-")]
    return found


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started, while it lives (``None`` once it is gone or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


@needs_pool
def test_shutdown_leaves_no_process_and_no_cgroup(monkeypatch):
    monkeypatch.setenv(pool.ENV_VAR, "2")
    run_python("pass")
    p = pool._pool
    procs = [(pid, _start_time(pid)) for w in p.workers for pid in w.group.pids()]
    procs += [(c.init_pid, _start_time(c.init_pid)) for c in p.ready]
    assert len(procs) >= 6
    pool.shutdown()
    assert [pid for pid, t in procs if _start_time(pid) == t] == []
    assert [n for n in _pool_cgroups(os.getpid()) if "-pool" in n] == []
    assert run_python("print(8)").stdout == "8\n"  # and it starts again on demand


OWNER = """
import json, os, threading, time
from mas_envs.sandbox import pool, run_python
assert run_python("print(1)").stdout == "1\\n"
p = pool._pool
procs = [pid for w in p.workers for pid in w.group.pids()] + [c.init_pid for c in p.ready]
# A program that runs a marked process when its owner is killed (the mark: not in our argv).
code = (
    "import subprocess, sys, time\\n"
    f"mark = {os.environ['MAS_TEST_MARK']!r}\\n"
    "subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(30)', mark])\\n"
    "time.sleep(30)"
)
threading.Thread(target=run_python, args=(code,), kwargs={"timeout_s": 40}, daemon=True).start()
print(json.dumps(procs), flush=True)
time.sleep(60)
"""


@needs_pool
def test_a_killed_process_leaves_no_process_and_no_cgroup():
    mark = _marker()
    env = {**os.environ, pool.ENV_VAR: "2", "MAS_TEST_MARK": mark}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        procs = json.loads(owner.stdout.readline())
        deadline = time.monotonic() + 20
        while not _survivors(mark) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _survivors(mark), "the owner's program did not start"
        started = [(pid, _start_time(pid)) for pid in procs]
        assert _pool_cgroups(owner.pid)
        owner.kill()
        owner.wait()
        # The watchdog cleans up within a second (a later process would sweep the empty cgroups
        # only when it starts its own sandbox).
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (
            _pool_cgroups(owner.pid)
            or _survivors(mark)
            or any(_start_time(pid) == t for pid, t in started)
        ):
            time.sleep(0.1)
        assert _survivors(mark) == []
        assert [pid for pid, t in started if _start_time(pid) == t] == []
        assert _pool_cgroups(owner.pid) == []
    finally:
        owner.kill()
        owner.wait()


@needs_pool
def test_a_forked_process_gets_its_own_pool(monkeypatch):
    monkeypatch.setenv(pool.ENV_VAR, "2")
    run_python("pass")
    parent_pool = pool._pool
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            ok = run_python("print(9)").stdout == "9\n" and pool._pool is not parent_pool
            code = 0 if ok else 1
            pool.shutdown()
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert pool._pool is parent_pool and run_python("print(10)").stdout == "10\n"
    deadline = time.monotonic() + 10
    while _pool_cgroups(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _pool_cgroups(child) == []


def test_worker_command_is_a_cold_runs_without_its_filter():
    mode = modes.Mode(
        bwrap="/usr/bin/bwrap", drop_uid=True, userns=False, cgroup=True, seccomp=True
    )
    cmd = pool._worker_command(mode, 7, (8, 9))
    cut = cmd.index("--")
    cold = modes.bwrap_command(mode, runner.TMPFS_BYTES, 7, (8, 9), 10)
    assert "--seccomp" not in cmd and "--seccomp" in cold
    assert cmd[cut + 1 : cut + 6] == [modes.interpreter(), *modes.PYTHON_FLAGS, "-c"]
    caps = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--cap-add"]
    assert caps == ["CAP_SETUID", "CAP_SETGID", "CAP_SYS_ADMIN"]  # no socket: no network to admin
    assert cmd[cut + 6] == pool.zygote_source()
    # Without the filter every run brings up a loopback of its own in its own network namespace.
    plain = pool._worker_command(dataclasses.replace(mode, seccomp=False), 7, (8, 9))
    assert [plain[i + 1] for i, arg in enumerate(plain) if arg == "--cap-add"] == [
        *caps,
        "CAP_NET_ADMIN",
    ]
