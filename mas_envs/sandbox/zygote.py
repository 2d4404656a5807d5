"""The code of a warm pool worker: a zygote that forks a fresh, isolated process per program.

:mod:`mas_envs.sandbox.pool` passes this file's *text* to ``python -s -S -B -c`` inside a
long-lived bubblewrap sandbox (the same mounts and namespaces as a cold run's, plus the
capabilities to make namespaces), with one argument: the descriptor of a ``marshal``-ed spec
(``launcher``: the launcher's source, ``seccomp``: the filter or ``None``, ``ctl``: the control
socket, ``tmpfs_bytes``). Three kinds of process run this code:

* the **zygote** (one per worker) never runs model code and never receives any: it gets
  requests over its control socket (``F`` + a sequence number, with three descriptors: the new
  run's channel to the host and, opened by the host, the ``cgroup.procs`` files of the run's
  ``pids`` and ``memory`` cgroups), forks the run's *init* into a new pid namespace, and reports
  when it has reaped it (``R``). Its memory holds no program, input or output, ever.
* the run's **init** (pid 1 of its own pid namespace) tells the host it exists (``I``; the kernel
  adds its pid to the message), moves itself into the run's own ``pids`` + ``memory`` cgroup,
  makes fresh mount, cgroup and network namespaces (the cgroup one rooted at that cgroup; an ipc
  one too when no seccomp filter refuses IPC objects), forks the program's process and
  reaps the run's orphans. It runs as little Python as it can (:func:`_init`): each page of the
  zygote's memory it writes is copied, and copied again by the program's process when that
  writes it too. It leaves the program's process, once it exits, a zombie: the host reads its
  exit status and CPU time from ``/proc`` and then kills the init, and the kernel kills whatever
  the run left in its pid namespace.
* the **program's process** (pid 2, as in a cold run; the init closed every descriptor but
  stdin/stdout/stderr and the channel) mounts new private tmpfs ``/sandbox``, ``/tmp``,
  ``/dev/shm`` and ``/code`` and a ``/proc`` of its pid namespace in the run's mount namespace,
  brings up the run's loopback (only in a network namespace of its own), installs the seccomp
  filter, runs the job's steps once on nothing (:func:`_warm_up`: the page copies they cause
  happen before the job, not on its path), puts the interpreter back as a fresh start leaves it
  (modules imported since, import caches, signal mask and handlers), says it is ready (``P``)
  and waits for its job (``J`` with five descriptors: spec, stdin, stdout, stderr, status pipe),
  which comes straight from the host: the zygote never sees it. Then it does exactly what a cold
  run's launcher does (:mod:`mas_envs.sandbox.launcher`'s own ``setup`` and ``run_program``: the
  program file, the uid switch, ``files=``, rlimits, the ``S`` marker, the program), at the same
  stack depth, so that a recursion limit is reached at the same depth as in a cold run, and
  exits as described at :func:`_shut_down`.

Only this file's code runs before the program: nothing of an earlier program exists in the
zygote, and every run is a fresh fork of it.
"""

import marshal
import os
import sys

_BASELINE = frozenset(sys.modules)  # what a fresh `python -s -S -B -c` has (a cold launcher too)
_PATH = list(sys.path)
_FINDERS = frozenset(sys.path_importer_cache) | {p for p in _PATH if p}  # not "": the cwd's

import _signal  # noqa: E402 - imported after the baseline on purpose (built in: already loaded)
import _socket  # noqa: E402
import atexit  # noqa: E402 - not in a fresh start's modules: kept here, gone from sys.modules
import ctypes  # noqa: E402
import resource  # noqa: E402 - os.wait4 needs it; a cold launcher imports it first thing
import select  # noqa: E402

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 4, 22, 38
SECCOMP_MODE_FILTER = 2
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
SETUP_FAILED = (
    70  # the launcher's status for a failed set-up (a sandbox_error, never the program's)
)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_SIGNALS = [n for n in range(1, _signal.NSIG) if n not in (_signal.SIGKILL, _signal.SIGSTOP)]


