"""The test harness that runs inside the sandbox: one program, many test cases, one sandbox run.

This file is *source*: :mod:`mas_envs.code.judge` sends its text to the sandbox as the program to
run, with the spec on stdin. It is also importable (its functions are pure Python), which keeps
it linted and lets tests read it, but the env never executes it in its own process.

Why one sandbox run per batch: starting an isolated interpreter costs tens of milliseconds,
a problem has 10-50 hidden tests, and a training step runs thousands of programs. The harness
compiles the program once and forks one child per test (fresh globals, per-test wall-clock timeout
that kills the child's process group, ``sys.exit``/``os._exit`` allowed, stdin from a file so
``open(0)`` and ``sys.stdin.buffer`` work as in a judge).

Tests are isolated from each other: the program, running on one test, cannot learn another
test's input (a hidden test's input must never reach the prompt through what the program prints
on a visible case), nor its result:

* Children are forked by a *zygote*, a process forked before the harness reads any test, so no
  child's memory holds another test (not even freed bytes a scan of ``/proc/self/mem`` could
  find). The harness hands a child only its own input, as a fresh anonymous file, with its
  output pipes, over a Unix socket (file descriptors, never test text, reach the zygote).
* The harness itself, which holds every test, is not dumpable: a child, running as the same user,
  cannot open its ``/proc/<pid>/fd`` (the spec's stdin), ``mem`` or ``environ``; the sandbox's
  seccomp filter refuses ``ptrace`` and ``process_vm_readv``.
* Nothing a child leaves behind survives into the next test: the harness is the subreaper of
  every process a child starts, and after each test kills them all (a process that called
  ``setsid`` included); in the sandbox's private file systems it empties the working
  directory, ``/tmp`` and ``/dev/shm``; the sandbox's seccomp filter refuses System V IPC and
  POSIX message queues (kernel objects that outlive their creator).

Expected outputs never reach a process that runs the program. For ``stdio`` and ``call`` tests
they never enter the sandbox: the harness only reports what the program printed or returned, and
the env compares in its own process. ``script`` tests (HumanEval asserts that are not a plain
``f(literal) == literal``) need the assert to run in the sandbox: a separate *checker* process
runs it, calling the function under test in the program's process (see "script tests" below;
no other name of the assert ever resolves to the program);
their return values are plain built-in values, so an object whose ``__eq__`` always says
``True`` does not pass, and a program that inspects its caller's frame finds no assert there.

Spec (stdin): a header line with the byte length of the JSON that follows it, ``{"program": str,
"fn_name": str|null, "setup": str, "timeout": float, "max_timeouts": int}``; then, read only after
the zygote exists, the tests as JSON: ``[{"kind": "stdio"|"call"|"script", "input": str,
"cap": int}]`` (``cap``: bytes of output allowed for that test).
Output: one line per test, ``@@R <json>`` with ``i``, ``status`` (``ok``, ``error``, ``timeout``,
``output_limit``, ``skipped``), ``out`` (stdout text; for ``call`` the ``repr`` of the plain return
value) and ``err`` (the tail of stderr or the error message).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from typing import Any

MARK = "@@R "
ERR_TAIL = 2000
SANDBOX_DIRS = ("/sandbox", "/tmp", "/dev/shm")
"""The sandbox's private, writable file systems (bubblewrap's tmpfs mounts; see modes.py)."""
ZYGOTE_LOST = "the harness's fork server died or hung (the program's doing?); test not run"

_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` rebuilt from exact built-in types; anything else raises ``TypeError``."""
    if depth > 100:
        raise TypeError("return value nested too deeply")
    t = type(value)
    if value is None or t in (bool, int, float, str, bytes, complex):
        return value
    if t in (list, tuple):
        items = [plain(v, depth + 1) for v in value]
        return items if t is list else tuple(items)
    if t in (set, frozenset):
        return {plain(v, depth + 1) for v in value}
    if t is dict:
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in value.items()}
    raise TypeError(f"return value of type {t.__name__} is not a plain built-in value")


def _resolve(ns: dict[str, Any], fn_name: str) -> Any:
    fn = ns.get(fn_name)
    if callable(fn) and not isinstance(fn, type):
        return fn
    cls = ns.get("Solution")
    if isinstance(cls, type) and hasattr(cls, fn_name):
        return getattr(cls(), fn_name)
    raise NameError(f"the program does not define a function named {fn_name!r}")


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------------------- the child


