"""The sandbox's data types: what a run asks for (:class:`Job`) and what it gives back.

Pure data, no I/O: the code env, the math env and the trainer build and read these.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Verdict(str, enum.Enum):
    """How a sandboxed program ended.

    A ``str`` enum, so ``result.verdict == "ok"`` and JSON logging work. The upper-case names
    (``Verdict.OK``) are aliases of the lower-case ones (``Verdict.ok``).
    """

    ok = "ok"
    """The program exited with status 0."""
    runtime_error = "runtime_error"
    """It exited with a non-zero status or was killed by a signal it caused (e.g. SIGSEGV)."""
    timeout = "timeout"
    """It ran past the wall-clock timeout or its CPU-time limit and was killed."""
    memory_limit = "memory_limit"
    """The kernel's OOM killer killed a process of the run's memory cgroup (only where cgroups are
    available). A ``MemoryError`` under the per-process address-space limit is the program's own
    exception, which it could raise by itself: ``runtime_error``, with the traceback."""
    output_limit = "output_limit"
    """It wrote more than the output limit to stdout or stderr and was killed."""
    sandbox_error = "sandbox_error"
    """The sandbox itself failed before the program started (details in ``stderr``)."""

    OK = "ok"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    SANDBOX_ERROR = "sandbox_error"


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one sandboxed run.

    Attributes:
        verdict: How the program ended (see :class:`Verdict`).
        exit_code: The exit status; negative (``-signal``) when a signal killed the program;
            ``None`` when the program never started (``sandbox_error``).
        stdout: What the program printed, decoded as UTF-8 (invalid bytes replaced), cut at the
            output limit with a note saying so.
        stderr: Its standard error (the head and the tail when long, with a note in between), or
            the sandbox's own message for ``sandbox_error``.
        wall_s: Wall-clock seconds from start to the end of the whole process tree.
    """

    verdict: Verdict
    exit_code: int | None
    stdout: str
    stderr: str
    wall_s: float


@dataclass(frozen=True)
class Job:
    """One program for :func:`mas_envs.sandbox.run_many`; the fields are ``run_python``'s arguments.

    Attributes:
        code: Python source to run as ``__main__``.
        stdin: Text given to the program's standard input (it sees end-of-file after it).
        timeout_s: Wall-clock limit in seconds; CPU time is limited to about the same.
        memory_mb: Memory limit in MiB (address space per process, and the whole run's memory
            where cgroups are available).
        files: Extra files written into the program's working directory, ``{relative path: text}``.
    """

    code: str
    stdin: str = ""
    timeout_s: float = 5.0
    memory_mb: int = 512
    files: dict[str, str] | None = None