class _Quiet:
    """``contextlib.suppress(BaseException)`` without importing contextlib."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


def _baseline_signals() -> dict:
    handlers = {}
    for number in _SIGNALS:
        with _Quiet():
            handlers[number] = _signal.getsignal(number)
    return handlers


_HANDLERS = _baseline_signals()


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _recv(sock, max_fds: int) -> tuple:
    """One message and the descriptors sent with it (``(b"", [])`` at end of file)."""
    size = _socket.CMSG_SPACE(max_fds * 4)
    msg, ancdata, _, _ = sock.recvmsg(256, size)
    fds = []
    for level, kind, data in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, usable, 4)]
    return msg, fds


# ---------------------------------------------------------------------------- the zygote


def _read_spec(fd: int) -> dict:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return marshal.loads(b"".join(chunks))


def _fork_init(own_pid_ns: int) -> int:
    """Fork a child as pid 1 of a new pid namespace; ``-1`` if that failed."""
    _check(_libc.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid != 0:
        # Back to our own namespace for the children after this one.
        _check(_libc.setns(own_pid_ns, CLONE_NEWPID), "setns(pid)")
    return pid


def _zygote(spec: dict) -> list:
    """Serve fork requests until the host leaves; returns only in a new run's init: its channel
    and the run's two ``cgroup.procs`` descriptors."""
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    ctl = _socket.socket(fileno=spec["ctl"])
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY)
    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)
    inits: dict = {}  # pidfd -> (pid, sequence number)
    ctl.send(b"Z")
    while True:
        for fd, _ in poller.poll():
            if fd != ctl.fileno():
                pid, seq = inits.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                os.waitpid(pid, 0)
                ctl.send(b"R" + seq)
                continue
            msg, fds = _recv(ctl, 3)
            if not msg:  # the host is gone: so is the worker (bubblewrap's init follows us)
                os._exit(0)
            if msg[:1] != b"F" or len(fds) != 3:
                for extra in fds:
                    os.close(extra)
                continue
            seq = msg[1:]
            pid = _fork_init(own_pid_ns)
            if pid == 0:
                ctl.close()
                os.close(own_pid_ns)
                for pidfd in inits:
                    os.close(pidfd)
                return fds
            for fd in fds:
                os.close(fd)
            if pid < 0:
                ctl.send(b"E" + seq)
                continue
            pidfd = os.pidfd_open(pid)
            inits[pidfd] = (pid, seq)
            poller.register(pidfd, select.POLLIN)


# ---------------------------------------------------------------------------- the run's namespaces


def _mount(source, target: str, fstype, flags: int, data: str | None = None) -> None:
    src = source.encode() if source else None
    kind = fstype.encode() if fstype else None
    options = data.encode() if data else None
    _check(_libc.mount(src, target.encode(), kind, flags, options), f"mount {target}")