def _child(code: Any, kind: str, data_fd: int, res_fd: int, spec: dict[str, Any]) -> None:
    """Runs in the forked child (fds 0-2 already its own); never returns."""
    status = 0
    try:
        os.setpgid(0, 0)
        if kind == "script":
            _script_child(code, data_fd, res_fd, spec)
        # call input: read, then closed, before the program runs.
        text = _read_all(data_fd).decode("utf-8", "replace")
        os.close(data_fd)
        sys.path[:] = _PROGRAM_PATH or sys.path
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        name = "__main__" if kind == "stdio" else "__solution__"
        ns: dict[str, Any] = {"__name__": name, "__builtins__": __builtins__}
        exec(code, ns)
        if kind == "call":
            fn = _resolve(ns, spec["fn_name"])
            result = repr(plain(fn(*ast.literal_eval(text))))
            sys.stdout.flush()
            os.write(res_fd, result.encode("utf-8", "replace"))
    except SystemExit as e:
        if e.code not in (None, 0):
            status = 1
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
    except BaseException as e:
        status = 1
        # Skip this harness frame: the traceback starts in the program.
        traceback.print_exception(type(e), e, e.__traceback__.tb_next if e.__traceback__ else None)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(status)


# ---------------------------------------------------------------------------- script tests
#
# A script test's assert holds its expected values, so it never runs where the program runs: the
# test's child forks a *checker* before it loads the program (the checker inherits no program,
# and, like every child here, is not dumpable, so the program cannot read its memory), then runs
# the program and serves the checker's calls. The checker runs the problem's setup (trusted:
# HumanEval's helper functions from the prompt, the test module's prelude) and the assert with
# ``candidate`` standing for the function under test: each call sends its arguments to the
# program's process and gets back the plain return value (:func:`pack`: exact floats, nan and inf
# included). The program sees the arguments of its calls, never the values they are compared
# with, and no other name of the assert (``abs``, ``sorted``, ``poly``) resolves to the program.

_MAX_MESSAGE = 64 << 20


def pack(value: Any, depth: int = 0) -> Any:
    """A plain value as JSON data, exactly (the checker's wire format; :func:`unpack` inverts).

    JSON's own ``null``, booleans, strings, lists and machine-size integers stand for
    themselves; the rest are one-key objects: ``{"x": hex}`` a big int, ``{"f": hex}`` a float
    (nan, inf and -0.0 included), ``{"c": [re, im]}``, ``{"b": hex}`` bytes, ``{"t": [...]}`` a
    tuple, ``{"s": [...]}`` / ``{"fs": [...]}`` sets, ``{"d": [[k, v], ...]}`` a dict. Not
    ``marshal``: its decoder is not safe on bytes a program wrote.

    Raises:
        ValueError: ``value`` is not a plain built-in value (or nests deeper than 100).
    """
    t = type(value)
    if depth > 100:
        raise ValueError("value nested too deeply")
    if value is None or t is bool or t is str:
        return value
    if t is int:
        return value if -(1 << 62) < value < 1 << 62 else {"x": hex(value)}
    if t is float:
        return {"f": value.hex()}
    if t is complex:
        return {"c": [value.real.hex(), value.imag.hex()]}
    if t is bytes:
        return {"b": value.hex()}
    if t in (list, tuple, set, frozenset):
        items = [pack(v, depth + 1) for v in value]
        return items if t is list else {_SEQ_TAGS[t]: items}
    if t is dict:
        return {"d": [[pack(k, depth + 1), pack(v, depth + 1)] for k, v in value.items()]}
    raise ValueError(f"a value of type {t.__name__} is not a plain built-in value")


_SEQ_TAGS: dict[type, str] = {tuple: "t", set: "s", frozenset: "fs"}


def unpack(data: Any, depth: int = 0) -> Any:
    """The value :func:`pack` made ``data`` from; ``ValueError`` for anything else."""
    t = type(data)
    if depth > 100:
        raise ValueError("value nested too deeply")
    if data is None or t in (bool, int, str):
        return data
    if t is list:
        return [unpack(v, depth + 1) for v in data]
    if t is not dict or len(data) != 1:
        raise ValueError(f"not a packed value: {str(data)[:80]}")
    ((tag, body),) = data.items()
    if tag == "x" and type(body) is str:
        return int(body, 16)
    if tag == "f" and type(body) is str:
        return float.fromhex(body)
    if tag == "c" and type(body) is list and len(body) == 2:
        return complex(float.fromhex(body[0]), float.fromhex(body[1]))
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if tag in ("t", "s", "fs") and type(body) is list:
        items = [unpack(v, depth + 1) for v in body]
        return {"t": tuple, "s": set, "fs": frozenset}[tag](items)
    if tag == "d" and type(body) is list and all(type(kv) is list and len(kv) == 2 for kv in body):
        return {unpack(k, depth + 1): unpack(v, depth + 1) for k, v in body}
    raise ValueError(f"not a packed value: {str(data)[:80]}")


