"""Running untrusted Python cold (:func:`run_cold`), the pieces the warm pool shares with it
(:func:`rlimits`, :func:`memfd`, :func:`collect`, :func:`make_result`, ...), and the isolation
this machine gives (:func:`current_mode`, :func:`isolation`). The entry points that choose warm
or cold are in :mod:`mas_envs.sandbox.entry`.

One cold run = one process tree, started by bubblewrap (see :mod:`mas_envs.sandbox.modes`) with
the launcher (:mod:`mas_envs.sandbox.launcher`) as its program. The parent:

* hands the program, its files and limits to the launcher through an anonymous file (memfd), and
  its stdin as another memfd (so the program sees end-of-file, and a big stdin never blocks us);
* reads stdout and stderr as they come, keeping at most the output limit in memory, and kills the
  run as soon as either stream passes it;
* kills the whole run at the wall-clock deadline: the process group, the cgroup (which also holds
  processes that called ``setsid``) and, with bubblewrap, the pid namespace (its init dies);
* after the main process exits, kills whatever it left behind, then removes the cgroup.
"""

from __future__ import annotations

import contextlib
import json
import logging
import marshal
import math
import os
import posixpath
import select
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from typing import IO, Protocol

from mas_envs.sandbox import cgroup, modes, seccomp, uids
from mas_envs.sandbox.result import ExecResult, Job, Verdict

log = logging.getLogger("mas_envs.sandbox")

MAX_PROCESSES = 32
"""Most processes + threads one program may have at once (the launcher included)."""
STDOUT_LIMIT = 8 << 20
"""Bytes of stdout kept; a program that writes more is stopped (``output_limit``)."""
STDERR_LIMIT = 8 << 20
"""Bytes of stderr a program may write before it is stopped (``output_limit``)."""
STDERR_HEAD = 16 << 10
STDERR_TAIL = 48 << 10
"""Of stderr, the first ``STDERR_HEAD`` and last ``STDERR_TAIL`` bytes are kept."""
TMPFS_BYTES = 64 << 20
"""Size of each private tmpfs (``/sandbox`` and ``/tmp``)."""
FILE_SIZE_LIMIT = 64 << 20
OPEN_FILES = 256
MEMORY_OVERHEAD = 64 << 20
"""The cgroup's memory limit is ``memory_mb`` plus this: bubblewrap and the tmpfs files."""
STARTUP_GRACE_S = 10.0
"""Seconds the sandbox set-up may take, on top of ``timeout_s`` (which starts with the program)."""
UID_BASE = uids.UID_BASE
"""Runs as root switch to uids from here on, one no other live run has (:mod:`.uids`)."""

_mode_lock = threading.Lock()
_modes: dict[str, modes.Mode] = {}


# ---------------------------------------------------------------- public API


def isolation() -> str:
    """The isolation programs get here, e.g. ``"bwrap+uid+cgroup"`` or ``"rlimits-only"``.

    The first call probes bubblewrap and cgroups (a few tens of milliseconds) and, if it has to
    fall back, warns once. ``MAS_SANDBOX_ISOLATION`` (``auto``, ``bwrap``, ``rlimits-only``)
    chooses; see :mod:`mas_envs.sandbox.modes`.
    """
    return current_mode().name


# ---------------------------------------------------------------- mode detection


def current_mode() -> modes.Mode:
    want = modes.requested()
    with _mode_lock:
        if want not in _modes:
            _modes[want] = _detect(want)
        return _modes[want]


