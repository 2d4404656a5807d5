"""The sandbox that runs model-written code: normal programs, hostile programs, the fallback.

Every hostile program here is BOUNDED, so that a broken sandbox cannot take the machine down:
the fork bomb stops by itself at 300 processes that exit within seconds, the memory bomb at
2 GiB, the output flood at 4 GiB, loops after 10-30 s. The tests assert that the sandbox stopped
them far earlier. After every test, no process of a run may survive (found by a marker in the
command line) and no run cgroup of this process may remain.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import time
import uuid
from pathlib import Path

import pytest

from mas_envs.sandbox import (
    MAX_PROCESSES,
    STDOUT_LIMIT,
    ExecResult,
    Job,
    Verdict,
    cgroup,
    isolation,
    modes,
    run_many,
    run_python,
    runner,
    seccomp,
    uids,
)

pytestmark = pytest.mark.filterwarnings("ignore:mas_envs.sandbox:RuntimeWarning")

HAS_BWRAP = modes.find_bwrap() is not None
ROOT = os.geteuid() == 0


def _marker() -> str:
    return f"mas-sandbox-test-{uuid.uuid4().hex}"


def _survivors(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker`` (zombies have none)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _own_cgroups() -> list[str]:
    """This process's run cgroups (the warm pool's own, long-lived ones are not runs')."""
    left = []
    for controller in cgroup.CONTROLLERS:
        try:
            parent = cgroup.parent_dir(controller)
            names = os.listdir(parent)
        except OSError:
            continue
        own = f"{cgroup.PREFIX}{os.getpid()}-"
        left += [os.path.join(parent, n) for n in names if n.startswith(own) and "-pool" not in n]
    return left


@pytest.fixture(autouse=True)
def _leaves_nothing_behind(sandbox_runs):  # every test twice: through the warm pool, and cold
    yield
    assert _own_cgroups() == [], "a run's cgroup was not removed"


@pytest.fixture
def fallback(monkeypatch):
    """Force the rlimits-only fallback (and forget earlier detections and warnings)."""
    monkeypatch.setenv(modes.ENV_VAR, "rlimits-only")
    monkeypatch.setattr(runner, "_modes", {})
    monkeypatch.setattr(runner, "_warned", set())
    with pytest.warns(RuntimeWarning, match="WITHOUT bubblewrap"):
        name = isolation()
    assert name.startswith("rlimits")
    return name


def _bwrap_only() -> None:
    if not isolation().startswith("bwrap"):
        pytest.skip(f"needs bubblewrap isolation; this machine has {isolation()}")


# ---------------------------------------------------------------- normal programs


def test_stdin_to_stdout_and_unicode():
    res = run_python(
        "import sys\nfor line in sys.stdin: print(line.strip()[::-1], '✓ 日本')",
        stdin="héllo\nabc\n",
    )
    assert res.verdict == Verdict.ok and res.verdict == "ok" and res.verdict is Verdict.OK
    assert res.exit_code == 0
    assert res.stdout == "olléh ✓ 日本\ncba ✓ 日本\n"
    assert res.stderr == ""
    assert 0 < res.wall_s < 30


def test_files_are_in_cwd_and_importable():
    files = {"helper.py": "VALUE = 41\n", "data/in.txt": "ünï\n"}
    code = "import helper\nprint(helper.VALUE + 1, open('data/in.txt').read().strip())"
    res = run_python(code, files=files)
    assert (res.verdict, res.stdout) == (Verdict.ok, "42 ünï\n")


@pytest.mark.parametrize(
    ("code", "verdict", "exit_code", "in_stderr"),
    [
        ("import sys; sys.exit(0)", Verdict.ok, 0, ""),
        ("import sys; sys.exit(3)", Verdict.runtime_error, 3, ""),
        ("import sys; sys.exit('bye')", Verdict.runtime_error, 1, "bye"),
        ("x = 1\n1 / 0", Verdict.runtime_error, 1, 'main.py", line 2'),
        ("def f(:\n  pass", Verdict.runtime_error, 1, "SyntaxError"),
        ("import os; os.kill(os.getpid(), 11)", Verdict.runtime_error, -11, "SIGSEGV"),
    ],
)
def test_exit_codes_and_errors(code, verdict, exit_code, in_stderr):
    res = run_python(code)
    assert (res.verdict, res.exit_code) == (verdict, exit_code)
    assert in_stderr in res.stderr
    assert "launcher" not in res.stderr and "<string>" not in res.stderr


def test_closing_stdout_early_does_not_end_the_run():
    code = "import os, sys, time\nos.close(1)\nos.close(2)\ntime.sleep(0.5)\nos._exit(3)"
    res = run_python(code)
    assert (res.verdict, res.exit_code) == (Verdict.runtime_error, 3)