def _send(fd: int, obj: Any) -> None:
    data = json.dumps(pack(obj), ensure_ascii=True, allow_nan=False).encode()
    view = memoryview(struct.pack("<I", len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _recv(fd: int) -> Any:
    """The next message on ``fd``; ``None`` at end of file (the other side is gone)."""
    head = _read_exact(fd, 4)
    if head is None:
        return None
    (size,) = struct.unpack("<I", head)
    if size > _MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes is too long")
    body = _read_exact(fd, size)
    if body is None:
        return None
    return unpack(json.loads(body))


def _read_exact(fd: int, size: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < size:
        chunk = os.read(fd, size - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


_CONTROL_FLOW = (StopIteration, StopAsyncIteration)
"""Exceptions a call never raises in the checker: ``map(candidate, xs)`` would stop early."""


class _Remote:
    """In the checker: calls the function under test, in the program's process."""

    def __init__(self, req_fd: int, rep_fd: int) -> None:
        self.req_fd, self.rep_fd = req_fd, rep_fd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            _send(self.req_fd, (args, kwargs))
        except ValueError as e:  # pack: an argument that is not a plain value
            raise TypeError(f"cannot pass {args!r} to the program: {e}") from None
        except OSError:
            raise RuntimeError("the program stopped before the test was done") from None
        reply = _recv(self.rep_fd)
        if not isinstance(reply, tuple) or not reply:
            raise RuntimeError("the program stopped before the test was done")
        if reply[0] == "ok" and len(reply) == 2:
            return plain(reply[1])
        kind = getattr(builtins, str(reply[1]), None) if len(reply) == 3 else None
        if not (isinstance(kind, type) and issubclass(kind, Exception)) or issubclass(
            kind, _CONTROL_FLOW
        ):
            kind = RuntimeError
        raise kind(str(reply[-1]))


def _checker(spec: dict[str, Any], data_fd: int, res_fd: int, req_fd: int, rep_fd: int) -> None:
    """The checker process of a script test (see above); never returns.

    Its namespace holds the builtins, the problem's own setup (HumanEval: the prompt's helper
    functions such as ``poly`` and the test module's prelude) and the function under test as
    ``candidate`` (and by its name). No other name comes from the program: a program that
    defines ``abs``, ``sorted`` or ``poly`` changes its own process, never the assert.
    """
    status = 0
    try:
        text = _read_all(data_fd).decode("utf-8", "replace")
        os.close(data_fd)
        if _recv(rep_fd) != "loaded":  # the program has loaded and has the function
            raise RuntimeError("the program did not load (its error is above)")
        remote = _Remote(req_fd, rep_fd)
        ns: dict[str, Any] = {"__name__": "__check__", "__builtins__": builtins}
        exec(spec.get("setup") or "", ns)
        ns["candidate"] = ns[spec["fn_name"]] = remote
        exec(text, ns)
        os.write(res_fd, b"ok")
    except BaseException as e:
        status = 1
        traceback.print_exception(type(e), e, e.__traceback__.tb_next if e.__traceback__ else None)
    with contextlib.suppress(BaseException):
        sys.stderr.flush()
    os._exit(status)


def _script_child(code: Any, data_fd: int, res_fd: int, spec: dict[str, Any]) -> None:
    """A script test's child: fork the checker, then run the program and serve it; no return."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    checker = os.fork()
    if checker == 0:
        os.close(req_r)
        os.close(rep_w)
        _checker(spec, data_fd, res_fd, req_w, rep_r)
    for fd in (data_fd, res_fd, req_w, rep_r):
        os.close(fd)
    sys.path[:] = _PROGRAM_PATH or sys.path  # the checker keeps the read-only path
    status = 0
    try:
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        ns: dict[str, Any] = {"__name__": "__solution__", "__builtins__": __builtins__}
        exec(code, ns)
        fn = _resolve(ns, spec["fn_name"])
        _send(rep_w, "loaded")
        while (request := _recv(req_r)) is not None:
            args, kwargs = request
            try:
                reply: tuple[Any, ...] = ("ok", plain(fn(*args, **kwargs)))
            except BaseException as e:
                reply = ("error", type(e).__name__, f"{type(e).__name__}: {e}"[:2000])
            sys.stdout.flush()
            _send(rep_w, reply)
    except BaseException as e:
        status = 1
        traceback.print_exception(type(e), e, e.__traceback__.tb_next if e.__traceback__ else None)
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    for fd in (req_r, rep_w):
        with contextlib.suppress(OSError):
            os.close(fd)
    _, wstatus = os.waitpid(checker, 0)
    checked = os.WIFEXITED(wstatus) and os.WEXITSTATUS(wstatus) == 0
    os._exit(status or (0 if checked else 1))


# ---------------------------------------------------------------------------- the zygote


def _zygote(sock: socket.socket, code: Any, spec: dict[str, Any]) -> None:
    """Fork one child per request on ``sock``; report its pid, then its wait status. Never returns.

    A request is the test's kind and five file descriptors: stdin, data (the call/script input),
    stdout, stderr and result. The zygote never sees a test's text.
    """
    try:
        while True:
            msg, fds, _, _ = socket.recv_fds(sock, 64, 5)
            if not msg or len(fds) != 5:
                break
            kind = msg.decode()
            pid = os.fork()
            if pid == 0:
                sock.close()
                for target, fd in enumerate(fds[:3]):
                    os.dup2(fd, target)
                for fd in fds[:3]:
                    os.close(fd)
                _child(code, kind, fds[3], fds[4], spec)
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)  # also done by the child: whichever runs first
            for fd in fds:
                os.close(fd)
            sock.sendall(b"P%d\n" % pid)
            _, wstatus = os.waitpid(pid, 0)
            sock.sendall(b"W%d %d\n" % (pid, wstatus))
    except BaseException:
        pass
    os._exit(0)


class _Zygote:
    """The harness's end of the zygote: start a test's child, learn how it ended."""

    def __init__(self, code: Any, spec: dict[str, Any]) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            parent.close()
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)  # the spec's stdin, with every test, must not stay open here
            os.close(null)
            _zygote(child, code, spec)
        child.close()
        self.pid = pid
        self.sock = parent
        self.buf = b""

    def _line(self, deadline: float) -> bytes | None:
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(256)
            except OSError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def start(self, kind: str, fds: list[int], timeout: float) -> int | None:
        """The pid of a new child running a ``kind`` test on ``fds`` (``None``: zygote died)."""
        try:
            socket.send_fds(self.sock, [kind.encode()], fds)
        except OSError:
            return None
        line = self._line(time.monotonic() + timeout + 5.0)
        return int(line[1:]) if line and line[:1] == b"P" else None

    def wait(self, pid: int, timeout: float) -> int | None:
        """The wait status of child ``pid``, the one started last (``None``: the zygote died,
        hung, or answered out of step; then it cannot be trusted with another test)."""
        line = self._line(time.monotonic() + timeout)
        if not line or line[:1] != b"W":
            return None
        got, _, wstatus = line[1:].partition(b" ")
        return int(wstatus) if got == b"%d" % pid and wstatus else None

    def kill(self) -> None:
        """Stop the zygote for good (the tests not run yet fail)."""
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.sock.close()


# ---------------------------------------------------------------------------- the harness


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("harness-input") if hasattr(os, "memfd_create") else _tmpfile()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _tmpfile() -> int:  # pragma: no cover - not Linux
    import tempfile

    fd, path = tempfile.mkstemp()
    os.unlink(path)
    return fd


def _children() -> set[int]:
    """Pids of this process's children (orphans of the tests come here: we are the subreaper)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return {int(p) for p in f.read().split()}
    except OSError:
        pass
    kids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2 :].split()[1]) == me:
                kids.add(int(entry))
    return kids


def _sweep(keep: int) -> None:
    """Kill every process a test left behind (all our children but ``keep``, the zygote)."""
    for _ in range(10_000):  # each round kills one generation; process limits bound it
        kids = _children() - {keep}
        if not kids:
            return
        for pid in kids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in kids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _empty(path: str) -> bool:
    """Remove everything inside ``path``; ``False`` if something could not be removed.

    Iterative, one directory descriptor open at a time, never following symlinks and fixing the
    modes a test set: a tree a thousand levels deep (longer than any path) goes too.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        cur = os.open(path, flags)
    except OSError:
        return not os.path.lexists(path)
    ok = True
    names: list[str] = []  # the path from ``path`` down to ``cur``
    first, ok = _clear_files(cur)
    pending = [first]  # per level: subdirectories still to empty
    while True:
        if pending[-1]:
            sub = pending[-1].pop()
            try:
                with contextlib.suppress(OSError):
                    os.chmod(sub, 0o700, dir_fd=cur)
                child = os.open(sub, flags, dir_fd=cur)
            except OSError:
                ok = False
                continue
            os.close(cur)
            cur = child
            names.append(sub)
            subdirs, cleared = _clear_files(cur)
            pending.append(subdirs)
            ok &= cleared
            continue
        pending.pop()
        if not names:
            os.close(cur)
            return ok
        parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=cur)
        os.close(cur)
        cur = parent
        try:
            os.rmdir(names.pop(), dir_fd=cur)
        except OSError:
            ok = False


def _clear_files(fd: int) -> tuple[list[str], bool]:
    """Unlink every non-directory in the directory ``fd``; its subdirectories' names."""
    subdirs, ok = [], True
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry.name)
                    else:
                        os.unlink(entry.name, dir_fd=fd)
                except OSError:
                    ok = False
    except OSError:
        ok = False
    return subdirs, ok


def _private_dirs() -> list[str]:
    """The writable places a test could leave data in for the next one.

    In bubblewrap (cwd ``/sandbox``, a fresh pid namespace) ``/sandbox``, ``/tmp`` and
    ``/dev/shm`` are this run's own tmpfs mounts. In the rlimits fallback only the working
    directory is private (``/tmp`` is the host's: never touched).
    """
    cwd = os.getcwd()
    if cwd == SANDBOX_DIRS[0] and os.getpid() < 16:
        return list(SANDBOX_DIRS)
    return [cwd]


_PROGRAM_PATH: list[str] = []
"""The import path the program's process gets: the interpreter's own, the working directory
first, as in any run (the harness's processes import only from :func:`_read_only_path`)."""


def _writable(path: str) -> bool:
    """Whether this uid could put a module at ``path``: it, or where it would be created."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.access(path, os.W_OK)


def _read_only_path() -> list[str]:
    """``sys.path`` less every entry a program could write a module into (``""``: the working
    directory, ``/tmp``, anything missing under a writable directory). The harness, the zygote
    and a script test's checker import lazily (``import random`` in a test, ``math`` in a
    HumanEval prompt's helper, the standard library's own lazy imports) after the program has
    run: from the working directory, a ``random.py`` the program wrote would run inside the
    checker, where the verdict is made."""
    return [p for p in sys.path if p and os.path.isabs(p) and not _writable(p)]


def _harden() -> None:
    """Make this process unreadable by the tests (not dumpable) and their orphans' reaper."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:  # pragma: no cover - no ctypes: the uid switch already clears dumpable
        pass


