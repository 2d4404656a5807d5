"""Run model-written Python safely: a separate, isolated, limited process per program.

::

    from mas_envs.sandbox import run_python, run_many, Job, isolation
    res = run_python("print(sum(map(int, input().split())))", stdin="2 3", timeout_s=2)
    res.verdict, res.stdout      # (Verdict.ok, '5\\n')
    isolation()                  # 'bwrap+uid+cgroup' on the dev/CI machines

What a program gets: the same Python version as the caller with its standard library only, a
private writable working directory (``files=`` are written there), stdin as given, no network, no
host files beyond the read-only interpreter and ``/usr``, no inherited environment variables, an
unprivileged uid, and limits on wall time, CPU time, memory, processes, file size, open files
and output. See ``docs/sandbox.md`` for what is and is not isolated in each mode.

Where the sandbox runs as root with bubblewrap and cgroups, programs go through a warm pool
(:mod:`mas_envs.sandbox.pool`): each starts as a fresh fork of a zygote, with the same isolation,
in a few milliseconds instead of tens; ``MAS_SANDBOX_POOL=off`` runs every program cold.
:mod:`mas_envs.sandbox.entry` is where each program goes warm or cold.

Importing this package is cheap (standard library only); nothing starts until the first run.
"""

from mas_envs.sandbox.entry import run_many, run_python
from mas_envs.sandbox.result import ExecResult, Job, Verdict
from mas_envs.sandbox.runner import MAX_PROCESSES, STDERR_LIMIT, STDOUT_LIMIT, isolation

__all__ = [
    "MAX_PROCESSES",
    "STDERR_LIMIT",
    "STDOUT_LIMIT",
    "ExecResult",
    "Job",
    "Verdict",
    "isolation",
    "run_many",
    "run_python",
]
