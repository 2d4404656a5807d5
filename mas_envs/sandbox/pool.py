"""The warm sandbox pool: programs start at the speed of a fork, with a cold run's isolation.

A cold run (:func:`mas_envs.sandbox.runner.run_cold`) starts bubblewrap and an interpreter per
program: ~20 ms, most of a trivial program's cost. The pool keeps ``size`` bubblewrap sandboxes
(*workers*) up; in each, a *zygote* (:mod:`mas_envs.sandbox.zygote`, which never runs model code)
forks one fresh process tree per program and gets it ready *before* a program arrives:

1. the zygote forks the run's init into a new pid namespace; the init reports its pid (the
   kernel writes it into the message) and moves itself into the run's own ``pids`` + ``memory``
   cgroup (a *slot*, reused run after run but never by two runs at once), through the slot's
   ``cgroup.procs`` files, which this process opened and sent with the request;
2. the init makes fresh mount and cgroup namespaces and forks the program's process, which
   mounts new empty tmpfs ``/sandbox``, ``/tmp``, ``/dev/shm``, ``/code`` and a ``/proc`` of its
   own there, and waits for a job. Runs share their worker's empty network and ipc namespaces:
   the seccomp filter refuses ``socket``, System V IPC and POSIX message queues outright, so no
   run can leave anything in them. Without the filter each run gets network and ipc namespaces
   (and a loopback) of its own, as a cold run does.

A job then goes straight from this process to that waiting process (the zygote never sees it):
the program's process closes every other descriptor, installs the seccomp filter, restores the
interpreter to a fresh start's state and runs the cold launcher's own set-up and run (a fresh
uid, ``files=``, rlimits, the program). Output, limits, the wall-clock deadline and the verdict are
:mod:`mas_envs.sandbox.runner`'s own code. When the program's process exits, this process reads
its exit status and CPU time from its zombie (the init does not reap it) and kills the init: the
kernel kills whatever is left in the run's pid namespace (the same on a timeout). ``run`` returns
once no process of the run is left.

All of this happens on a manager thread, off the callers' paths; a caller only takes a ready
process and hands it its job. The pool starts on first use, sizes itself to the CPUs this
process may use (in a Ray worker: the CPUs Ray assigned it; ``MAS_SANDBOX_POOL``: ``auto``, a
number of workers, or ``off`` for cold runs), replaces a worker that dies, and goes down with
the process: at exit, and, when the process is killed, through the zygotes (their control
sockets close), bubblewrap's ``--die-with-parent`` and a watchdog process that kills and
removes every cgroup the process left. A pool that fails to
start or to pass the same probe a cold run passes is switched off, loudly, and runs go cold.
See ``docs/sandbox.md`` ("The warm pool").
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import dataclasses
import functools
import itertools
import logging
import marshal
import math
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings

from mas_envs.sandbox import cgroup, modes, runner, seccomp, uids
from mas_envs.sandbox.result import ExecResult, Job, Verdict

log = logging.getLogger("mas_envs.sandbox")

ENV_VAR = "MAS_SANDBOX_POOL"
"""``auto`` (default: a worker per usable CPU, 2 to 16; in a Ray worker, per CPU Ray assigned
it), ``off`` (cold runs), or a worker count."""
MAX_AUTO_SIZE = 16
READY_PER_WORKER = 2
"""Runs each worker keeps ready to start (each holds two idle processes and a slot cgroup)."""
TAKE_TIMEOUT_S = 10.0
"""How long a caller waits for a ready run before it runs its program cold instead."""
WORKER_PIDS = 8
WORKER_MEMORY = 256 << 20
"""Limits of a worker's own cgroup (bubblewrap, its init, the zygote, inits not yet moved)."""
DEFAULT_MEMORY = (512 << 20) + runner.MEMORY_OVERHEAD
FORCE_EMPTY_BYTES = 8 << 20
"""A slot still charged with more than this (page cache of an earlier run) is emptied first."""
MAX_FAILURES = 5
"""Failed preparations in a row after which the pool is switched off."""
_WORKER_CAPS = ("CAP_SYS_ADMIN",)
"""On top of a cold run's CAP_SETUID/SETGID: the zygote and each run's init make namespaces and
mounts; the program's process loses every capability when it switches uid (as in a cold run).
Without the seccomp filter, CAP_NET_ADMIN too: each run brings up its own loopback."""