class _Dirty(Exception):
    """A test left something in the private directories that could not be removed."""


class _Lost(Exception):
    """The zygote died, hung or answered out of step: no later test can be run in step."""


DIRTY = "not run: an earlier test left files the harness could not remove (no isolation)"
LEFT_FILES = "this test left files the harness could not remove; the tests after it do not run"


def run_one(
    zygote: _Zygote, test: dict[str, Any], spec: dict[str, Any], dirs: list[str]
) -> dict[str, Any]:
    """Run one test in a child of the zygote; return its status, output and error tail."""
    timeout, cap = float(spec["timeout"]), int(test["cap"])
    kind = test["kind"]
    text = test["input"].encode("utf-8", "surrogatepass")
    in_fd = _memfd(text if kind == "stdio" else b"")
    data_fd = _memfd(b"" if kind == "stdio" else text)
    pipes = [os.pipe() for _ in range(3)]  # stdout, stderr, result
    sent = [in_fd, pipes[0][1], pipes[1][1], data_fd, pipes[2][1]]
    pid = zygote.start(kind, sent, timeout)
    for fd in sent:
        os.close(fd)
    if pid is None:
        for r, _ in pipes:
            os.close(r)
        raise _Lost
    fds = {pipes[0][0]: 0, pipes[1][0]: 1, pipes[2][0]: 2}
    bufs = [bytearray(), bytearray(), bytearray()]
    status = ""
    deadline = time.monotonic() + timeout
    while fds:
        left = deadline - time.monotonic()
        if left <= 0:
            status = "timeout"
            break
        ready, _, _ = select.select(list(fds), [], [], left)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                del fds[fd]
                continue
            slot = fds[fd]
            bufs[slot] += chunk
            if slot == 1 and len(bufs[1]) > 4 * ERR_TAIL:
                del bufs[1][: -2 * ERR_TAIL]
            elif slot != 1 and len(bufs[slot]) > cap:
                status = "output_limit"
        if status:
            break
    if not status:
        # Its pipes are closed; it may still run (it closed them itself): wait to the deadline.
        wstatus = zygote.wait(pid, max(0.0, deadline - time.monotonic()))
        if wstatus is None:
            status = "timeout"
    if status:
        # Its process group, and itself: it may have joined another group (killpg misses it),
        # and it is the zygote's child, not ours, so the sweep below would not find it.
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(OSError):
                kill(pid, signal.SIGKILL)
        wstatus = zygote.wait(pid, 5.0)
    for fd in list(fds):
        os.close(fd)
    if wstatus is None:
        raise _Lost
    _sweep(zygote.pid)
    if not all([_empty(path) for path in dirs]):
        raise _Dirty
    out = bytes(bufs[2] if kind != "stdio" else bufs[0])[:cap]
    err = bytes(bufs[1][-ERR_TAIL:]).decode("utf-8", "replace")
    if not status:
        ok = os.WIFEXITED(wstatus) and os.WEXITSTATUS(wstatus) == 0
        if ok and kind != "stdio" and not bufs[2]:
            ok = False
            err = err or "the function returned nothing readable"
        if not ok and os.WIFSIGNALED(wstatus):
            sig = os.WTERMSIG(wstatus)
            err = (err + f"\nkilled by signal {sig} (memory limit or crash)").strip()
        status = "ok" if ok else "error"
    elif status == "timeout":
        err = (err + f"\ntime limit exceeded ({timeout:g} s)").strip()
    else:
        err = (err + f"\noutput limit exceeded ({cap} bytes)").strip()
    return {"status": status, "out": out.decode("utf-8", "replace"), "err": err}


