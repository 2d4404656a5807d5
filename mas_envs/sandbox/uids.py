"""Per-run uids that no two live runs on one machine ever share, whichever process runs them.

As root, each sandboxed run switches to a fresh unprivileged uid, so that the kernel counts its
processes (``RLIMIT_NPROC``) and no run can signal, trace or read the files of another. Two runs
with the same uid would share that count and could reach each other, so a uid must be unique
among the runs alive on the machine, not only in this process (trainer env workers, a test
suite and a benchmark may all run programs at once).

How: uids from :data:`UID_BASE` up are cut into blocks of :data:`BLOCK` uids. A process claims a
block by holding an exclusive ``flock`` on the block's lock file in :func:`lock_dir` (the kernel
drops the lock when the process dies, however it dies), and hands the block's uids to its runs,
one live run per uid; when every uid of its blocks is in use it claims one more. A forked child
gives up the blocks it inherited (the parent still holds them) and claims its own.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator

UID_BASE = 2_000_000_000
"""The first uid handed out (far above any real user's)."""
BLOCK = 1024
"""Uids per block claimed by one process."""
BLOCKS = 1_000_000
"""Blocks there are: uids stay below ``UID_BASE + BLOCKS * BLOCK`` (about 3.02e9 < 2**32)."""
_SEARCH = 4096
"""Blocks tried before giving up (more than that many processes running programs at once)."""


def lock_dir() -> str:
    """The directory of the block lock files, the same for every process of the machine."""
    if os.access("/run", os.W_OK | os.X_OK):
        return "/run/mas-sandbox/uid-blocks"
    return "/tmp/mas-sandbox-uid-blocks"


class UidAllocator:
    """Hands out uids for runs: :meth:`acquire` one per run, :meth:`release` it after the run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._blocks: list[tuple[int, int]] = []  # (lock fd, first uid)
        self._free: collections.deque[int] = collections.deque()
        self._busy: set[int] = set()

    def acquire(self) -> int:
        """A uid that no other live run on this machine has; give it back with :meth:`release`.

        Raises:
            OSError: No block could be claimed (the lock directory is not writable, or more
                than 4096 processes hold blocks).
        """
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the blocks are the parent's
                self._forget_inherited()
            if not self._free:
                self._claim()
            uid = self._free.popleft()
            self._busy.add(uid)
            return uid

    def release(self, uid: int) -> None:
        """Give back a uid from :meth:`acquire` once every process of its run is gone."""
        with self._lock:
            if uid in self._busy:
                self._busy.discard(uid)
                self._free.append(uid)  # last in line: reused as late as possible

    @contextlib.contextmanager
    def lease(self) -> Iterator[int]:
        """``with allocator.lease() as uid:`` :meth:`acquire`, then :meth:`release`."""
        uid = self.acquire()
        try:
            yield uid
        finally:
            self.release(uid)

    def _forget_inherited(self) -> None:
        # Closing our copies keeps the parent's locks: a flock belongs to the open file
        # description, which the parent's descriptors still hold.
        for fd, _ in self._blocks:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._reset()

    def _claim(self) -> None:
        directory = lock_dir()
        os.makedirs(directory, mode=0o700, exist_ok=True)
        start = (os.getpid() * 2_654_435_761 + len(self._blocks)) % BLOCKS
        held = {base for _, base in self._blocks}
        for i in range(_SEARCH):
            block = (start + i) % BLOCKS
            base = UID_BASE + block * BLOCK
            if base in held:
                continue
            fd = os.open(
                os.path.join(directory, f"block-{block}"),
                os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                0o600,
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._blocks.append((fd, base))
            self._free.extend(range(base, base + BLOCK))
            return
        raise OSError(f"no free block of sandbox uids among {_SEARCH} tried in {directory}")


ALLOCATOR = UidAllocator()
"""The process's allocator (the sandbox's runs and any pool of workers share it)."""


def _after_fork() -> None:  # the lock may have been held by another thread at the fork
    ALLOCATOR._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