def test_deterministic_hash_seed():
    code = "print(list({'apple', 'pear', 'fig', 'kiwi', 'plum'}))"
    assert run_python(code).stdout == run_python(code).stdout


def test_run_many_keeps_order():
    jobs = [Job(code=f"print({i} * int(input()))", stdin=str(i)) for i in range(6)]
    jobs.append(Job(code="raise ValueError('no')"))
    results = run_many(jobs, max_workers=2)
    assert [r.stdout for r in results[:6]] == [f"{i * i}\n" for i in range(6)]
    assert results[6].verdict == Verdict.runtime_error
    assert all(isinstance(r, ExecResult) for r in results)
    assert run_many([]) == []


def test_bad_calls_raise_with_a_hint():
    with pytest.raises(TypeError, match="code must be str"):
        run_python(b"print(1)")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="relative path"):
        run_python("pass", files={"../escape.txt": "x"})
    with pytest.raises(ValueError, match="relative path"):
        run_python("pass", files={"/etc/passwd": "x"})
    with pytest.raises(ValueError, match="memory_mb"):
        run_python("pass", memory_mb=1)
    with pytest.raises(ValueError, match="timeout_s"):
        run_python("pass", timeout_s=0)
    with pytest.raises(TypeError, match="Job"):
        run_many(["print(1)"])  # type: ignore[list-item]


def test_isolation_is_bubblewrap_where_installed(monkeypatch):
    name = isolation()
    if HAS_BWRAP:
        assert name.startswith("bwrap+"), name
        if ROOT and cgroup.available():
            assert name == "bwrap+uid+cgroup" + ("+seccomp" if seccomp.supported() else "")
    monkeypatch.setenv(modes.ENV_VAR, "sandboxed-please")
    with pytest.raises(ValueError, match="auto, bwrap, rlimits-only"):
        isolation()


# ---------------------------------------------------------------- hostile programs

FORK_BOMB = """
import os, sys, time
made = 0
while made < 300:  # bounded: a broken sandbox still stops here
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        try:
            os.execv(sys.executable, [sys.executable, "-S", "-c", "import time; time.sleep(4)",
                                      MARK])
        finally:
            os._exit(0)
    made += 1
print(made, flush=True)
"""


def test_fork_bomb_is_bounded_and_cleaned_up():
    if not runner.current_mode().limits_processes:
        pytest.skip("this isolation does not limit processes")
    mark = _marker()
    res = run_python(f"MARK = {mark!r}\n{FORK_BOMB}", timeout_s=20)
    assert res.verdict == Verdict.ok, res.stderr
    made = int(res.stdout)
    assert 1 <= made < MAX_PROCESSES  # the launcher itself is one of the MAX_PROCESSES
    assert _survivors(mark) == []


@pytest.mark.parametrize("layer", ["cgroup", "uid"])
def test_each_process_limit_holds_on_its_own(layer):
    # Defence in depth: the pids cgroup alone (program left as root) and the unprivileged uid
    # alone (no cgroup) must each stop the fork bomb.
    if not (HAS_BWRAP and ROOT and cgroup.available()):
        pytest.skip("needs root, bubblewrap and cgroups to take the layers apart")
    mode = modes.Mode(
        bwrap=modes.find_bwrap(), drop_uid=layer == "uid", userns=False, cgroup=layer == "cgroup"
    )
    mark = _marker()
    res = runner.run_cold(mode, Job(code=f"MARK = {mark!r}\n{FORK_BOMB}", timeout_s=20))
    assert res.verdict == Verdict.ok, res.stderr
    assert 1 <= int(res.stdout) < MAX_PROCESSES
    assert _survivors(mark) == []


MEMORY_BOMB = """
import sys
chunks = []
while len(chunks) < 128:  # bounded: 128 x 16 MiB = 2 GiB
    chunks.append(bytearray(16 << 20))
    print(len(chunks) * 16, flush=True)
"""


def test_memory_bomb_stops_at_the_limit():
    res = run_python(MEMORY_BOMB, memory_mb=128, timeout_s=20)
    # The address-space limit makes the allocation fail: the program's own MemoryError, which
    # it could as well raise by itself, so a runtime error (memory_limit is the OOM killer's).
    assert res.verdict == Verdict.runtime_error and "MemoryError" in res.stderr, res
    reached = int(res.stdout.split()[-1]) if res.stdout else 0
    assert reached <= 128


FORKED_MEMORY_BOMB = """
import os, time
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        chunks = [bytearray(8 << 20) for _ in range(24)]  # bounded: 192 MiB each
        time.sleep(1)
        os._exit(0)
    kids.append(pid)
codes = [os.waitpid(pid, 0)[1] for pid in kids]
print(codes)
raise SystemExit(1 if any(codes) else 0)
"""