def _private_mounts(tmpfs_bytes: int) -> None:
    """Fresh tmpfs mounts (cwd, /tmp, /dev/shm, /code) and a /proc of this pid namespace."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    size = f"size={tmpfs_bytes}"
    for target, mode in (("/sandbox", "0777"), ("/tmp", "1777"), ("/dev/shm", "1777")):
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},{size}")
    _mount("tmpfs", "/code", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,{size}")
    _check(_libc.umount2(b"/proc", MNT_DETACH), "umount /proc")
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _mount("proc", "/proc", "proc", flags)  # as bubblewrap mounts it (the init is visible)
    for sub in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        if os.path.exists(sub):  # read-only, as bubblewrap leaves them
            _mount(sub, sub, None, MS_BIND | MS_REC)
            _mount(None, sub, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)


def _loopback_up() -> None:
    """Bring up ``lo`` in the new network namespace (bubblewrap does the same)."""
    sock = _libc.socket(_socket.AF_INET, _socket.SOCK_DGRAM, 0)
    if sock < 0:
        _check(-1, "socket")
    try:
        ifreq = ctypes.create_string_buffer(b"lo", 40)
        _check(_libc.ioctl(sock, SIOCGIFFLAGS, ifreq), "SIOCGIFFLAGS")
        flags = int.from_bytes(ifreq.raw[16:18], sys.byteorder) | IFF_UP
        ctypes.memmove(ctypes.addressof(ifreq) + 16, flags.to_bytes(2, sys.byteorder), 2)
        _check(_libc.ioctl(sock, SIOCSIFFLAGS, ifreq), "SIOCSIFFLAGS")
    finally:
        os.close(sock)


# ---------------------------------------------------------------------------- the run's init


def _init(fds: list, spec: dict) -> dict:
    """The run's init. Returns only in the program's process: its job's spec.

    Only the namespaces and the fork happen here. The init moves itself into the run's cgroups
    (through the ``cgroup.procs`` descriptors the host opened: the kernel checks the opener's
    credentials) and makes every namespace at once, with no round trip to the host. The mounts
    and the loopback, which the program's process has to do in the same namespaces anyway, are
    the program's process's (:func:`_program`): the Python code they run writes pages the
    program's process writes too, and done here each of those pages would be copied twice.
    """
    chan = _socket.socket(fileno=fds[0])
    try:
        chan.send(b"I")  # the host reads our pid from the message's credentials
        for procs in fds[1:]:
            os.write(procs, b"0")  # into the run's own pids and memory cgroups
        # The cgroup namespace is rooted at the slot. A network namespace per run even under
        # the filter: a socketpair can still be bound to an abstract Unix name, and abstract
        # names (and /proc/net/unix) belong to the network namespace, so a shared one let a
        # run park a message for the next run of its worker or talk to a concurrent one.
        flags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWNET
        if spec["seccomp"] is None:  # with the filter no System V or POSIX IPC object can
            flags |= CLONE_NEWIPC  # be made: nothing to keep apart
        _check(_libc.unshare(flags), "unshare")
        os.setsid()  # a cold run's program is in session and group 1 too
        os.closerange(3, chan.fileno())  # every descriptor but stdin/out/err and the channel
        os.closerange(chan.fileno() + 1, 1 << 30)
        pid = os.fork()
    except BaseException as exc:
        with _Quiet():
            chan.send(b"E" + f"{type(exc).__name__}: {exc}".encode()[:200])
        os._exit(1)
    if pid == 0:
        return _program(chan, spec)
    _reap(chan, pid)
    os._exit(0)  # not reached: _reap exits


def _reap(chan, main_pid: int) -> None:
    """Reap the run's orphans until the program's own process exits; leave that one a zombie.

    The host reads the zombie's exit status and CPU time (``/proc/<pid>/stat``, what the
    kernel counted) as soon as it exits, without waiting for us; then it ends the run by
    killing us (or closing the channel), and the kernel kills what is left in the namespace.
    """
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:  # cannot happen before the main process has exited
            break
        if info is None or info.si_pid == main_pid:
            break
        with _Quiet():
            os.waitpid(info.si_pid, 0)
    with _Quiet():
        chan.recv(1)
    os._exit(0)


# ---------------------------------------------------------------------------- the program's process


def _program(chan, spec: dict) -> dict:
    """Get ready, wait for the job, and return its spec with stdin/stdout/stderr in place.

    Everything that does not depend on the job happens before it arrives: the run's mounts and
    loopback, the seccomp filter and the interpreter put back as a cold launcher has it when
    its set-up starts (no module of this file's; the init closed every descriptor but the
    channel and stdin/out/err).
    """
    try:
        _private_mounts(spec["tmpfs_bytes"])
        if spec["seccomp"] is None:
            _loopback_up()
        os.chdir("/sandbox")
        if spec["seccomp"] is not None:
            _seccomp(spec["seccomp"])
        _warm_up()
        _fresh_interpreter()
    except BaseException as exc:
        with _Quiet():
            chan.send(b"E" + f"{type(exc).__name__}: {exc}".encode()[:200])
        os._exit(1)
    try:
        chan.send(b"P")
        msg, fds = _recv(chan, 5)
    except OSError:
        os._exit(0)
    if msg != b"J" or len(fds) != 5:
        os._exit(0)  # the host went away, or gave us nothing to run
    try:
        spec_fd, stdin_fd, out_fd, err_fd, status_fd = fds
        for target, fd in enumerate((stdin_fd, out_fd, err_fd)):
            os.dup2(fd, target)
            os.close(fd)
        job = _read_spec(spec_fd)
        chan.close()
        job["status_fd"] = status_fd
    except BaseException as exc:
        os.write(2, f"mas-sandbox: pool set-up failed: {type(exc).__name__}: {exc}\n".encode())
        os._exit(SETUP_FAILED)
    return job


def _seccomp(program: bytes) -> None:
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _Fprog(len(program) // 8, ctypes.addressof(buf))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(
        _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0),
        "prctl(PR_SET_SECCOMP)",
    )


def _warm_up() -> None:
    """Run the job's set-up and exit steps once on nothing, while there is no job yet.

    This process is a copy-on-write fork: the first write to each page of the zygote's memory
    (an object's reference count, a free block of the allocator, the C stack) copies that page,
    a fault that costs microseconds. Doing the launcher's steps (reading a spec, writing the
    program file, compiling and running a program, the rlimits, flushing the output) once
    here moves most of those copies off the job's path. Nothing of it is visible to the
    program: no output, the scratch file is removed, the rlimits are set to what they are,
    and :func:`_fresh_interpreter` runs after it.
    """
    scratch = "/code/.warm"
    _LAUNCHER["_write_text"](scratch, "pass\n")  # type: ignore[operator]
    os.unlink(scratch)
    marshal.loads(marshal.dumps({"code": "pass", "files": {"a": ""}, "rlimits": [("a", 1, 2)]}))
    source = "import sys\nprint(sum([len(str(x)) for x in range(3)]), end='')\nsys.exit(0)\n"
    compile(source, "/code/main.py", "exec")
    exec(compile("print(end='')", "/code/main.py", "exec"), {"__builtins__": __builtins__})
    type(sys)("__main__")
    for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE"):
        limit = getattr(resource, name)
        resource.setrlimit(limit, resource.getrlimit(limit))
    _flush(0)


def _fresh_interpreter() -> None:
    """Undo what this file did to the interpreter: a program sees what a fresh start gives.

    Modules: those of a fresh start, and ``resource`` (the launcher's set-up imports it). The
    import system's finders: those of the standard library's directories on ``sys.path`` (the
    same in every run), and a new one for this run's working directory.
    """
    for name in list(sys.modules):
        if name not in _BASELINE and name != "resource":
            del sys.modules[name]
    sys.path[:] = _PATH
    for path in list(sys.path_importer_cache):
        if path not in _FINDERS:
            del sys.path_importer_cache[path]
    # The finder of the (new, empty) working directory, as the launcher's first import makes it.
    sys.modules["_frozen_importlib_external"].PathFinder._path_importer_cache("")
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])
    for number, handler in _HANDLERS.items():
        if _signal.getsignal(number) != handler:
            _signal.signal(number, handler)


def main(job: dict) -> None:
    """The program's process: the launcher's own set-up and run (same stack depth as a cold run)."""
    try:
        _LAUNCHER["setup"](job)  # type: ignore[operator]
    except BaseException as exc:
        os.write(2, f"mas-sandbox: set-up failed: {type(exc).__name__}: {exc}\n".encode())
        os._exit(SETUP_FAILED)
    del job["files"]  # free the caller's files before the program runs
    try:
        _LAUNCHER["run_program"](job)  # type: ignore[operator]
        code = 0
    except SystemExit as exc:
        code = _exit_status(exc)
    _shut_down(code)


# ---------------------------------------------------------------------------- the program's exit
#
# A cold run ends with CPython's shutdown (Py_FinalizeEx). Here most of that work would tear
# down the zygote's heap, page by page copied on write: ~10 ms for nothing a caller can see. So
# the program's process does the steps a program can observe, in CPython's order, and exits:
# join non-daemon threads, run atexit callbacks, flush stdout and stderr (a failed stdout flush
# is exit status 120, as in CPython), clear the program's namespace (its objects' __del__ and
# the buffers of files it left open), flush again. Not done: the garbage collection of cycles
# and the teardown of other modules at exit (the language does not promise __del__ for those).


def _exit_status(exc: SystemExit) -> int:
    """The exit status CPython gives an uncaught ``SystemExit`` (printing a non-int code)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):  # C's (int)PyLong_AsLong(code): -1 past a long, else truncated
        return ((code + (1 << 31)) % (1 << 32)) - (1 << 31) if -(1 << 63) <= code < 1 << 63 else -1
    with _Quiet():
        sys.stderr.write(f"{code}\n")
    return 1