def _read_header() -> dict[str, Any]:
    # Byte by byte up to the newline, then exactly the header: nothing of the tests is read yet.
    size = b""
    while (ch := os.read(0, 1)) not in (b"\n", b""):
        size += ch
    want = int(size)
    raw = bytearray()
    while len(raw) < want:
        chunk = os.read(0, want - len(raw))
        if not chunk:
            break
        raw += chunk
    return json.loads(raw.decode("utf-8"))


def main() -> None:
    spec = _read_header()
    emit = sys.stdout.write
    try:
        code = compile(spec["program"], "<program>", "exec")
    except BaseException as e:
        msg = "".join(traceback.format_exception_only(type(e), e))[-ERR_TAIL:]
        tests = json.loads(_read_all(0).decode("utf-8"))
        for i in range(len(tests)):
            emit(MARK + json.dumps({"i": i, "status": "error", "out": "", "err": msg}) + "\n")
        return
    _harden()
    _PROGRAM_PATH[:] = sys.path
    sys.path[:] = _read_only_path()  # for this process, the zygote and every checker
    dirs = _private_dirs()
    for path in dirs:
        _empty(path)
    sys.stdout.flush()
    zygote = _Zygote(code, spec)
    # Only now, with the zygote forked, do the tests enter this process.
    tests = json.loads(_read_all(0).decode("utf-8"))
    os.close(0)
    timeouts = 0
    dirty = lost = False
    for i, test in enumerate(tests):
        if timeouts >= spec["max_timeouts"]:
            res = {"status": "skipped", "out": "", "err": f"not run: {timeouts} earlier timeouts"}
        elif dirty:
            res = {"status": "error", "out": "", "err": DIRTY}
        elif lost:
            res = {"status": "error", "out": "", "err": ZYGOTE_LOST}
        else:
            try:
                res = run_one(zygote, test, spec, dirs)
            except _Dirty:
                # This test's own result stands for nothing: it may have read what is left.
                dirty = True
                res = {"status": "error", "out": "", "err": LEFT_FILES}
            except _Lost:
                # Out of step with the zygote (or without one): stop it and what it started;
                # this test and the rest fail rather than run with another test's pipes.
                lost = True
                zygote.kill()
                _sweep(-1)
                res = {"status": "error", "out": "", "err": ZYGOTE_LOST}
            timeouts += res["status"] == "timeout"
        emit(MARK + json.dumps({"i": i, **res}) + "\n")
        sys.stdout.flush()
    zygote.sock.close()
    _sweep(-1)


if __name__ == "__main__":
    main()
