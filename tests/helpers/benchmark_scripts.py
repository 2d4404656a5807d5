"""Load a script of ``benchmarks/`` or ``experiments/`` (folders of scripts, not packages) as a
module, for the tests that run it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
EXPERIMENTS = ROOT / "experiments"
FOLDERS = (BENCHMARKS, EXPERIMENTS)
"""Speed benchmarks, and the experiments behind the results pages."""


def load(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` or ``experiments/<name>.py`` as the module ``name``; the scripts
    beside it importable while it loads, as when it runs (Python puts a script's folder first
    on its path)."""
    (path,) = [f / f"{name}.py" for f in FOLDERS if (f / f"{name}.py").is_file()]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module
