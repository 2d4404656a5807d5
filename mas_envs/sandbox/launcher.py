"""The first Python code of every sandboxed run; it sets the run up, then runs the program.

:mod:`mas_envs.sandbox.runner` passes this file's *text* to ``python -s -S -B -c`` with one
argument, the number of an inherited file descriptor holding the run's spec (a ``marshal``-ed
dict: ``code``, ``code_path``, ``files``, ``uid``, ``gid``, ``rlimits``, ``status_fd``). It runs
inside bubblewrap (or, in the fallback, directly) and:

1. writes the program to ``code_path`` (so tracebacks show its lines) while still privileged;
2. drops to the run's unprivileged uid/gid (when given), so ``RLIMIT_NPROC`` applies;
3. writes the caller's ``files`` into the working directory, as that user;
4. sets the rlimits (address space, CPU, file size, open files, processes, core dumps);
5. writes ``S`` to the status pipe: from here on, whatever happens is the program's doing;
6. runs the program as ``__main__`` in this interpreter (no second interpreter start-up).

It imports only built-in modules before the program starts (``marshal``, ``os``, ``sys``,
``resource``), so a user file named like a stdlib module cannot hijack the set-up. Any set-up
failure exits with status 70 and a ``mas-sandbox:`` message without writing ``S``, which the
parent reports as ``sandbox_error``.
"""

import marshal
import os
import sys

SETUP_FAILED = 70


def _read_spec(fd: int) -> dict:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return marshal.loads(b"".join(chunks))


def _write_text(path: str, text: str) -> None:
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)


def setup(spec: dict) -> None:
    import resource  # a built-in extension module: cannot be shadowed by a file in the cwd

    _write_text(spec["code_path"], spec["code"])
    uid, gid = spec["uid"], spec["gid"]
    if uid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
            raise OSError(f"could not switch to uid {uid} / gid {gid}")
    cwd = os.getcwd()
    for rel, text in spec["files"].items():
        _write_text(os.path.join(cwd, rel), text)
    for name, soft, hard in spec["rlimits"]:
        resource.setrlimit(getattr(resource, name), (soft, hard))


def run_program(spec: dict) -> None:
    code_path = spec["code_path"]
    main = type(sys)("__main__")
    main.__file__ = code_path
    sys.modules["__main__"] = main
    sys.argv = [code_path]
    os.write(spec["status_fd"], b"S")
    os.close(spec["status_fd"])
    try:
        exec(compile(spec["code"], code_path, "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:  # the program's own error: report it as Python would
        # Drop this launcher's frame so the traceback starts in the program.
        tb = exc.__traceback__
        exc.__traceback__ = tb.tb_next if tb is not None else None
        sys.excepthook(type(exc), exc, exc.__traceback__)
        sys.exit(1)


def main() -> None:
    try:
        spec = _read_spec(int(sys.argv[1]))
        setup(spec)
    except BaseException as exc:
        os.write(2, f"mas-sandbox: set-up failed: {type(exc).__name__}: {exc}\n".encode())
        os._exit(SETUP_FAILED)
    del spec["files"]  # free the caller's files before the program runs
    run_program(spec)


if __name__ == "__main__":
    main()