def test_memory_of_the_whole_process_tree_is_limited():
    if not runner.current_mode().cgroup:
        pytest.skip("needs a memory cgroup; per-process RLIMIT_AS cannot limit a tree")
    res = run_python(FORKED_MEMORY_BOMB, memory_mb=256, timeout_s=20)
    # 4 x 192 MiB does not fit in 256 MiB: the OOM killer stops some children.
    assert res.verdict == Verdict.memory_limit, res
    statuses = [int(x) for x in res.stdout.strip("[]\n").split(",")]
    # Some children were killed by SIGKILL (the OOM killer), not all ran to the end.
    assert any(os.WIFSIGNALED(st) and os.WTERMSIG(st) == 9 for st in statuses), statuses


def test_infinite_loop_times_out():
    code = "import time\nt = time.time()\nwhile time.time() - t < 30: pass"
    res = run_python(code, timeout_s=1)
    assert res.verdict == Verdict.timeout
    assert res.wall_s < 12  # the program is bounded at 30 s; a loaded machine needs slack
    assert "time limit" in res.stderr


BUSY_CHILD = """
import subprocess, sys
subprocess.Popen(
    [sys.executable, "-S", "-c", "import time\\nt = time.time()\\nwhile time.time() - t < 20: pass",
     MARK],
    start_new_session=True,  # leaves the process group: only the cgroup / pid namespace hold it
)
print("spawned", flush=True)
"""


def test_busy_child_that_outlives_its_parent_is_killed():
    mark = _marker()
    res = run_python(f"MARK = {mark!r}\n{BUSY_CHILD}", timeout_s=10)
    assert (res.verdict, res.stdout) == (Verdict.ok, "spawned\n"), res
    assert _survivors(mark) == []


def test_busy_child_is_killed_on_timeout():
    mark = _marker()
    code = f"MARK = {mark!r}\n{BUSY_CHILD}\nimport time\ntime.sleep(20)"
    res = run_python(code, timeout_s=1)
    assert res.verdict == Verdict.timeout
    assert _survivors(mark) == []


def test_network_is_unreachable():
    _bwrap_only()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        code = f"""
import socket
import struct
import sys
for addr in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("10.0.0.1", 80)]:
    try:
        socket.create_connection(addr, timeout=2).close()
        print("connected", addr)
    except OSError as e:
        print("blocked", addr, type(e).__name__)
"""
        res = run_python(code, timeout_s=15)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert res.verdict == Verdict.ok
    assert "connected" not in res.stdout
    assert res.stdout.count("blocked") == 3


def test_parent_environment_is_not_inherited(monkeypatch):
    secret = f"s3cret-{uuid.uuid4().hex}"
    monkeypatch.setenv("MAS_SANDBOX_TEST_SECRET", secret)
    code = """
import os
print(dict(os.environ))
for path in ["/proc/self/environ", "/proc/1/environ", f"/proc/{os.getppid()}/environ"]:
    try:
        print(open(path, "rb").read())
    except OSError as e:
        print(path, type(e).__name__)
"""
    res = run_python(code)
    assert res.verdict == Verdict.ok
    assert secret not in res.stdout + res.stderr
    assert "PYTHONHASHSEED" in res.stdout  # it did print the environment


def test_host_files_are_invisible(tmp_path):
    _bwrap_only()
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("host-secret")
    here = Path(__file__).resolve()
    dirs = ["/work", "/root/.cache", "/home", str(tmp_path)]
    readable = [str(secret_file), str(here), "/etc/passwd", "/etc/shadow", "/root/.bashrc"]
    code = f"""
import os
for path in {dirs!r} + [os.path.expanduser("~")]:
    try:
        print("LISTED", path, sorted(os.listdir(path)))
    except OSError as e:
        print(path, type(e).__name__)
for path in {readable!r}:
    try:
        print("READ", path, open(path).read()[:50])
    except OSError as e:
        print(path, type(e).__name__)
"""
    res = run_python(code)
    assert res.verdict == Verdict.ok
    out = res.stdout
    for path in dirs + readable:
        assert f"{path} FileNotFoundError" in out, out
    assert "READ" not in out and "host-secret" not in out
    # The home directory is the private working directory, empty.
    assert out.count("LISTED") == 1 and "LISTED /sandbox []" in out


