"""Measured baseline figures that ``mas-train`` prints next to a run of the same config.

``mas_trainer/baselines.json`` is package data, copied there by hand from what
``experiments/compare_baselines.py --write-baselines`` wrote to its ``--out-dir``
(``<out-dir>/baselines.json``; the script never writes into the package; docs/reproduce.md).
Per preset it holds the config it measured (:func:`fingerprint`), the seeds, and the provenance
(``command``, ``commits``, ``measured_utc``, ``machine``; entries older than that field lack
``machine``), and for each row of the comparison (single agent, single agent + GRPO, MAS
prompting, MAS + AT-GRPO, parallel sampling, swapped roles) the success per seed, the mean and its
95% intervals, and the paired gains. A run's summary can then say how it compares with the single
agent trained at the same budget, without running the single agent again. :func:`lookup` gives
the figures only when the run's config is the measured one (seed, output folder and other
bookkeeping aside): a changed setting means those numbers say nothing about the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mas_trainer.config import TrainConfig, config_to_dict

__all__ = ["PATH", "fingerprint", "lookup"]

PATH = Path(__file__).with_name("baselines.json")
"""The shipped file (a copy of ``experiments/compare_baselines.py --write-baselines``' output)."""


def fingerprint(cfg: TrainConfig) -> dict[str, Any]:
    """The parts of ``cfg`` that decide a run's results: all but ``run`` (seed, folders, threads,
    progress, backend) and the preset name."""
    data = config_to_dict(cfg)
    data.pop("run", None)
    data.pop("preset", None)
    return json.loads(json.dumps(data))  # tuples -> lists, as read back from the file


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