_lock = threading.Lock()
_pool: _Pool | None = None
_off: str | None = None  # why the pool was switched off in this process


# ---------------------------------------------------------------- public face (used by entry)


def size() -> int:
    """Workers the pool has (or would have) here; 0 when ``MAS_SANDBOX_POOL=off``."""
    value = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if value in ("off", "0", "no", "false", "cold"):
        return 0
    if value in ("auto", "on", "yes", "true"):
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        claim = ray_cpus()
        if claim is not None:  # a Ray worker: the CPUs Ray gave it, not all of its node's
            usable = min(usable, math.ceil(claim))
        return max(2, min(usable, MAX_AUTO_SIZE))
    if value.isdigit():
        return int(value)
    raise ValueError(
        f"{ENV_VAR}={value!r} is not 'auto', 'off' or a number of workers (e.g. {ENV_VAR}=4)"
    )


def ray_cpus() -> float | None:
    """The CPUs Ray assigned to this process when it is a Ray worker (an actor or a task, e.g.
    an env worker's ``num_cpus``; 0 for an actor that claimed none); ``None`` anywhere else (a
    driver, or no Ray: this never imports ``ray``)."""
    ray = sys.modules.get("ray")
    if ray is None:
        return None
    try:
        if not ray.is_initialized():
            return None
        context = ray.get_runtime_context()
        if context.worker.mode != ray.WORKER_MODE:
            return None  # the driver: its pool is sized to the CPUs it may use
        return float(context.get_assigned_resources().get("CPU", 0.0))
    except Exception as exc:  # a Ray we do not understand: size as outside Ray, and say why
        log.warning("mas_envs.sandbox: could not read this Ray worker's CPUs: %r", exc)
        return None


def supports(mode: modes.Mode) -> bool:
    """Whether the pool can give ``mode``'s isolation (root, bubblewrap, uid switch, cgroups)."""
    return bool(mode.bwrap and mode.drop_uid and mode.cgroup and hasattr(os, "pidfd_open"))


def wanted(mode: modes.Mode) -> bool:
    """Whether programs of ``mode`` go through the pool now."""
    return _wanted_size(mode) > 0


def _wanted_size(mode: modes.Mode) -> int:
    """Workers the pool has for programs of ``mode`` now; 0 when they run cold."""
    return size() if _off is None and supports(mode) else 0


def run(mode: modes.Mode, job: Job) -> ExecResult | None:
    """Run ``job`` in the pool; ``None`` when the pool does not serve it (the caller runs it cold:
    ``MAS_SANDBOX_POOL=off``, an isolation the pool cannot give, or a pool that is off)."""
    want = _wanted_size(mode)  # (size() is worked out once a run)
    if not want:
        return None
    pool = _get(mode, want)
    return pool.run(job) if pool is not None else None


def active() -> bool:
    """Whether a pool is up in this process."""
    return _pool is not None and _pool.pid == os.getpid()