def test_writes_outside_the_sandbox_do_not_reach_the_host(tmp_path):
    name = f"escape-{uuid.uuid4().hex}"
    targets = [tmp_path / name, Path("/tmp") / name, Path("/usr") / name, Path("/root") / name]
    targets.append(Path(__file__).resolve().parent / name)
    code = f"""
for path in {[str(t) for t in targets]!r}:
    try:
        with open(path, "w") as f:
            f.write("x")
        print("wrote", path)
    except OSError as e:
        print("failed", path, type(e).__name__)
"""
    res = run_python(code)
    assert res.verdict == Verdict.ok
    for target in targets:
        assert not target.exists(), f"the program wrote {target} on the host"
    if isolation().startswith("bwrap"):
        # Only the sandbox's own /tmp is writable; the rest of its root is read-only or absent.
        assert res.stdout.count("wrote") == 1 and f"wrote /tmp/{name}" in res.stdout


def test_huge_output_is_stopped_without_buffering_it():
    code = "import sys\nfor _ in range(4096):\n    sys.stdout.write('x' * (1 << 20))"  # 4 GiB
    res = run_python(code, timeout_s=30)
    assert res.verdict == Verdict.output_limit
    assert STDOUT_LIMIT <= len(res.stdout) < STDOUT_LIMIT + 200
    assert "stdout cut" in res.stdout
    assert res.wall_s < 10


def test_huge_stderr_is_stopped_and_keeps_head_and_tail():
    code = (
        "import sys\nsys.stderr.write('FIRST\\n')\n"
        "for i in range(4096):\n    sys.stderr.write(str(i) * 300000)"
    )
    res = run_python(code, timeout_s=30)
    assert res.verdict == Verdict.output_limit
    assert res.stderr.startswith("FIRST\n")
    assert len(res.stderr) < 70_000
    assert "stderr cut" in res.stderr


def test_deep_recursion_is_a_runtime_error():
    res = run_python("def f(n):\n    return f(n + 1)\nf(0)")
    assert res.verdict == Verdict.runtime_error
    assert "RecursionError" in res.stderr
    # Recursion through C code with the limit lifted overflows the C stack: the program dies
    # of SIGSEGV, and that is the program's runtime error, not the sandbox's.
    # Bounded: 10**6 levels of a few hundred bytes each, even with an unlimited stack.
    code = "import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return list(map(f, [n]))\nf(0)"
    res = run_python(code, timeout_s=20)
    assert res.verdict == Verdict.runtime_error
    assert res.exit_code == -11


def test_reading_stdin_forever_gets_end_of_file():
    code = "import sys\nn = 0\nwhile sys.stdin.readline():\n    n += 1\nprint('eof after', n)"
    res = run_python(code, stdin="a\nb\n", timeout_s=5)
    assert (res.verdict, res.stdout) == (Verdict.ok, "eof after 2\n")
    res = run_python("input()\ninput()", stdin="only one line\n")
    assert res.verdict == Verdict.runtime_error and "EOFError" in res.stderr


def test_big_stdin_does_not_block():
    data = "7\n" * 500_000  # 1 MB, far more than a pipe buffer
    res = run_python("import sys\nprint(sum(map(int, sys.stdin.read().split())))", stdin=data)
    assert res.stdout == f"{7 * 500_000}\n"


def test_runs_as_an_unprivileged_user():
    res = run_python("import os\nprint(os.getuid(), os.getgid(), os.getgroups())")
    uid, gid, *_ = res.stdout.split()
    if isolation() != "rlimits-only":
        assert int(uid) != 0 and int(gid) != 0


SYSCALLS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
calls = {
    "unshare-user": lambda: libc.unshare(0x10000000),
    "unshare-mount": lambda: libc.unshare(0x00020000),
    "clone-newuser": lambda: libc.syscall(56, 0x10000000 | 17, None, None, None, None),
    "clone3": lambda: libc.syscall(435, None, 0),
    "ptrace-attach": lambda: libc.ptrace(16, 1, None, None),
    "mount": lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
    "bpf": lambda: libc.syscall(321, 0, None, 0),
    "io_uring": lambda: libc.syscall(425, 8, None),
    "shmget": lambda: libc.shmget(0x5EC0, 4096, 0o1600),
    "semget": lambda: libc.semget(0x5EC0, 1, 0o1600),
    "msgget": lambda: libc.msgget(0x5EC0, 0o1600),
    "mq_open": lambda: libc.syscall(240, b"leak", 0o100 | 2, 0o600, None),
}
for name, call in calls.items():
    ctypes.set_errno(0)
    print(name, call(), os.strerror(ctypes.get_errno()))
"""


def test_seccomp_refuses_namespaces_tracing_and_mounts():
    if "seccomp" not in isolation():
        pytest.skip(f"no seccomp filter here ({isolation()})")
    res = run_python(SYSCALLS)
    assert res.verdict == Verdict.ok, res.stderr
    lines = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert len(lines) == 12
    for name, outcome in lines.items():
        expected = "Function not implemented" if name == "clone3" else "Operation not permitted"
        assert outcome == f"-1 {expected}", (name, outcome)


def test_threads_subprocesses_and_multiprocessing_still_work():
    code = """
