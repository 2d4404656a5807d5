"""Measured baseline figures that ``mas-train`` prints next to a run of the same config.

``mas_trainer/baselines.json`` is package data, copied there by hand from what
``experiments/compare_baselines.py --write-baselines`` wrote to its ``--out-dir``
(``<out-dir>/baselines.json``; the script never writes into the package; docs/reproduce.md).
Per preset it holds the config it measured (:func:`fingerprint`), the seeds, and the provenance
(``command``, ``commits``, ``measured_utc``, ``machine``; entries older than that field lack
``machine``), and for each row of the comparison (single agent, single agent + GRPO, tool
alone, tool alone + GRPO, MAS prompting, MAS + AT-GRPO, parallel sampling, swapped roles) the
success per seed, the mean and its 95% intervals, and the paired gains. A row written by a
later measurement than others carries its own provenance (``measured``: the same fields); the
entry's fields then describe the last write. A run's summary can then say how it compares with
the single agent and with the tool alone trained at the same budget, without running them again
(:func:`describe` names where a figure came from). :func:`lookup` gives
the figures only when the run's config is the measured one (seed, output folder and other
bookkeeping aside): a changed setting means those numbers say nothing about the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mas_trainer.config import TrainConfig, config_to_dict

__all__ = ["CONTROLS", "PATH", "describe", "fingerprint", "lookup"]

PATH = Path(__file__).with_name("baselines.json")
"""The shipped file (a copy of ``experiments/compare_baselines.py --write-baselines``' output)."""


def fingerprint(cfg: TrainConfig) -> dict[str, Any]:
    """The parts of ``cfg`` that decide a run's results: all but ``run`` (seed, folders, threads,
    progress, backend) and the preset name."""
    data = config_to_dict(cfg)
    data.pop("run", None)
    data.pop("preset", None)
    return json.loads(json.dumps(data))  # tuples -> lists, as read back from the file


CONTROLS = {
    "single-grpo": "single agent + GRPO (no code tool)",
    "tool-grpo": "tool alone + GRPO (the same code tool, its printed moves made)",
}
"""The stored rows a run's team is shown beside (its summary, its success plot), with the words
``mas-train`` prints for them."""


def describe(measured: dict[str, Any]) -> str:
    """Where stored figures came from, in one line: an entry's or a row's provenance fields
    (``command``, ``commits``, ``measured_utc``, and ``machine`` when recorded)."""
    machine = f", {measured['machine']}" if "machine" in measured else ""
    return (
        f"{PATH.name}: {measured['command']} (commits {', '.join(measured['commits'])}, "
        f"{measured['measured_utc']}{machine})"
    )


def _with_defaults(measured: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """``measured`` with every setting it predates filled in at its default: a field added to
    the config after the measurement defaults to the behaviour the measurement ran with."""
    out = dict(measured)
    for key, value in defaults.items():
        if key not in out:
            out[key] = value
        elif isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = _with_defaults(out[key], value)
    return out


def lookup(cfg: TrainConfig, path: Path = PATH) -> dict[str, Any] | None:
    """The measured figures of ``cfg``'s preset when ``cfg`` is the measured config, else None.

    Settings the stored config does not name (added to the config after the measurement) count
    as their defaults.
    """
    if not path.is_file():
        return None
    entry = json.loads(path.read_text()).get(cfg.preset)
    if entry is None:
        return None
    measured = _with_defaults(entry.get("config", {}), fingerprint(TrainConfig()))
    if measured != fingerprint(cfg):
        return None
    return entry
