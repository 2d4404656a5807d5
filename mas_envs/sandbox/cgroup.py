"""One cgroup (v1 ``pids`` + ``memory``) per sandboxed run.

Why cgroups: rlimits are per process (``RLIMIT_AS``) or per user (``RLIMIT_NPROC``, which the
kernel ignores for root), so only a cgroup bounds the *whole* process tree of one run: its process
count (a fork bomb stops at ``pids.max``) and its memory (the OOM killer acts inside the group).
It also lets us find and kill every process of the run, even ones that left the process group.

Only cgroup v1 with writable ``pids`` and ``memory`` hierarchies is used (the dev and CI machines);
elsewhere :func:`available` says no and the sandbox runs without cgroups (and says so).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time

ROOT = "/sys/fs/cgroup"
CONTROLLERS = ("pids", "memory")
PREFIX = "mas-sandbox-"

_counter = itertools.count()
_lock = threading.Lock()
_available: bool | None = None


def _own_path(controller: str) -> str:
    """This process's cgroup path in a v1 hierarchy, e.g. ``/process_api/abc`` (``/`` at root)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            if controller in names.split(","):
                return path
    raise OSError(f"no cgroup v1 {controller!r} hierarchy in /proc/self/cgroup")


def parent_dir(controller: str) -> str:
    return os.path.join(ROOT, controller) + _own_path(controller).rstrip("/")


def available() -> bool:
    """Whether per-run v1 ``pids`` and ``memory`` cgroups can be created here (probed once)."""
    global _available
    with _lock:
        if _available is None:
            _available = _probe()
        return _available


def _probe() -> bool:
    try:
        for controller in CONTROLLERS:
            parent = parent_dir(controller)
            limit = "pids.max" if controller == "pids" else "memory.limit_in_bytes"
            if not os.path.exists(os.path.join(parent, "cgroup.procs")):
                return False
            _sweep_stale(parent)
            probe = os.path.join(parent, f"{PREFIX}probe-{os.getpid()}")
            os.mkdir(probe)
            try:
                if not os.path.exists(os.path.join(probe, limit)):
                    return False
            finally:
                os.rmdir(probe)
        return True
    except OSError:
        return False


def _sweep_stale(parent: str) -> None:
    """Remove empty run cgroups left behind by sandbox owners that died (named by their pid)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            if not name.startswith(PREFIX):
                continue
            owner = name[len(PREFIX) :].split("-")[0]
            if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(parent, name))


class RunCgroup:
    """The cgroups of one run: create, join (in the child), kill everything, remove.

    Args:
        max_pids: Most tasks (processes and threads) the run may have at once.
        memory_bytes: Memory (RAM + swap) the whole run may use.
        name: The cgroup's name (default ``mas-sandbox-<pid>-<n>``); it must start with
            ``mas-sandbox-<pid>-`` so that a later process can sweep it once this one is gone.
    """

    def __init__(self, max_pids: int, memory_bytes: int, name: str | None = None) -> None:
        name = name or f"{PREFIX}{os.getpid()}-{next(_counter)}"
        self.dirs = [os.path.join(parent_dir(c), name) for c in CONTROLLERS]
        self._procs = [os.path.join(d, "cgroup.procs") for d in self.dirs]
        made: list[str] = []
        try:
            for d in self.dirs:
                os.mkdir(d)
                made.append(d)
            pids_dir, mem_dir = self.dirs
            write_file(os.path.join(pids_dir, "pids.max"), str(max_pids))
            write_file(os.path.join(mem_dir, "memory.limit_in_bytes"), str(memory_bytes))
            # Without a memsw limit the group would swap instead of hitting the limit.
            with contextlib.suppress(OSError):
                write_file(os.path.join(mem_dir, "memory.memsw.limit_in_bytes"), str(memory_bytes))
        except OSError:
            for d in reversed(made):
                with contextlib.suppress(OSError):
                    os.rmdir(d)
            raise

    def join(self) -> None:
        """Move the calling process into the run's cgroups.

        Runs in the child between fork and exec (``preexec_fn``), so it only makes system calls:
        no imports, no locks, no allocation-heavy Python.
        """
        self.add(os.getpid())

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into the run's cgroups."""
        data = str(pid).encode()
        for path in self._procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def pids(self) -> list[int]:
        """Pids of the processes still in the run's ``pids`` cgroup."""
        try:
            return [int(pid) for pid in read_file(self._procs[0]).split()]
        except (OSError, ValueError):
            return []

    def kill_all(self, deadline_s: float = 5.0) -> bool:
        """SIGKILL every process in the run until the group is empty; ``True`` when it is.

        A fork bomb cannot outrun this: ``pids.max`` caps what it can create, and every round
        kills what it created.
        """
        end = time.monotonic() + deadline_s
        while True:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > end:
                return False
            time.sleep(0.002)

    def oom_kills(self) -> int:
        """How many processes of the run the kernel's OOM killer killed."""
        try:
            for line in read_file(os.path.join(self.dirs[1], "memory.oom_control")).splitlines():
                key, _, value = line.partition(b" ")
                if key == b"oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def memory_failcnt(self) -> int:
        """How often the run hit its memory limit (the kernel then reclaims or OOM-kills)."""
        try:
            with open(os.path.join(self.dirs[1], "memory.failcnt")) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def remove(self) -> None:
        """Delete the run's cgroups (after :meth:`kill_all`); retries while the kernel reaps."""
        for d in self.dirs:
            for attempt in range(200):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if attempt % 20 == 19:
                        self.kill_all(deadline_s=0.5)
                    time.sleep(0.005)


def read_file(path: str) -> bytes:
    """A small kernel file's contents: open, one read, close (the pool reads a few a run; a
    buffered ``open()`` adds an fstat, an ioctl and a seek to each)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def write_file(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)