import multiprocessing, subprocess, sys, threading
out = []
threads = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(sorted(out))
print(subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True).stdout)
with multiprocessing.Pool(2) as pool:
    print(pool.map(abs, [-1, -2, -3]))
"""
    res = run_python(code, timeout_s=20)
    assert res.verdict == Verdict.ok, res.stderr
    assert res.stdout.split("\n")[:3] == [str(list(range(8))), "42", ""]
    assert "[1, 2, 3]" in res.stdout


def _bpf_run(
    prog: bytes, nr: int, arg0: int = 0, arch: int = seccomp.AUDIT_ARCH_X86_64, args=()
) -> int:
    """Classic BPF, the few instructions the filter uses, run on one system call (arguments:
    ``arg0``, or all six in ``args``)."""
    full = (*args, 0, 0, 0, 0, 0, 0)[:6] if args else (arg0, 0, 0, 0, 0, 0)
    data = struct.pack("=IIQ6Q", nr, arch, 0, *full)
    insns = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    pc = acc = 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code in (0x15, 0x35, 0x45):
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if hit else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


def test_seccomp_filter_is_well_formed():
    import errno

    prog = seccomp.x86_64_filter()
    fixed = 16 + 4 + len(seccomp.FCNTL_DENIED) + 1 + len(seccomp.MADVISE_DENIED) + 1 + 2 + 2
    assert len(prog) % 8 == 0 and len(prog) // 8 == len(set(seccomp.X86_64_DENIED.values())) + fixed
    first = struct.unpack("=HBBI", prog[:8])
    assert first == (0x20, 0, 0, 4)  # load the architecture before trusting any number
    allow, eperm = 0x7FFF0000, 0x50000 | errno.EPERM
    table = [
        (0, 0, allow),  # read
        (57, 0, allow),  # fork
        (56, 0x11, allow),  # clone(SIGCHLD)
        (56, 0x10000000 | 0x11, eperm),  # clone(CLONE_NEWUSER)
        (435, 0, 0x50000 | errno.ENOSYS),  # clone3
        *((41, family, eperm) for family in (1, 2, 10, 16, 40)),  # socket(): none at all
        (53, 40, 0x50000 | errno.EAFNOSUPPORT),  # socketpair(AF_VSOCK)
        (53, 2, 0x50000 | errno.EAFNOSUPPORT),  # socketpair(AF_INET)
        (53, 1, allow),  # socketpair(AF_UNIX)
        (0x40000000 | 41, 1, eperm),  # x32
        *((nr, 0, eperm) for nr in seccomp.X86_64_DENIED.values()),
    ]
    for nr, arg0, want in table:
        assert _bpf_run(prog, nr, arg0) == want, (nr, arg0)
    assert _bpf_run(prog, 0, arch=0x40000003) == eperm  # i386
    enolck = 0x50000 | errno.ENOLCK
    table = [
        (72, (3, 1), allow),  # fcntl(F_GETFD)
        (72, (3, 4, 0o4000), allow),  # fcntl(F_SETFL, O_NONBLOCK)
        *((72, (3, cmd), enolck) for cmd in seccomp.FCNTL_DENIED.values()),  # locks, F_NOTIFY
        (28, (0, 4096, 4), allow),  # madvise(MADV_DONTNEED): the process's own memory
        (28, (0, 4096, 20), eperm),  # MADV_COLD
        (28, (0, 4096, 21), eperm),  # MADV_PAGEOUT
        (327, (3, 0, 1, 0, 0, 0), allow),  # preadv2 without flags
        (327, (3, 0, 1, 0, 0, 0x8), eperm),  # preadv2(RWF_NOWAIT): a page-cache probe
        (327, (3, 0, 1, 0, 0, 0x8 | 0x2), eperm),
        (221, (3, 0, 0, 4), eperm),  # posix_fadvise(POSIX_FADV_DONTNEED)
        (73, (3, 2), eperm),  # flock(LOCK_EX)
    ]
    for nr, args, want in table:
        assert _bpf_run(prog, nr, args=args) == want, (nr, args)


def test_a_broken_seccomp_filter_falls_back_to_bubblewrap_without_it(monkeypatch):
    if not (HAS_BWRAP and seccomp.supported()):
        pytest.skip("needs bubblewrap on x86-64")
    monkeypatch.setattr(runner, "_modes", {})
    monkeypatch.setattr(runner, "_warned", set())
    monkeypatch.setattr(seccomp, "x86_64_filter", lambda: b"\x06\x00\x00")  # not 8-byte units
    with pytest.warns(RuntimeWarning, match="seccomp filter broke"):
        name = isolation()
    assert name.startswith("bwrap+") and "seccomp" not in name


# ---------------------------------------------------------------- sandbox failures and fallback


def test_a_failing_sandbox_is_reported_not_raised():
    broken = modes.Mode(bwrap="/bin/false", drop_uid=False, userns=False, cgroup=False)
    res = runner.run_cold(broken, Job(code="print(1)"))
    assert res.verdict == Verdict.sandbox_error
    assert res.exit_code is None
    assert "before the program started" in res.stderr


def test_broken_bubblewrap_falls_back_loudly(monkeypatch):
    monkeypatch.delenv(modes.ENV_VAR, raising=False)  # CI sets it to "bwrap"
    monkeypatch.setattr(runner, "_modes", {})
    monkeypatch.setattr(runner, "_warned", set())
    monkeypatch.setattr(modes, "find_bwrap", lambda: "/bin/false")
    with pytest.warns(RuntimeWarning, match="bubblewrap failed a test run"):
        name = isolation()
    assert name.startswith("rlimits")
    monkeypatch.setattr(runner, "_modes", {})
    monkeypatch.setenv(modes.ENV_VAR, "bwrap")
    with pytest.raises(RuntimeError, match="cannot use it"):
        isolation()


def test_fallback_still_limits_and_cleans_up(fallback, monkeypatch):
    secret = f"s3cret-{uuid.uuid4().hex}"
    monkeypatch.setenv("MAS_SANDBOX_TEST_SECRET", secret)
    res = run_python("import os\nprint(os.getcwd())\nprint(dict(os.environ))", stdin="")
    assert res.verdict == Verdict.ok
    cwd = res.stdout.splitlines()[0]
    assert secret not in res.stdout
    assert not os.path.exists(cwd), "the fallback's temporary directory was left behind"

    res = run_python("print(open('in.txt').read())", files={"in.txt": "data"})
    assert res.stdout == "data\n"

    res = run_python(MEMORY_BOMB, memory_mb=128, timeout_s=20)
    assert res.verdict == Verdict.runtime_error and "MemoryError" in res.stderr
    assert int(res.stdout.split()[-1]) <= 128

    res = run_python("import sys\nfor _ in range(4096):\n    sys.stdout.write('x' * (1 << 20))")
    assert res.verdict == Verdict.output_limit

    # A child in the program's process group dies with it at the timeout.
    mark = _marker()
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(20)', {mark!r}])\n"
        "time.sleep(20)"
    )
    res = run_python(code, timeout_s=1)
    assert res.verdict == Verdict.timeout
    deadline = time.monotonic() + 2
    while _survivors(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _survivors(mark) == []


def test_fallback_fork_bomb_is_bounded_where_processes_are_limited(fallback):
    if not runner.current_mode().limits_processes:
        pytest.skip(f"{fallback} as root cannot limit processes (the warning says so)")
    mark = _marker()
    res = run_python(f"MARK = {mark!r}\n{FORK_BOMB}", timeout_s=20)
    assert int(res.stdout) < MAX_PROCESSES + 50
    assert _survivors(mark) == []


def test_a_sandbox_that_hangs_at_start_up_is_stopped(monkeypatch):
    mark = _marker()
    hang = [sys.executable, "-S", "-c", "import time; time.sleep(30)", mark]
    monkeypatch.setattr(modes, "bwrap_command", lambda *args: hang)
    monkeypatch.setattr(runner, "STARTUP_GRACE_S", 0.5)
    mode = modes.Mode(bwrap="/usr/bin/bwrap", drop_uid=False, userns=False, cgroup=False)
    res = runner.run_cold(mode, Job(code="print(1)", timeout_s=0.5))
    assert res.verdict == Verdict.sandbox_error
    assert "did not start" in res.stderr
    assert res.wall_s < 10
    assert _survivors(mark) == []


def test_survivor_check_sees_a_live_marked_process():
    # The leftover checks above are only worth something if they can see a survivor.
    import subprocess

    mark = _marker()
    child = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(30)", mark])
    try:
        deadline = time.monotonic() + 5  # the command line appears once exec has finished
        while not _survivors(mark) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _survivors(mark) == [child.pid]
    finally:
        child.kill()
        child.wait()
    assert _survivors(mark) == []


# ---------------------------------------------------------------- judge integrity (issue 13)


def _seccomp_only() -> None:
    if "seccomp" not in isolation():
        pytest.skip(f"no seccomp filter here ({isolation()})")


SOCKET_FAMILIES = """
import errno, socket
for name, family, kind in [
    ("AF_UNIX", 1, socket.SOCK_STREAM), ("AF_INET", 2, socket.SOCK_STREAM),
    ("AF_INET6", 10, socket.SOCK_DGRAM), ("AF_NETLINK", 16, socket.SOCK_RAW),
    ("AF_PACKET", 17, socket.SOCK_DGRAM), ("AF_ALG", 38, socket.SOCK_SEQPACKET),
    ("AF_VSOCK", 40, socket.SOCK_STREAM), ("AF_BLUETOOTH", 31, socket.SOCK_STREAM),
]:
    try:
        socket.socket(family, kind).close()
        print(name, "open")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
