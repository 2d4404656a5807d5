"""The test harness that runs inside the sandbox: one program, many test cases, one process.

This file is *source*: :mod:`mas_envs.code.judge` sends its text to the sandbox as the program to
run, with a JSON spec on stdin. It is also importable (its functions are pure Python), which keeps
it linted and lets tests read it, but the env never executes it in its own process.

Why one sandbox process per batch: starting an isolated interpreter costs tens of milliseconds,
a problem has 10-50 hidden tests, and a training step runs thousands of programs. The harness
compiles the program once and forks one child per test (fresh globals, per-test wall-clock timeout
that kills the child's process group, ``sys.exit``/``os._exit`` allowed, stdin from a file so
``open(0)`` and ``sys.stdin.buffer`` work as in a judge).

Expected outputs never enter the sandbox for ``stdio`` and ``call`` tests: the harness only reports
what the program printed or returned, and the env compares in its own process. So a program that
tampers with the harness can only forge its own outputs, which it could print anyway. ``script``
tests (HumanEval asserts that are not a plain ``f(literal) == literal``) run their assert next to
the program, as HumanEval's own harness does; the function's return values are first converted to
plain built-in types, so an object whose ``__eq__`` always says ``True`` does not pass.

Spec (stdin, JSON): ``{"program": str, "fn_name": str|null, "setup": str, "timeout": float,
"max_timeouts": int, "tests": [{"kind": "stdio"|"call"|"script", "input": str, "cap": int}]}``
(``cap``: bytes of output allowed for that test).
Output: one line per test, ``@@R <json>`` with ``i``, ``status`` (``ok``, ``error``, ``timeout``,
``output_limit``, ``skipped``), ``out`` (stdout text; for ``call`` the ``repr`` of the plain return
value) and ``err`` (the tail of stderr or the error message).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import select
import signal
import sys
import time
import traceback
from typing import Any

MARK = "@@R "
ERR_TAIL = 2000


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


def _child(code: Any, test: dict[str, Any], spec: dict[str, Any], res_fd: int) -> None:
    """Runs in the forked child; never returns."""
    status = 0
    try:
        os.setpgid(0, 0)
        sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        kind = test["kind"]
        name = "__main__" if kind == "stdio" else "__solution__"
        ns: dict[str, Any] = {"__name__": name, "__builtins__": __builtins__}
        exec(code, ns)
        if kind == "call":
            fn = _resolve(ns, spec["fn_name"])
            result = repr(plain(fn(*ast.literal_eval(test["input"]))))
            sys.stdout.flush()
            os.write(res_fd, result.encode("utf-8", "replace"))
        elif kind == "script":
            inner = _resolve(ns, spec["fn_name"])
            ns["candidate"] = lambda *a, **k: plain(inner(*a, **k))
            exec(spec.get("setup") or "", ns)
            exec(test["input"], ns)
            os.write(res_fd, b"ok")
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


def run_one(code: Any, test: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Run one test in a forked child; return its status, output and error tail."""
    timeout, cap = float(spec["timeout"]), int(test["cap"])
    in_path = "harness_stdin.txt"
    with open(in_path, "wb") as f:
        f.write(test["input"].encode("utf-8") if test["kind"] == "stdio" else b"")
    in_fd = os.open(in_path, os.O_RDONLY)
    pipes = [os.pipe() for _ in range(3)]  # stdout, stderr, result
    pid = os.fork()
    if pid == 0:
        os.dup2(in_fd, 0)
        os.dup2(pipes[0][1], 1)
        os.dup2(pipes[1][1], 2)
        for r, w in pipes:
            os.close(r)
            if w != pipes[2][1]:
                os.close(w)
        os.close(in_fd)
        _child(code, test, spec, pipes[2][1])
    os.close(in_fd)
    for _, w in pipes:
        os.close(w)
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
    if status:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    for fd in list(fds):
        os.close(fd)
    _, wstatus = os.waitpid(pid, 0)
    out = bytes(bufs[2] if test["kind"] != "stdio" else bufs[0])[:cap]
    err = bytes(bufs[1][-ERR_TAIL:]).decode("utf-8", "replace")
    if not status:
        ok = os.WIFEXITED(wstatus) and os.WEXITSTATUS(wstatus) == 0
        if ok and test["kind"] != "stdio" and not bufs[2]:
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


def main() -> None:
    spec = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    emit = sys.stdout.write
    try:
        code = compile(spec["program"], "<program>", "exec")
    except BaseException as e:
        msg = "".join(traceback.format_exception_only(type(e), e))[-ERR_TAIL:]
        for i in range(len(spec["tests"])):
            emit(MARK + json.dumps({"i": i, "status": "error", "out": "", "err": msg}) + "\n")
        return
    timeouts = 0
    for i, test in enumerate(spec["tests"]):
        if timeouts >= spec["max_timeouts"]:
            res = {"status": "skipped", "out": "", "err": f"not run: {timeouts} earlier timeouts"}
        else:
            res = run_one(code, test, spec)
            timeouts += res["status"] == "timeout"
        emit(MARK + json.dumps({"i": i, **res}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