def shutdown() -> None:
    """Stop the pool (if any): its workers, processes and cgroups. The next run starts it again."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()


def _get(mode: modes.Mode, want: int) -> _Pool | None:
    global _pool, _off
    with _lock:
        if _off is not None:
            return None
        pool = _pool
        if pool is not None and (pool.pid, pool.mode, pool.size) == (os.getpid(), mode, want):
            if not pool.broken:
                return pool
            _switch_off(pool.broken)  # it broke while in use: say so, once, and go cold
        _pool = None
        if pool is not None and pool.pid == os.getpid():
            pool.close()
        if _off is not None:
            return None
        try:
            pool = _Pool(mode, want)
        except OSError as exc:
            _switch_off(f"it could not start: {exc}")
            return None
        failure = runner.probe(mode, run=functools.partial(_probe_run, pool))
        if failure is not None or pool.broken:
            pool.close()
            _switch_off(failure or pool.broken or "its workers failed")
            return None
        _pool = pool
        return pool


def _probe_run(pool: _Pool, _mode: modes.Mode, job: Job) -> ExecResult:
    res = pool.run(job)
    if res is None:
        return ExecResult(Verdict.sandbox_error, None, "", pool.broken or "no ready run", 0.0)
    return res


def _switch_off(why: str) -> None:
    global _off
    _off = why
    msg = (
        f"mas_envs.sandbox: the warm sandbox pool is off ({why}); programs run cold, with the "
        f"same isolation, about 20 ms slower each. {ENV_VAR}=off silences this."
    )
    log.warning(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=4)


def _forget_after_fork() -> None:
    # A forked child must not talk to its parent's workers: drop the pool without a word to them.
    global _pool, _lock
    _lock = threading.Lock()
    pool, _pool = _pool, None
    if pool is not None:
        pool.abandon()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(shutdown)


# ---------------------------------------------------------------- the pieces


class _Slot:
    """One run's ``pids`` + ``memory`` cgroup, reused run after run (never two at once)."""

    def __init__(self, name: str) -> None:
        # + 1: the run's init (the program's own processes get MAX_PROCESSES, as in a cold run)
        self.group = cgroup.RunCgroup(runner.MAX_PROCESSES + 1, DEFAULT_MEMORY, name=name)
        self.memory = DEFAULT_MEMORY
        # Each run's init writes itself into these (the kernel checks our credentials, the
        # opener's): no round trip to this process to move it.
        self.procs_fds: list[int] = []
        try:
            for d in self.group.dirs:
                self.procs_fds.append(os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY))
        except OSError:
            self.close()
            self.group.remove()
            raise

    def close(self) -> None:
        for fd in self.procs_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.procs_fds = []

    def set_memory(self, nbytes: int) -> None:
        if nbytes == self.memory:
            return
        files = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
        if nbytes > self.memory:
            files.reverse()  # memsw may never be below the plain limit
        for name in files:
            with contextlib.suppress(OSError) if "memsw" in name else contextlib.nullcontext():
                cgroup.write_file(os.path.join(self.group.dirs[1], name), str(nbytes))
        self.memory = nbytes

    def reset(self) -> bool:
        """Ready the slot for a new run: no process left, no earlier run's memory charged."""
        if self.group.pids() and not self.group.kill_all(deadline_s=1.0):
            return False
        mem = self.group.dirs[1]
        with contextlib.suppress(OSError, ValueError):
            if int(cgroup.read_file(f"{mem}/memory.usage_in_bytes")) > FORCE_EMPTY_BYTES:
                cgroup.write_file(os.path.join(mem, "memory.force_empty"), "0")
        self.set_memory(DEFAULT_MEMORY)
        return True