def _unraisable(obj: object) -> None:
    """Report the exception being handled as CPython's ``PyErr_WriteUnraisable(obj)`` does."""
    with _Quiet():
        sys.unraisablehook(_Unraisable(sys.exc_info()[1], obj))  # type: ignore[arg-type]


class _Unraisable:
    """What ``sys.unraisablehook`` gets (the shape of CPython's own argument)."""

    def __init__(self, exc: BaseException | None, obj: object) -> None:
        self.exc_type = type(exc) if exc is not None else None
        self.exc_value = exc
        self.exc_traceback = exc.__traceback__ if exc is not None else None
        self.err_msg = None
        self.object = obj


def _flush(status: int) -> int:
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None or getattr(stream, "closed", False):
            continue
        try:
            stream.flush()
        except BaseException:
            if name == "stdout":
                _unraisable(stream)
                status = 120
    return status


def _shut_down(code: int) -> None:
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            _unraisable(threading)
    # The callbacks are the interpreter's, whichever atexit module object registered them: no
    # import at exit (the import system's first run in this process: 0.3 ms of page copies).
    atexit._run_exitfuncs()
    status = _flush(code)
    main = sys.modules.get("__main__")
    if main is not None:
        names = main.__dict__
        for underscore in (True, False):  # as CPython clears a module at exit
            for name in list(names):
                if name != "__builtins__" and name.startswith("_") == underscore:
                    with _Quiet():
                        names[name] = None
    status = _flush(status)
    os._exit(status & 0xFF)


if __name__ == "__main__":
    _SPEC = _read_spec(int(sys.argv[1]))
    _LAUNCHER = {"__name__": "mas_sandbox_launcher", "__builtins__": __builtins__}
    exec(compile(_SPEC.pop("launcher"), "<string>", "exec"), _LAUNCHER)
    main(_init(_zygote(_SPEC), _SPEC))
