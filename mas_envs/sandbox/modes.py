"""Which isolation a run gets, and the command line that gives it.

Modes, from strongest to weakest (``isolation()`` returns the name):

* ``bwrap+uid+cgroup+seccomp`` (running as root, e.g. the dev and CI machines): bubblewrap
  in privileged mode with fresh network, pid, ipc, uts and cgroup namespaces and a new root that
  holds only ``/usr``, the interpreter's prefix (read-only), ``/proc``, a minimal ``/dev`` and
  private tmpfs (``/sandbox`` = cwd, ``/tmp``, ``/dev/shm``); the program then drops to a fresh
  unprivileged uid (so the kernel applies ``RLIMIT_NPROC``) and runs in its own ``pids`` +
  ``memory`` cgroup, under a seccomp filter (:mod:`mas_envs.sandbox.seccomp`, x86-64 only).
  Why not ``--unshare-user --uid 65534``: as root that maps the sandbox user to uid 0 outside,
  and the kernel skips the process-count limit for uid 0; a fork bomb would not stop.
* ``bwrap+userns[+cgroup]`` (not root): the same, in an unprivileged user namespace.
* ``rlimits[+uid][+cgroup]`` / ``rlimits-only``: no bubblewrap. The program runs directly with
  rlimits, a cleared environment, a new session and a temporary cwd; the host's files and the
  network are *not* hidden. This fallback warns loudly once.

``MAS_SANDBOX_ISOLATION`` chooses: ``auto`` (default: the strongest that works), ``bwrap``
(require bubblewrap; fail otherwise) or ``rlimits-only`` (force the fallback, no cgroups either).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass

ENV_VAR = "MAS_SANDBOX_ISOLATION"
CHOICES = ("auto", "bwrap", "rlimits-only")

SANDBOX_CWD = "/sandbox"
SANDBOX_CODE = "/code/main.py"

# The only variables a program sees. PYTHONHASHSEED makes set/dict order of str reproducible.
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
    "MALLOC_ARENA_MAX": "2",  # glibc reserves 64 MiB of address space per arena and thread
}

# -s: no user site; -S: no site (no site-packages, no .pth code); -B: no .pyc writes.
# Not -I/-E: those would ignore PYTHONHASHSEED, and the environment is ours anyway.
PYTHON_FLAGS = ("-s", "-S", "-B")


@dataclass(frozen=True)
class Mode:
    """One way of running a program.

    Attributes:
        bwrap: Path of the bubblewrap binary, or ``None`` for the rlimits fallback.
        drop_uid: Whether the program switches to a fresh unprivileged uid (root only).
        userns: Whether bubblewrap runs unprivileged in a user namespace (not root).
        cgroup: Whether each run gets its own ``pids`` + ``memory`` cgroup.
        seccomp: Whether bubblewrap installs :mod:`mas_envs.sandbox.seccomp`'s filter.
    """

    bwrap: str | None
    drop_uid: bool
    userns: bool
    cgroup: bool
    seccomp: bool = False

    @property
    def name(self) -> str:
        """``bwrap+uid+cgroup``, ``bwrap+userns``, ``rlimits+cgroup``, ``rlimits-only``..."""
        parts = ["bwrap" if self.bwrap else "rlimits"]
        if self.drop_uid:
            parts.append("uid")
        if self.userns:
            parts.append("userns")
        if self.cgroup:
            parts.append("cgroup")
        if self.seccomp:
            parts.append("seccomp")
        return "+".join(parts) if len(parts) > 1 or self.bwrap else "rlimits-only"

    @property
    def limits_processes(self) -> bool:
        """Whether a fork bomb is stopped (a cgroup, or a uid the kernel counts)."""
        return self.cgroup or self.drop_uid or self.userns or os.geteuid() != 0


def requested() -> str:
    """The value of ``MAS_SANDBOX_ISOLATION`` (``auto`` when unset), checked."""
    value = os.environ.get(ENV_VAR, "auto").strip() or "auto"
    if value not in CHOICES:
        raise ValueError(f"{ENV_VAR}={value!r} is not one of {', '.join(CHOICES)}")
    return value


def find_bwrap() -> str | None:
    """The bubblewrap binary, or ``None`` when it is not installed."""
    return shutil.which("bwrap") or (
        "/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None
    )


def interpreter() -> str:
    """The real interpreter binary (a venv's ``python`` is a symlink to it)."""
    return os.path.realpath(sys.executable)


def interpreter_roots() -> list[str]:
    """Directories the interpreter needs (binary, stdlib, libpython), outside ``/usr``."""
    exe = interpreter()
    roots = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    if not any(exe.startswith(r + "/") for r in roots):
        roots.add(os.path.dirname(exe))
    keep = [r for r in sorted(roots) if r != "/usr" and not r.startswith("/usr/")]
    # Drop roots nested in another root: one bind covers them.
    return [r for r in keep if not any(r != o and r.startswith(o + "/") for o in keep)]


def world_readable(path: str) -> bool:
    """Whether an unprivileged user can reach ``path`` (every ancestor is o+x, itself o+r)."""
    parts = path.rstrip("/").split("/")
    for i in range(2, len(parts) + 1):
        try:
            mode = os.stat("/".join(parts[:i])).st_mode
        except OSError:
            return False
        if not mode & 0o001:
            return False
    try:
        return bool(os.stat(path).st_mode & 0o004)
    except OSError:
        return False


def bwrap_command(
    mode: Mode,
    tmpfs_bytes: int,
    spec_fd: int,
    hold_fds: tuple[int, int] | None = None,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The bubblewrap command line that runs the launcher for one run.

    With ``hold_fds = (info_fd, block_fd)`` bubblewrap reports its namespace init's pid on
    ``info_fd`` and waits, before starting the launcher, until a byte arrives on ``block_fd``.
    ``seccomp_fd`` holds a compiled seccomp filter for the launcher and the program.
    """
    assert mode.bwrap is not None
    cmd = [
        mode.bwrap,
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    env = {**BASE_ENV, "HOME": SANDBOX_CWD, "TMPDIR": "/tmp"}
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    cmd += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            cmd += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            cmd += ["--ro-bind", top, top]
    # The dynamic loader's cache: the only file of /etc a Python start-up reads.
    cmd += ["--perms", "0755", "--dir", "/etc"]
    cmd += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    made: set[str] = set()
    for root in interpreter_roots():
        # Create the parents world-readable: bwrap would copy /root's 0700 and lock us out.
        parts = root.split("/")
        for i in range(2, len(parts)):
            parent = "/".join(parts[:i])
            if parent not in made:
                made.add(parent)
                cmd += ["--perms", "0755", "--dir", parent]
        cmd += ["--ro-bind", root, root]
    size = str(tmpfs_bytes)
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    # No pseudo-terminals: bubblewrap's /dev/ptmx leads into a devpts of its own, but every
    # pty counts against the host's global budget (kernel.pty.max), so a run could hold
    # hundreds. An empty tmpfs over /dev/pts leaves /dev/ptmx dangling (ENOENT).
    cmd += ["--perms", "0755", "--size", "4096", "--tmpfs", "/dev/pts"]
    cmd += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
    # POSIX semaphores and shared memory (multiprocessing's locks) live in /dev/shm.
    cmd += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
    cmd += ["--perms", "0777", "--size", size, "--tmpfs", SANDBOX_CWD]
    cmd += ["--perms", "0755", "--dir", os.path.dirname(SANDBOX_CODE)]
    cmd += ["--chdir", SANDBOX_CWD]
    if mode.drop_uid:
        # Only to switch to the run's uid; setuid clears every capability afterwards.
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    if mode.userns:
        cmd += ["--unshare-user"]
    if hold_fds is not None:
        cmd += ["--info-fd", str(hold_fds[0]), "--block-fd", str(hold_fds[1])]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    return [*cmd, "--", *python_command(spec_fd)]


def split_options(cmd: list[str]) -> tuple[list[str], bytes]:
    """``cmd`` as ``bwrap --args FD -- COMMAND`` plus the options to write into ``FD``.

    bubblewrap's namespace init (pid 1 of the sandbox) is a copy of bubblewrap with its command
    line, which any program can read in ``/proc/1/cmdline``: with ``--args`` it shows no mount
    layout, host path or descriptor. Returns ``(argv with "{fd}" for the descriptor, options
    as NUL-separated bytes)``; a ``cmd`` without ``--`` comes back unchanged, with no options.
    """
    if "--" not in cmd:
        return cmd, b""
    cut = cmd.index("--")
    options = b"".join(arg.encode() + b"\0" for arg in cmd[1:cut])
    return [cmd[0], "--args", "{fd}", *cmd[cut:]], options


def python_command(spec_fd: int) -> list[str]:
    """``python -s -S -B -c <launcher> <spec fd>``."""
    return [interpreter(), *PYTHON_FLAGS, "-c", launcher_source(), str(spec_fd)]


_launcher: str | None = None


def launcher_source() -> str:
    """The text of :mod:`mas_envs.sandbox.launcher` (read once)."""
    global _launcher
    if _launcher is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launcher.py")
        with open(path, encoding="utf-8") as f:
            _launcher = f.read()
    return _launcher