try:
    a, b = socket.socketpair(40, socket.SOCK_STREAM)
    print("socketpair-vsock open")
except OSError as e:
    print("socketpair-vsock", errno.errorcode.get(e.errno, e.errno))
a, b = socket.socketpair()
a.sendall(b"ping")
print("socketpair-unix", b.recv(4).decode())
import asyncio  # its event loop wakes itself through a Unix socketpair
print("asyncio", asyncio.run(asyncio.sleep(0, "runs")))
"""


def test_no_socket_can_be_made_only_a_unix_socketpair():
    # No network to reach (not even a loopback), no named or abstract Unix socket to leave for
    # a later program, no AF_VSOCK to the VM's host (not network-namespaced), no netlink, packet
    # or crypto socket (kernel attack surface). Never connect: only create. An anonymous Unix
    # socketpair (asyncio's self-pipe) still works, and with it asyncio.
    _seccomp_only()
    res = run_python(SOCKET_FAMILIES)
    assert res.verdict == Verdict.ok, res.stderr
    got = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert got.pop("socketpair-unix") == "ping"
    assert got.pop("asyncio") == "runs"
    assert got.pop("socketpair-vsock") == "EAFNOSUPPORT"
    assert len(got) == 8 and set(got.values()) == {"EPERM"}, got


UNNEEDED_CALLS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(64)
calls = {
    "modify_ldt": lambda: libc.syscall(154, 0, buf, 64),
    "personality": lambda: libc.syscall(135, 0xFFFFFFFF),
    "memfd_secret": lambda: libc.syscall(447, 0),
    "kcmp": lambda: libc.syscall(312, os.getpid(), os.getpid(), 0, 0, 0),
    "mbind": lambda: libc.syscall(237, 0, 0, 0, 0, 0, 0),
    "move_pages": lambda: libc.syscall(279, 0, 0, 0, 0, 0, 0),
}
for name, call in calls.items():
    ctypes.set_errno(0)
    print(name, call(), ctypes.get_errno())
"""


