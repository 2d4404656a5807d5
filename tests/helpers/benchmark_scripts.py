"""Load a script of ``benchmarks/`` or ``experiments/`` (folders of scripts, not packages) as a
module, for the tests that run it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
EXPERIMENTS = ROOT / "experiments"
FOLDERS = (BENCHMARKS, EXPERIMENTS)
"""Speed benchmarks, and the experiments behind the results pages."""


def load(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` or ``experiments/<name>.py`` as the module ``name``."""
    (path,) = [f / f"{name}.py" for f in FOLDERS if (f / f"{name}.py").is_file()]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
