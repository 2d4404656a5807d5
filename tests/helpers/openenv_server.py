"""``mas-openenv`` started for a test on a free port, and a wait for it bounded by time: the server
imports openenv, FastAPI and every env before it listens, 41 s measured on a 2-core machine while
CI's background steps ran beside it (a wait of 30 s was too short there)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable

import pytest

STARTUP_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(proc: subprocess.Popen, serving: Callable[[], bool], what: str) -> None:
    """Poll ``serving()`` until it holds; fail with the server's output if it exits first, or
    after STARTUP_S seconds."""
    deadline = time.monotonic() + STARTUP_S
    while not serving():
        if proc.poll() is not None:
            pytest.fail(f"mas-openenv exited: {proc.stdout.read() if proc.stdout else ''}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not pass in {STARTUP_S} s")
        time.sleep(0.1)


def healthy(url: str) -> bool:
    """``GET url/health`` says healthy (False while nothing listens yet)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
            return json.loads(r.read())["status"] == "healthy"
    except OSError:
        return False


def start(
    env: dict[str, str] | None = None, output: int = subprocess.PIPE
) -> tuple[subprocess.Popen, int]:
    """``python -m mas_envs.adapters.openenv`` on a free port, returned with its port once its
    /health check passes. The caller terminates it."""
    port = free_port()
    cmd = [sys.executable, "-m", "mas_envs.adapters.openenv", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=output, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_serving(proc, lambda: healthy(f"http://127.0.0.1:{port}"), "the /health check")
    except BaseException:
        proc.terminate()
        proc.wait(timeout=30)
        raise
    return proc, port