@dataclasses.dataclass(eq=False)
class _Child:
    """A run being prepared, ready, or running: its init, its channel and its slot."""

    worker: _Worker
    seq: bytes
    slot: _Slot
    chan: socket.socket
    since: float
    pidfd: int | None = None  # the init's
    init_pid: int = 0
    prog_pid: int = 0  # the program's process (its pid here, outside the run's namespace)
    prog_pidfd: int | None = None
    killed: bool = False  # we killed the run
    oom0: int = 0
    state: str = "starting"  # -> "ready" -> "running" (or "dropped")
    reaped: bool = False  # the zygote reaped its init: the slot holds no process of it
    busy: bool = False  # a caller is using it

    def kill(self) -> None:
        """SIGKILL the program's process and the init: the kernel kills every other process in
        the run's pid namespace as the init exits.

        The program's process first and directly, as a cold run's group kill does: the init's
        exit kills the rest asynchronously, and on a loaded machine a program still writing its
        output could otherwise finish (exit 0) before it is reached.
        """
        self.killed = True
        for fd in (self.prog_pidfd, self.pidfd):
            if fd is not None:
                with contextlib.suppress(ProcessLookupError, OSError):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)

    def end(self) -> None:
        """Return once no process of the run is left (its init may still be exiting)."""
        self.kill()
        if set(self.slot.group.pids()) <= {self.init_pid}:
            return  # the usual case: the program left nothing behind
        self.wait_gone()

    def wait_gone(self, timeout_s: float = 5.0) -> None:
        """Until the init (and with it every process of the run) is gone."""
        if self.pidfd is None:
            return
        ready, _, _ = select.select([self.pidfd], [], [], timeout_s)
        if not ready:  # never seen: a process the kernel cannot kill; the cgroup is the backstop
            log.warning("mas_envs.sandbox: a pool run's init did not exit; killing its cgroup")
            self.slot.group.kill_all()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.chan.close()
        for fd in (self.pidfd, self.prog_pidfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.pidfd = self.prog_pidfd = None


class _ChildProc:
    """What :func:`runner.collect` needs of a run's main process: its pipes and its exit."""

    def __init__(self, child: _Child, out_fd: int, err_fd: int) -> None:
        self.child = child
        self.stdout = open(out_fd, "rb", buffering=0)  # noqa: SIM115 - _collect closes them
        self.stderr = open(err_fd, "rb", buffering=0)  # noqa: SIM115
        self.returncode: int | None = None
        self.cpu_s = 0.0
        self.lost = False  # it died of a SIGKILL we did not send (its worker died)

    def poll(self) -> int | None:
        """The exit status as bubblewrap reports it (``128 + n`` for signal n), once known.

        The program's process stays a zombie until we end the run (its init does not reap it),
        so its ``/proc/<pid>/stat`` holds the kernel's account: the wait status and the CPU
        time of it and of the children it waited for, as a cold run's ``wait4`` reports them.
        """
        if self.returncode is not None:
            return self.returncode
        child = self.child
        assert child.prog_pidfd is not None
        if not select.select([child.prog_pidfd], [], [], 0)[0]:
            return None  # still running
        try:
            fields = cgroup.read_file(f"/proc/{child.prog_pid}/stat").rsplit(b")", 1)[1].split()
            status, ticks = int(fields[49]), sum(int(x) for x in fields[11:15])
            # Not reaped yet (so the file was this process's, not a later one's of that pid).
            signal.pidfd_send_signal(child.prog_pidfd, 0)
        except (OSError, ValueError, IndexError):  # reaped: its worker died
            status, ticks = signal.SIGKILL, 0
        self.cpu_s = ticks / _CLOCK_TICKS
        if not os.WIFSIGNALED(status):
            self.returncode = os.WEXITSTATUS(status)
        elif os.WTERMSIG(status) == signal.SIGKILL and child.killed:
            self.returncode = -signal.SIGKILL  # we killed it: as a cold run's killed bubblewrap
        else:
            self.returncode = 128 + os.WTERMSIG(status)
            self.lost = os.WTERMSIG(status) == signal.SIGKILL
        return self.returncode


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class _Lost(Exception):
    """A ready run was gone before its job reached it (its worker died): try another one."""


@dataclasses.dataclass(eq=False)
class _Worker:
    """One bubblewrap sandbox with a zygote in it."""

    index: int
    proc: subprocess.Popen[bytes]
    ctl: socket.socket
    group: cgroup.RunCgroup
    init_pidfd: int | None  # bubblewrap's init (pid 1 of the worker's pid namespace)
    children: dict[bytes, _Child] = dataclasses.field(default_factory=dict)
    ready: bool = False
    alive: bool = True
    since: float = dataclasses.field(default_factory=time.monotonic)


# ---------------------------------------------------------------- the pool


class _Pool:
    """Workers, their ready runs, and the manager thread that prepares runs (see module doc)."""

    def __init__(self, mode: modes.Mode, size: int) -> None:
        self.mode, self.size, self.pid = mode, size, os.getpid()
        self.prefix = f"{cgroup.PREFIX}{self.pid}-pool{next(_pool_ids)}-"
        self.filter = seccomp.x86_64_filter() if mode.seccomp else None
        self.cond = threading.Condition()
        self.ready: collections.deque[_Child] = collections.deque()
        self.free_slots: list[_Slot] = []
        self.slots: list[_Slot] = []
        self.workers: list[_Worker] = []
        self.todo: collections.deque[_Worker] = collections.deque()
        self.broken: str | None = None
        self.closing = False
        self.failures = 0
        self._names = itertools.count()
        self._seq = itertools.count(1)
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.sel.register(self.wake_r, selectors.EVENT_READ, self._on_wake)
        self.watchdog = _Watchdog(f"{cgroup.PREFIX}{self.pid}-")
        self.thread = threading.Thread(target=self._manage, name="mas-sandbox-pool", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------ callers' side

    def run(self, job: Job) -> ExecResult | None:
        """Run ``job`` on a ready run; ``None`` if none came (the caller runs it cold)."""
        start = time.monotonic()
        for _ in range(3):
            child = self._take(start + TAKE_TIMEOUT_S)
            if child is None:
                return None
            try:
                result, proc = self._run_on(child, job, start)
            except _Lost:
                child.kill()
                continue
            finally:
                self._finished(child)
            if proc is None or not (proc.lost and result.exit_code is None):
                return result
            # The run was lost before the program started (its worker died): nothing ran.
        return None

    def _take(self, deadline: float) -> _Child | None:
        with self.cond:
            while not self.ready:
                left = deadline - time.monotonic()
                if self.broken or self.closing or left <= 0:
                    return None
                self.cond.wait(left)
            child = self.ready.popleft()
            child.state, child.busy = "running", True
            self.todo.append(child.worker)  # the manager is woken once the job is on its way
        return child

    def _run_on(
        self, child: _Child, job: Job, start: float
    ) -> tuple[ExecResult, _ChildProc | None]:
        try:
            uid = uids.ALLOCATOR.acquire()
        except OSError as exc:
            note = f"mas-sandbox: no uid for the run: {exc}"
            return ExecResult(Verdict.sandbox_error, None, "", note, runner.since(start)), None
        try:
            return self._run_as(child, job, start, uid)
        finally:
            uids.ALLOCATOR.release(uid)  # _run_as returns once no process of the run is left

    def _run_as(
        self, child: _Child, job: Job, start: float, uid: int
    ) -> tuple[ExecResult, _ChildProc]:
        spec = {
            "code": job.code,
            "code_path": modes.SANDBOX_CODE,
            "files": dict(job.files or {}),
            "uid": uid,
            "gid": uid,
            "rlimits": runner.rlimits(self.mode, job),
            "status_fd": -1,
        }
        child.slot.set_memory((job.memory_mb << 20) + runner.MEMORY_OVERHEAD)
        spec_fd = runner.memfd("mas-sandbox-spec", marshal.dumps(spec))
        stdin_fd = runner.memfd("mas-sandbox-stdin", job.stdin.encode("utf-8", "replace"))
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        sent = [spec_fd, stdin_fd, out_w, err_w, status_w]
        try:
            socket.send_fds(child.chan, [b"J"], sent)
        except OSError:
            for fd in (out_r, err_r, status_r):
                os.close(fd)
            raise _Lost from None
        finally:
            for fd in sent:
                os.close(fd)
            self._wake()  # prepare the next run while this one runs
        proc = _ChildProc(child, out_r, err_r)
        try:
            out, err, stopped, started = runner.collect(
                proc,
                status_r,
                job.timeout_s,
                start,
                exited=lambda: proc.poll() is not None,
                kill=child.kill,
                exit_fd=child.prog_pidfd,
            )
            oom = child.slot.group.oom_kills() - child.oom0
        finally:
            os.close(status_r)
            child.end()
        assert proc.returncode is not None
        result = runner.make_result(
            self.mode, job, proc.returncode, started, stopped, oom, proc.cpu_s, out, err, start
        )
        return result, proc

    def _finished(self, child: _Child) -> None:
        child.close()
        with self.cond:
            child.busy = False
            if child.reaped:
                self.free_slots.append(child.slot)

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self.wake_w, b"x")

    # ------------------------------------------------------------ manager thread

    def _manage(self) -> None:
        try:
            for index in range(self.size):
                self._spawn(index)
            while not self.closing:
                for key, _ in self.sel.select(timeout=1.0):
                    # An earlier event of this batch may have unregistered (and closed) it: a
                    # dead worker's control socket is handled before its pipes' end of file.
                    if self.sel.get_map().get(key.fd) is key:
                        key.data(key.fileobj)
                self._check_stuck()
        except Exception as exc:  # a bug here must not hang every caller: go cold, loudly
            log.exception("mas_envs.sandbox: the pool's manager failed")
            self._break(f"its manager failed: {type(exc).__name__}: {exc}")
        finally:
            self._teardown()

    def _break(self, why: str) -> None:
        with self.cond:
            self.broken = self.broken or why
            self.cond.notify_all()

    def _spawn(self, index: int) -> None:
        name = f"{self.prefix}w{index}-{next(self._names)}"
        group = cgroup.RunCgroup(WORKER_PIDS, WORKER_MEMORY, name=name)
        ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        spec = {
            "launcher": modes.launcher_source(),
            "seccomp": self.filter,
            "ctl": theirs.fileno(),
            "tmpfs_bytes": runner.TMPFS_BYTES,
        }
        spec_fd = runner.memfd("mas-sandbox-pool-spec", marshal.dumps(spec))
        stdin_fd = runner.memfd("mas-sandbox-pool-stdin", b"")
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        child_fds = [spec_fd, info_w, block_r]  # (+ the options of bubblewrap's --args)
        try:
            argv = runner.with_args_fd(
                _worker_command(self.mode, spec_fd, (info_w, block_r)), child_fds
            )
            proc = subprocess.Popen(
                argv,
                stdin=stdin_fd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(*child_fds, theirs.fileno()),
                env={"PATH": "/usr/bin:/bin"},
                start_new_session=True,
            )
        except OSError:
            for fd in (info_r, block_w):
                os.close(fd)
            ctl.close()
            group.remove()
            raise
        finally:
            theirs.close()
            for fd in (stdin_fd, *child_fds):
                os.close(fd)
        init_pidfd = None
        try:
            deadline = time.monotonic() + runner.STARTUP_GRACE_S
            init_pid = runner.fill_cgroup(proc, group, info_r, block_w, deadline)
            if init_pid:
                with contextlib.suppress(OSError):
                    init_pidfd = os.pidfd_open(init_pid)
        finally:
            os.close(info_r)
            os.close(block_w)
        worker = _Worker(index, proc, ctl, group, init_pidfd)
        self.workers.append(worker)
        assert proc.stdout is not None and proc.stderr is not None
        self.sel.register(ctl, selectors.EVENT_READ, functools.partial(self._on_ctl, worker))
        for pipe in (proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
            self.sel.register(pipe, selectors.EVENT_READ, self._on_output)
        if not init_pid:
            self._worker_died(worker, "bubblewrap did not start")

    def _on_output(self, pipe) -> None:
        # Only the zygote and the runs' inits write here (never a program): their last words.
        try:
            data = pipe.read(65536)
        except (OSError, ValueError):  # ValueError: closed
            data = b""
        if data:
            log.warning("mas_envs.sandbox pool worker: %s", data.decode("utf-8", "replace")[-2000:])
        elif data is not None:
            self.sel.unregister(pipe)
            pipe.close()

    def _on_wake(self, _fd) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_r, 4096):
                pass
        while True:
            with self.cond:
                if not self.todo:
                    break
                worker = self.todo.popleft()
            self._replenish(worker)

    def _on_ctl(self, worker: _Worker, sock: socket.socket) -> None:
        try:
            msg = sock.recv(64)
        except OSError:
            msg = b""
        if not msg:
            self._worker_died(worker, "its zygote exited")
            return
        kind, seq = msg[:1], msg[1:]
        if kind == b"Z":
            worker.ready = True
            self._replenish(worker)
        elif kind in (b"R", b"E"):  # its init was reaped / could not be forked
            child = worker.children.pop(seq, None)
            if child is not None:
                why = "the zygote could not fork" if kind == b"E" else "a ready run's init exited"
                self._drop(child, why)  # (a run a caller has taken is left to the caller)
                self._reaped(child)
                self._replenish(worker)

    def _reaped(self, child: _Child) -> None:
        with self.cond:
            child.reaped = True
            if not child.busy:
                self.free_slots.append(child.slot)

    def _replenish(self, worker: _Worker) -> None:
        if not (worker.alive and worker.ready) or self.closing or self.broken:
            return
        pending = sum(c.state in ("starting", "ready") for c in worker.children.values())
        for _ in range(READY_PER_WORKER - pending):
            self._prepare(worker)

    def _slot(self) -> _Slot:
        while True:
            with self.cond:
                slot = self.free_slots.pop() if self.free_slots else None
            if slot is None:
                slot = _Slot(f"{self.prefix}s{next(self._names)}")
                self.slots.append(slot)
                return slot
            if slot.reset():
                return slot
            log.warning("mas_envs.sandbox: a pool slot kept processes; it is retired")

    def _prepare(self, worker: _Worker) -> None:
        slot = self._slot()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        seq = next(self._seq).to_bytes(4, "little")
        child = _Child(worker, seq, slot, ours, time.monotonic())
        try:
            socket.send_fds(worker.ctl, [b"F" + seq], [theirs.fileno(), *slot.procs_fds])
        except OSError:
            child.close()
            with self.cond:
                self.free_slots.append(slot)
            self._worker_died(worker, "its control socket failed")
            return
        finally:
            theirs.close()
        worker.children[seq] = child
        self.sel.register(ours, selectors.EVENT_READ, functools.partial(self._on_chan, child))

    def _on_chan(self, child: _Child, sock: socket.socket) -> None:
        try:
            msg, ancdata, _, _ = sock.recvmsg(256, socket.CMSG_SPACE(12))
        except OSError:
            msg, ancdata = b"", []
        kind = msg[:1]
        if kind == b"I":
            try:
                pid = _sender_pid(ancdata)
                child.init_pid = pid
                child.pidfd = os.pidfd_open(pid)
            except OSError as exc:
                self._drop(child, f"the run's init is gone: {exc}")
        elif kind == b"P":
            self.sel.unregister(sock)
            try:
                child.prog_pid = _sender_pid(ancdata)
                child.prog_pidfd = os.pidfd_open(child.prog_pid)
            except OSError as exc:
                self._drop(child, f"the run's program process is gone: {exc}")
                return
            child.oom0 = child.slot.group.oom_kills()
            self.failures = 0
            with self.cond:
                child.state = "ready"
                self.ready.append(child)
                self.cond.notify()
        else:
            why = msg[1:].decode("utf-8", "replace") if kind == b"E" else "its init exited"
            self._drop(child, f"preparing a run failed: {why}")

    def _drop(self, child: _Child, why: str, failed: bool = True) -> None:
        """A run that failed before a caller took it: forget it (its init is killed).

        A run a caller has taken is the caller's: it sees the failure itself. ``failed``: count
        it towards switching the pool off (not when its worker died: that counts once).
        """
        with self.cond:
            if child.state in ("dropped", "running"):
                return
            if child.state == "ready":
                self.ready.remove(child)
            child.state = "dropped"
        log.warning("mas_envs.sandbox: %s", why)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(child.chan)
        child.kill()
        child.close()
        if failed:
            self.failures += 1
            if self.failures >= MAX_FAILURES:
                self._break(why)

    def _worker_died(self, worker: _Worker, why: str) -> None:
        if not worker.alive:
            return
        worker.alive = False
        log.warning(
            "mas_envs.sandbox: pool worker %d is gone (%s); replacing it", worker.index, why
        )
        for fileobj in (worker.ctl, worker.proc.stdout, worker.proc.stderr):
            if fileobj is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(fileobj)
        worker.ctl.close()
        _stop(worker)
        for child in list(worker.children.values()):
            self._drop(child, "its worker is gone", failed=False)
            self._reaped(child)
        worker.children.clear()
        self.workers.remove(worker)
        self.failures += 1
        if self.failures >= MAX_FAILURES:
            self._break(f"its workers keep failing ({why})")
        elif not self.closing:
            try:
                self._spawn(worker.index)
            except OSError as exc:
                self._break(f"a worker could not be started: {exc}")

    def _check_stuck(self) -> None:
        now = time.monotonic()
        for worker in list(self.workers):
            if not worker.ready and now - worker.since > runner.STARTUP_GRACE_S:
                self._worker_died(worker, "its zygote did not start")
                continue
            for child in list(worker.children.values()):
                if child.state == "starting" and now - child.since > runner.STARTUP_GRACE_S:
                    self._drop(child, "preparing a run took too long")

    def _teardown(self) -> None:
        with self.cond:
            self.closing = True
            self.cond.notify_all()
            ready = list(self.ready)
            self.ready.clear()
        for child in ready:
            child.close()
        for worker in self.workers:
            worker.ctl.close()  # the zygote exits, and with it its sandbox
        for worker in self.workers:
            _stop(worker)
        for slot in self.slots:
            slot.group.kill_all()
            slot.close()
            slot.group.remove()
        self.sel.close()
        for fd in (self.wake_r, self.wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.watchdog.stop()

    # ------------------------------------------------------------ life cycle

    def close(self) -> None:
        """Stop the manager, the workers and every process of the pool; remove its cgroups."""
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        self._wake()
        if self.thread is not threading.current_thread():
            self.thread.join(30)

    def abandon(self) -> None:
        """In a forked child: close the parent's descriptors, touch nothing else."""
        fds = [self.wake_r, self.wake_w, self.watchdog.fd]
        for worker in self.workers:
            fds.append(worker.ctl.fileno())
            if worker.init_pidfd is not None:
                fds.append(worker.init_pidfd)
            fds += [p.fileno() for p in (worker.proc.stdout, worker.proc.stderr) if p]
            worker.proc.returncode = 0  # not our child: never wait for it
            for child in worker.children.values():
                fds.append(child.chan.fileno())
                if child.pidfd is not None:
                    fds.append(child.pidfd)
        for slot in self.slots:
            fds += slot.procs_fds
        with contextlib.suppress(OSError, ValueError):
            fds.append(self.sel.fileno())
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.watchdog.proc.returncode = 0


_pool_ids = itertools.count()


def _stop(worker: _Worker) -> None:
    """End a worker whose control socket is closed; return once none of its processes is left.

    Its zygote exits on the closed socket, bubblewrap's init then, and bubblewrap reaps it:
    killing them all at once instead would leave the init to the machine's init to reap.
    bubblewrap itself exits as soon as its init has *begun* to exit, while the kernel may still
    be killing the processes of the init's pid namespace (every run's init and program are in
    it, nested): so wait for the init itself (its pidfd is readable only once that namespace is
    empty), and remove the cgroups after that.
    """
    try:
        worker.proc.wait(2)
    except subprocess.TimeoutExpired:
        worker.group.kill_all()  # bubblewrap, its init, the zygote: the worker's pid ns goes
        worker.proc.wait()
    if worker.init_pidfd is not None:
        if not select.select([worker.init_pidfd], [], [], 10.0)[0]:
            log.warning("mas_envs.sandbox: a pool worker's init did not exit; killing its cgroup")
        os.close(worker.init_pidfd)
        worker.init_pidfd = None
    worker.group.kill_all()
    for pipe in (worker.proc.stdout, worker.proc.stderr):
        if pipe is not None:
            pipe.close()
    worker.group.remove()


def _sender_pid(ancdata: list) -> int:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= 12:
            return int.from_bytes(data[:4], "little", signed=True)
    raise OSError("the run's init sent no credentials")


def _worker_command(mode: modes.Mode, spec_fd: int, hold_fds: tuple[int, int]) -> list[str]:
    """A cold run's bubblewrap command, without the seccomp filter (each program installs it)
    and with the capabilities to make namespaces, running the zygote."""
    base = dataclasses.replace(mode, seccomp=False)
    cmd = modes.bwrap_command(base, runner.TMPFS_BYTES, spec_fd, hold_fds, None)
    cut = cmd.index("--")
    wanted = _WORKER_CAPS if mode.seccomp else (*_WORKER_CAPS, "CAP_NET_ADMIN")
    caps = [arg for cap in wanted for arg in ("--cap-add", cap)]
    zygote = [modes.interpreter(), *modes.PYTHON_FLAGS, "-c", zygote_source(), str(spec_fd)]
    return [*cmd[:cut], *caps, "--", *zygote]


@functools.cache
def zygote_source() -> str:
    """The text of :mod:`mas_envs.sandbox.zygote`."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zygote.py")
    with open(path, encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------- the watchdog

_WATCHDOG = """
import os, signal, sys, time
fd, prefix, parents = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
while True:
    try:
        data = os.read(fd, 4096)
    except InterruptedError:
        continue
    if b"q" in data:
        sys.exit(0)  # the owner closed its pool itself, and other runs of it may be going on
    if not data:
        break  # every write end is closed: the owner process is gone
for _ in range(200):
    left = 0
    for parent in parents:
        try:
            names = [n for n in os.listdir(parent) if n.startswith(prefix)]
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    pids = [int(p) for p in f.read().split()]
            except (OSError, ValueError):
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.rmdir(path)
            except OSError:
                left += 1
    if not left:
        break
    time.sleep(0.05)
"""


class _Watchdog:
    """A small process that outlives this one only to kill and remove what it left in cgroups."""

    def __init__(self, prefix: str) -> None:
        read, self.fd = os.pipe()
        parents = []
        for controller in cgroup.CONTROLLERS:
            with contextlib.suppress(OSError):
                parents.append(cgroup.parent_dir(controller))
        try:
            self.proc = subprocess.Popen(
                [
                    modes.interpreter(),
                    *modes.PYTHON_FLAGS,
                    "-c",
                    _WATCHDOG,
                    str(read),
                    prefix,
                    *parents,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(read,),
                start_new_session=True,
            )
        except OSError:
            os.close(self.fd)
            raise
        finally:
            os.close(read)

    def stop(self) -> None:
        """The pool was closed in order: exit without touching anything."""
        with contextlib.suppress(OSError):
            os.write(self.fd, b"q")
            os.close(self.fd)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