def test_calls_no_program_needs_are_refused():
    _seccomp_only()
    import errno

    res = run_python(UNNEEDED_CALLS)
    assert res.verdict == Verdict.ok, res.stderr
    got = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert got == dict.fromkeys(got, f"-1 {errno.EPERM}") and len(got) == 6, got


def test_the_namespace_init_shows_no_sandbox_command_line():
    _bwrap_only()
    res = run_python("print(open('/proc/1/cmdline', 'rb').read())")
    assert res.verdict == Verdict.ok, res.stderr
    shown = res.stdout
    # It did read it: bubblewrap's init, or in the warm pool the run's init (the zygote's copy).
    assert "bwrap" in shown or "The code of a warm pool worker" in shown
    # The mount layout, limits and descriptors stay out of it (the interpreter's path and the
    # launcher's source are the program's own, in its own /proc/self/cmdline too).
    for option in ("--unshare", "--ro-bind", "--tmpfs", "--size", "--seccomp", "--cap-add"):
        assert option not in shown, (option, shown)


_FORGED = [
    # (program, how it tries to look) -- each ends non-zero, none hit a real limit
    ("import sys\nsys.stderr.write('MemoryError\\n')\nsys.exit(1)", "memory_limit"),
    ("raise MemoryError", "memory_limit"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)", "timeout"),
    ("import sys\nsys.exit(128 + 24)", "timeout"),  # bubblewrap's "killed by SIGXCPU"
]


@pytest.mark.parametrize(("code", "looks_like"), _FORGED)
def test_verdicts_cannot_be_forged_by_the_program(code, looks_like):
    res = run_python(code)
    assert res.verdict == Verdict.runtime_error, (looks_like, res)


def test_a_real_cpu_limit_is_still_a_timeout():
    # Four busy threads spend the process's CPU limit (ceil(1) + 1 = 2 s) in about 0.5 s of
    # wall time: the kernel's SIGXCPU, before the 1 s wall-clock limit. Bounded: 20 s.
    code = (
        "import threading, time\n"
        "def spin():\n"
        "    t = time.time()\n"
        "    while time.time() - t < 20: pass\n"
        "for _ in range(4): threading.Thread(target=spin).start()\n"
    )
    res = run_python(code, timeout_s=1)
    assert res.verdict == Verdict.timeout, res