def _detect(want: str) -> modes.Mode:
    root = os.geteuid() == 0
    fallback = modes.Mode(
        bwrap=None,
        drop_uid=root and all(modes.world_readable(r) for r in _interpreter_files()),
        userns=False,
        cgroup=False,
    )
    if want == "rlimits-only":
        _warn_fallback(fallback, f"{modes.ENV_VAR}=rlimits-only")
        return fallback
    use_cgroup = root and cgroup.available()
    fallback = modes.Mode(None, fallback.drop_uid, False, use_cgroup)
    bwrap = modes.find_bwrap()
    if bwrap is None:
        why = "bubblewrap (bwrap) is not installed; install it (apt-get install bubblewrap)"
    else:
        mode = modes.Mode(bwrap, root, not root, use_cgroup, seccomp=seccomp.supported())
        failure = probe(mode)
        if failure is None:
            return mode
        if mode.seccomp:
            plain = modes.Mode(bwrap, root, not root, use_cgroup, seccomp=False)
            if probe(plain) is None:
                _warn_fallback(plain, f"the seccomp filter broke the test run: {failure}")
                return plain
        why = failure
    if want == "bwrap":
        raise RuntimeError(f"{modes.ENV_VAR}=bwrap but the sandbox cannot use it: {why}")
    _warn_fallback(fallback, why)
    return fallback


def _interpreter_files() -> list[str]:
    return [modes.interpreter(), *modes.interpreter_roots()]


def probe(
    mode: modes.Mode, run: Callable[[modes.Mode, Job], ExecResult] | None = None
) -> str | None:
    """``None`` when ``mode`` runs a program as it should, else what went wrong.

    ``run(mode, job)`` runs the test program (default: a cold run; the pool passes its own).
    """
    code = (
        "import os, threading\n"
        "t = threading.Thread(target=print, args=('thread',))\nt.start()\nt.join()\n"
        "nets = open('/proc/net/dev').read().splitlines()[2:]\n"  # this network namespace's
        "print('probe', os.getuid(), len(nets))\n"
    )
    res = (run or run_cold)(mode, Job(code=code, timeout_s=20.0, memory_mb=256))
    words = res.stdout.split()[1:]
    if res.verdict != Verdict.ok or len(words) != 3 or words[0] != "probe":
        return f"bubblewrap failed a test run ({res.verdict.value}): {res.stderr.strip()[-800:]}"
    if mode.drop_uid and words[1] == "0":
        return "bubblewrap ran the test program as root"
    if words[2] != "1":
        return "bubblewrap left network interfaces besides loopback visible"
    return None


_warned: set[str] = set()


def _warn_fallback(mode: modes.Mode, why: str) -> None:
    if mode.name in _warned:
        return
    _warned.add(mode.name)
    if mode.bwrap:
        msg = f"mas_envs.sandbox: running model code without a seccomp filter ({mode.name}): {why}."
    else:
        msg = (
            f"mas_envs.sandbox: running model code WITHOUT bubblewrap isolation ({mode.name}): "
            f"{why}. Programs can read host files and use the network; only rlimits, a cleared "
            "environment and a temporary working directory apply."
        )
    if not mode.limits_processes:
        msg += " The process count is NOT limited (root, no cgroups): a fork bomb is not stopped."
    log.warning(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=5)  # the caller of run_python


# ---------------------------------------------------------------- one run


def check_job(job: Job) -> None:
    if not isinstance(job.code, str):
        raise TypeError(f"code must be str, got {type(job.code).__name__}")
    if not isinstance(job.stdin, str):
        raise TypeError(f"stdin must be str, got {type(job.stdin).__name__}")
    if not (isinstance(job.timeout_s, (int, float)) and job.timeout_s > 0):
        raise ValueError(f"timeout_s must be a positive number of seconds, got {job.timeout_s!r}")
    if not (isinstance(job.memory_mb, int) and job.memory_mb >= 32):
        raise ValueError(f"memory_mb must be an int >= 32 (MiB), got {job.memory_mb!r}")
    for name, text in (job.files or {}).items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise TypeError(f"files must map str paths to str contents, got {name!r}")
        norm = posixpath.normpath(name)
        if name.startswith("/") or norm == "." or norm.startswith("..") or "\0" in name:
            raise ValueError(
                f"files path {name!r} must be a relative path inside the working directory, "
                "e.g. 'input.txt' or 'data/input.txt'"
            )


