"""Fixtures shared by several test files."""

from __future__ import annotations

import os

import pytest

MAX_WORKERS = 8
"""``-n auto`` starts at most this many workers: each holds torch and a tiny model or two (~1 GB),
so a many-core machine would spend its memory on workers rather than finish sooner."""


def pytest_xdist_auto_num_workers(config):
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


def pytest_configure(config):
    """Under pytest-xdist (``-n auto``), each worker gets its share of the cores for torch and
    OpenMP, set before anything imports torch, so that workers do not fight over threads."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        share = max(1, (os.cpu_count() or 1) // int(workers))
        os.environ.setdefault("OMP_NUM_THREADS", str(share))


@pytest.fixture(params=["pool", "cold"])
def sandbox_runs(request, monkeypatch):
    """Run the test twice: programs through the warm sandbox pool (the default), and cold.

    Tests of what the sandbox isolates use it (``pytest.mark.usefixtures("sandbox_runs")``), so
    that its isolation is proven both ways. Where the pool cannot run (not root, no bubblewrap or
    cgroups), both runs are cold.
    """
    from mas_envs.sandbox import pool

    monkeypatch.setenv(pool.ENV_VAR, "2" if request.param == "pool" else "off")
    yield request.param
    assert pool._off is None, f"the warm pool switched itself off: {pool._off}"