_UID_WORKER = """
import json, os, sys
from mas_envs.sandbox import Job, run_many, runner

class Os:  # this process's pid, as runner sees it, is forced to PID
    def __getattr__(self, name):
        return getattr(os, name)
    @staticmethod
    def getpid():
        return int(sys.argv[1])

runner.os = Os()
code = "import os, time\\nprint(os.getuid())\\ntime.sleep(1.5)"
results = run_many([Job(code=code, timeout_s=10)] * 3, max_workers=3)
print(json.dumps([r.stdout.strip() for r in results]))
"""


def test_concurrent_runs_of_two_processes_never_share_a_uid():
    # Two workers whose pids differ by 100000 (as on a long-running machine) run three
    # programs each, all at the same time: six distinct uids.
    if not runner.current_mode().drop_uid:
        pytest.skip(f"no per-run uid here ({isolation()})")
    import json
    import subprocess

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _UID_WORKER, str(4242 + k * 100_000)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(2)
    ]
    uids = [uid for p in procs for uid in json.loads(p.communicate(timeout=120)[0])]
    assert len(uids) == 6 and all(u.isdigit() and int(u) >= runner.UID_BASE for u in uids), uids
    assert len(set(uids)) == 6, uids


def test_the_fallback_kills_every_process_of_a_runs_uid():
    # In the rlimits fallback a process that left the process group outlives the run; before
    # its uid goes back to the allocator, every process of that uid is killed.
    if not ROOT:
        pytest.skip("needs root to start a process under another uid")
    import subprocess

    uid = uids.ALLOCATOR.acquire()
    mark = _marker()
    try:
        child = subprocess.Popen(
            ["/bin/sh", "-c", "sleep 30; :", mark],  # the venv's python is not theirs to run
            user=uid,
            group=uid,
            extra_groups=[],
            start_new_session=True,
        )
        deadline = time.monotonic() + 5
        while not _survivors(mark) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert child.pid in _survivors(mark)  # (its forked child may show the mark too)
        runner._kill_uid(uid)
        assert child.wait(timeout=5) == -9
        assert _survivors(mark) == []
    finally:
        uids.ALLOCATOR.release(uid)


# What a run could use to signal to a later or concurrent run through the files every run shares
# read-only (the interpreter's standard library): the page cache (evict a file, then probe
# without reading it), locks, access events; and the host's pty budget. Each must be refused.
SHARED_FILE_CHANNELS = r"""
import ctypes, errno, fcntl, mmap, os, struct, sys
path = os.__file__  # a standard-library file every run can read
fd = os.open(path, os.O_RDONLY)
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, call):
    try:
        call()
    except OSError as exc:
        refused = exc.errno in (errno.EPERM, errno.ENOLCK, errno.ENOENT)
        return f"{name}: refused" if refused else f"{name}: {exc}"
    return f"{name}: allowed"

def c_call(fn, *args):
    def call():
        if fn(*args) < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    return call

m = mmap.mmap(fd, 4096, access=mmap.ACCESS_COPY)  # private: ctypes can take its address
vec = ctypes.create_string_buffer(1)
page = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(m)))  # the file's mapping
range16, stat32 = ctypes.create_string_buffer(16), ctypes.create_string_buffer(32)
want_write = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)
results = [
    attempt("fadvise", lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)),
    attempt("preadv2-nowait", lambda: os.preadv(fd, [bytearray(16)], 0, os.RWF_NOWAIT)),
    attempt("readahead", c_call(libc.syscall, 187, fd, ctypes.c_long(0), ctypes.c_size_t(4096))),
    attempt("mincore", c_call(libc.mincore, page, ctypes.c_size_t(4096), vec)),
    attempt("cachestat", c_call(libc.syscall, 451, fd, range16, stat32, 0)),
    attempt("madvise-pageout", lambda: m.madvise(21)),
    attempt("flock", lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
    attempt("fcntl-lock", lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
    attempt("fcntl-getlk", lambda: fcntl.fcntl(fd, fcntl.F_GETLK, want_write)),
    attempt("inotify", c_call(libc.inotify_init1, 0)),
    attempt("pty", os.openpty),
]
print("\n".join(results))
"""


def test_no_channel_through_shared_files_or_ptys():
    if not (HAS_BWRAP and seccomp.supported()):
        pytest.skip("needs bubblewrap and the seccomp filter (x86-64)")
    res = run_python(SHARED_FILE_CHANNELS)
    assert res.verdict == Verdict.ok, res.stderr
    allowed = [line for line in res.stdout.splitlines() if not line.endswith(": refused")]
    assert not allowed, allowed
    assert len(res.stdout.splitlines()) == 11