def memfd(name: str, data: bytes) -> int:
    """An anonymous file holding ``data``, read from the start by the child."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(name, 0)
    else:  # not Linux: an unlinked temporary file does the same
        fd, path = tempfile.mkstemp(prefix=name)
        os.unlink(path)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _cpu_limit(job: Job) -> int:
    """CPU seconds per process (``RLIMIT_CPU``'s soft limit): a little more than the wall time."""
    return math.ceil(job.timeout_s) + 1


def rlimits(mode: modes.Mode, job: Job) -> list[tuple[str, int, int]]:
    cpu = _cpu_limit(job)
    limits = [
        ("RLIMIT_AS", job.memory_mb << 20, job.memory_mb << 20),
        ("RLIMIT_CPU", cpu, cpu + 1),  # SIGXCPU first (a timeout), SIGKILL a second later
        ("RLIMIT_FSIZE", FILE_SIZE_LIMIT, FILE_SIZE_LIMIT),
        ("RLIMIT_NOFILE", OPEN_FILES, OPEN_FILES),
        ("RLIMIT_CORE", 0, 0),
    ]
    if mode.drop_uid or mode.userns:
        limits.append(("RLIMIT_NPROC", MAX_PROCESSES, MAX_PROCESSES))
    elif os.geteuid() != 0:
        # The kernel counts all of this user's processes: allow MAX_PROCESSES more than now.
        mine = _count_own_processes()
        limits.append(("RLIMIT_NPROC", mine + MAX_PROCESSES, mine + MAX_PROCESSES))
    return limits


def _count_own_processes() -> int:
    uid = os.getuid()
    count = 0
    try:
        entries = list(os.scandir("/proc"))
    except OSError:  # no /proc (not Linux): assume a busy desktop user
        return 1024
    for entry in entries:
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                count += entry.stat().st_uid == uid
    return count


class _Stream:
    """Bytes from one pipe: a head and an optional tail, never more than the limits."""

    def __init__(self, head: int, tail: int, limit: int) -> None:
        self.head_max, self.tail_max, self.limit = head, tail, limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_max:
            self.tail += data
            if len(self.tail) > self.tail_max:
                del self.tail[: len(self.tail) - self.tail_max]

    @property
    def over(self) -> bool:
        return self.total > self.limit

    def text(self, name: str) -> str:
        kept = len(self.head) + len(self.tail)
        body = self.head.decode("utf-8", "replace")
        if self.total > kept:
            note = f"[mas-sandbox: {name} cut: {self.total - kept} of {self.total} bytes not kept]"
            body += ("\n" if body and not body.endswith("\n") else "") + note + "\n"
        return body + self.tail.decode("utf-8", "replace")


def run_cold(mode: modes.Mode, job: Job) -> ExecResult:
    start = time.monotonic()
    uid = None
    if mode.drop_uid:
        # Unique among the machine's live runs: RLIMIT_NPROC counts this run's processes only,
        # and no other run can signal or read them.
        try:
            uid = uids.ALLOCATOR.acquire()
        except OSError as exc:
            note = f"mas-sandbox: no uid for the run: {exc}"
            return ExecResult(Verdict.sandbox_error, None, "", note, since(start))
    tmp = None if mode.bwrap else tempfile.mkdtemp(prefix="mas-sandbox-", dir=_fast_tmp())
    try:
        if tmp is None:
            cwd, code_path = None, modes.SANDBOX_CODE
        else:
            cwd, code_path = os.path.join(tmp, "work"), os.path.join(tmp, "code", "main.py")
            os.mkdir(cwd, 0o700)
            os.chmod(tmp, 0o755)
            if uid is not None:
                os.chown(cwd, uid, uid)
        spec = {
            "code": job.code,
            "code_path": code_path,
            "files": dict(job.files or {}),
            "uid": uid,
            "gid": uid,
            "rlimits": rlimits(mode, job),
            "status_fd": -1,
        }
        return _spawn_and_wait(mode, job, spec, cwd, start)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if uid is not None:
            if not (mode.bwrap or mode.cgroup):
                _kill_uid(uid)  # a process that left the process group (the fallback only)
            uids.ALLOCATOR.release(uid)  # no process of the run is left to share it


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` until none is left (the fallback's last sweep)."""
    for _ in range(1000):  # each round kills what the last one missed; RLIMIT_NPROC bounds it
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                # Not the directory's owner: a process that switched uid is not dumpable, and
                # its /proc directory then belongs to root.
                with contextlib.suppress(OSError, ValueError, IndexError, StopIteration):
                    with open(f"/proc/{entry.name}/status") as f:
                        real = next(line for line in f if line.startswith("Uid:")).split()[1]
                    if int(real) == uid:
                        found.append(int(entry.name))
        if not found:
            return
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def _fast_tmp() -> str | None:
    # The fallback's working directory: RAM-backed when possible (removing a directory tree on
    # a disk file system costs milliseconds per run).
    return "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None


def _spawn_and_wait(
    mode: modes.Mode, job: Job, spec: dict, cwd: str | None, start: float
) -> ExecResult:
    status_r, status_w = os.pipe()
    spec["status_fd"] = status_w
    spec_fd = memfd("mas-sandbox-spec", marshal.dumps(spec))
    stdin_fd = memfd("mas-sandbox-stdin", job.stdin.encode("utf-8", "replace"))
    child_fds = [status_w, spec_fd, stdin_fd]  # closed in the parent once the child has them
    parent_fds = [status_r]
    group = None
    hold: tuple[int, int] | None = None  # (info_r, block_w): bubblewrap waits for its cgroup
    preexec = None
    try:
        if mode.cgroup:
            pids = MAX_PROCESSES + (2 if mode.bwrap else 0)  # + bwrap and its pid-1 reaper
            group = cgroup.RunCgroup(pids, (job.memory_mb << 20) + MEMORY_OVERHEAD)
        if mode.bwrap:
            hold_fds = None
            if group:
                # bubblewrap stops before starting the launcher until we have put it and its
                # init into the cgroup: no preexec_fn (thread-safe, and vfork stays possible
                # for a big parent), and the cgroup attach overlaps bubblewrap's own set-up.
                info_r, info_w = os.pipe()
                block_r, block_w = os.pipe()
                parent_fds += [info_r, block_w]
                child_fds += [info_w, block_r]
                hold, hold_fds = (info_r, block_w), (info_w, block_r)
            filter_fd = None
            if mode.seccomp:
                filter_fd = memfd("mas-sandbox-seccomp", seccomp.x86_64_filter())
                child_fds.append(filter_fd)
            cmd = modes.bwrap_command(mode, TMPFS_BYTES, spec_fd, hold_fds, filter_fd)
            argv = with_args_fd(cmd, child_fds)
            env = {"PATH": "/usr/bin:/bin"}
        else:
            argv = modes.python_command(spec_fd)
            env = {**modes.BASE_ENV, "HOME": cwd or "/", "TMPDIR": cwd or "/tmp"}
            preexec = group.join if group else None
        proc = subprocess.Popen(
            argv,
            stdin=stdin_fd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=tuple(fd for fd in child_fds if fd != stdin_fd),
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=preexec,
        )
    except OSError as exc:
        for fd in child_fds + parent_fds:
            os.close(fd)
        if group:
            group.remove()
        return ExecResult(
            Verdict.sandbox_error, None, "", f"mas-sandbox: could not start: {exc}", since(start)
        )
    for fd in child_fds:
        os.close(fd)
    try:
        if hold is not None and group is not None:
            deadline = start + job.timeout_s + STARTUP_GRACE_S
            if not fill_cgroup(proc, group, hold[0], hold[1], deadline):
                _kill_all(proc, group)  # never released: reported as a failed start
        out, err, stopped, started = collect(
            proc,
            status_r,
            job.timeout_s,
            start,
            exited=lambda: _reap(proc, block=False) is not None,
            kill=lambda: _kill_all(proc, group),
        )
        oom = group.oom_kills() if group else 0
    finally:
        for fd in parent_fds:
            os.close(fd)
        _kill_all(proc, group)
        cpu_s = _reap(proc, block=True) or 0.0
        if group:
            group.remove()
    return make_result(mode, job, proc.returncode, started, stopped, oom, cpu_s, out, err, start)


def with_args_fd(cmd: list[str], child_fds: list[int]) -> list[str]:
    """``cmd`` as ``bwrap --args FD -- ...`` (see ``modes.split_options``), FD in ``child_fds``."""
    argv, options = modes.split_options(cmd)
    if not options:
        return argv
    args_fd = memfd("mas-sandbox-args", options)
    child_fds.append(args_fd)
    return [str(args_fd) if a == "{fd}" else a for a in argv]


def fill_cgroup(
    proc: subprocess.Popen[bytes],
    group: cgroup.RunCgroup,
    info_fd: int,
    block_fd: int,
    deadline: float,
) -> int:
    """Put bubblewrap and its (waiting) namespace init into ``group``, then let it go on.

    Returns the init's pid, or 0 when bubblewrap failed or stalled before reporting it.
    """
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(info_fd, selectors.EVENT_READ)
        while b"}" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return 0
            if sel.select(left):
                chunk = os.read(info_fd, 4096)
                if not chunk:
                    return 0  # bubblewrap exited; its stderr says why
                buf += chunk
    try:
        init_pid = int(json.loads(buf)["child-pid"])
        group.add(proc.pid)
        group.add(init_pid)
        os.write(block_fd, b"x")
    except (ValueError, KeyError, TypeError, OSError):
        return 0
    return init_pid


class _Pipes(Protocol):
    """What :func:`_collect` reads of a run's main process: its two output pipes."""

    @property
    def stdout(self) -> IO[bytes] | None: ...

    @property
    def stderr(self) -> IO[bytes] | None: ...


def collect(
    proc: _Pipes,
    status_fd: int,
    timeout_s: float,
    start: float,
    *,
    exited: Callable[[], bool],
    kill: Callable[[], None],
    exit_fd: int | None = None,
) -> tuple[_Stream, _Stream, str | None, bool]:
    """Read both pipes until they close; stop the run at the deadline or the output limit.

    The wall-clock limit counts from the launcher's ``S`` (the program starts), so a loaded
    machine's slow sandbox set-up never eats the program's time; the set-up itself gets
    ``STARTUP_GRACE_S`` on top. Of ``proc`` only ``stdout`` and ``stderr`` are read (the warm
    pool's runs are not our children): ``exited()`` says whether the run's main process has
    exited, ``kill()`` stops the whole run, and ``exit_fd`` (when given) becomes readable when
    ``exited()`` may have news. Returns stdout, stderr, why we stopped the run (``"timeout"``,
    ``"startup"``, ``"output"`` or ``None``) and whether the program started.
    """
    assert proc.stdout is not None and proc.stderr is not None
    out = _Stream(STDOUT_LIMIT, 0, STDOUT_LIMIT)
    err = _Stream(STDERR_HEAD, STDERR_TAIL, STDERR_LIMIT)
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    stopped: str | None = None
    started = False
    exited_at: float | None = None
    # Without exit_fd, ask exited() on every wake-up; with it, only once it has news (and at the
    # deadlines). A poll object, not an epoll selector: no descriptor and no epoll_ctl per run.
    news = exit_fd is None
    deadline = start + timeout_s + STARTUP_GRACE_S
    poller = select.poll()
    for fd in (*streams, status_fd) if exit_fd is None else (*streams, status_fd, exit_fd):
        poller.register(fd, select.POLLIN)
    while True:
        now = time.monotonic()
        if stopped is None and now >= deadline:
            stopped = "timeout" if started else "startup"
            kill()
            news = True
        if exited_at is None and news and exited():
            # The main process is gone: nothing of the run may outlive it.
            exited_at = now
            kill()
        # Done when the program has exited and its pipes are drained (a program may close
        # stdout early and go on). An escaped writer (rlimits-only) may hold them open: 1 s.
        if exited_at is not None and (not streams or now - exited_at > 1.0):
            break
        wait = min(deadline - now, 0.05) if stopped is None else 0.05
        for fd, _ in poller.poll(max(1, math.ceil(wait * 1000))):
            if fd == exit_fd:
                poller.unregister(exit_fd)  # exited() reads the news
                news = True
                continue
            data = os.read(fd, 1 << 16)
            if fd == status_fd:
                if data[:1] == b"S" and not started:
                    started = True
                    deadline = time.monotonic() + timeout_s
                if not data:
                    poller.unregister(status_fd)
                continue
            if not data:
                poller.unregister(fd)
                del streams[fd]
                continue
            stream = streams[fd]
            stream.add(data)
            if stream.over and stopped is None:
                stopped = "output"
                kill()
    if not started:
        started = _read_status(status_fd)
    proc.stdout.close()
    proc.stderr.close()
    return out, err, stopped, started


def _reap(proc: subprocess.Popen[bytes], *, block: bool) -> float | None:
    """Wait for the run's main process (``wait4``): its tree's CPU seconds once it has exited.

    ``None`` while it runs (``block=False``). The CPU time covers every process of the run
    that was waited for (bubblewrap's init reaps them all): what the kernel counted, which the
    program cannot forge, unlike its exit status.
    """
    if proc.returncode is not None:
        return getattr(proc, "_mas_cpu_s", 0.0)
    try:
        pid, status, usage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
    except ChildProcessError:  # reaped elsewhere (never by us twice)
        pid, status, usage = proc.pid, 0, None
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime if usage is not None else 0.0
    proc._mas_cpu_s = cpu  # type: ignore[attr-defined]
    return cpu


def _kill_all(proc: subprocess.Popen[bytes], group: cgroup.RunCgroup | None) -> None:
    # start_new_session made the run's pid its process group id; the kernel keeps that id
    # reserved while any member lives, so this never hits an unrelated group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if group:
        group.kill_all()


def _read_status(fd: int) -> bool:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1) == b"S"
    except (BlockingIOError, OSError):
        return False


def since(start: float) -> float:
    return time.monotonic() - start


def make_result(
    mode: modes.Mode,
    job: Job,
    returncode: int,
    started: bool,
    stopped: str | None,
    oom: int,
    cpu_s: float,
    out: _Stream,
    err: _Stream,
    start: float,
) -> ExecResult:
    """The verdict, from what this process saw only: its own timers and output counts, the
    kernel's OOM kills in the run's cgroup, the exit status and the CPU time the kernel counted.
    Never from text the program writes (it can print ``MemoryError``, send itself ``SIGXCPU``
    or exit with 152, bubblewrap's status for it)."""
    # bubblewrap exits with 128 + n when the program died of signal n; Popen gives -n itself.
    code = returncode
    if mode.bwrap and 128 < code < 128 + 65 and stopped is None:
        code = -(code - 128)
    stdout, stderr, wall = out.text("stdout"), err.text("stderr"), since(start)
    if not started:
        if stopped == "startup":
            note = f"[mas-sandbox: the sandbox did not start within {wall:.1f} s]"
        else:
            note = f"[mas-sandbox: the sandbox failed before the program started ({returncode})]"
        return ExecResult(Verdict.sandbox_error, None, stdout, _noted(stderr, note), wall)
    note = ""
    if stopped == "output":
        verdict = Verdict.output_limit
        note = "[mas-sandbox: stopped: output limit exceeded]"
    elif stopped == "timeout" or (code == -signal.SIGXCPU and cpu_s >= _cpu_limit(job) - 0.5):
        verdict = Verdict.timeout
        note = f"[mas-sandbox: stopped: time limit of {job.timeout_s:g} s exceeded]"
    elif code != 0 and oom > 0:
        verdict = Verdict.memory_limit
        note = f"[mas-sandbox: memory limit of {job.memory_mb} MiB exceeded]"
    elif code == 0:
        verdict = Verdict.ok
    else:
        verdict = Verdict.runtime_error
        if code < 0:
            note = f"[mas-sandbox: killed by signal {_signal_name(-code)}]"
    return ExecResult(verdict, code, stdout, _noted(stderr, note) if note else stderr, wall)


def _noted(text: str, note: str) -> str:
    return text + ("\n" if text and not text.endswith("\n") else "") + note + "\n"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
