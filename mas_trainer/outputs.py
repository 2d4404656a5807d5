"""The run folder: resolved config, metrics, TensorBoard, plots, transcripts and checkpoints.

Layout of ``runs/<name>/``::

    config.json          the resolved TrainConfig (what ``--run.resume`` reads back)
    metrics.jsonl        one JSON object per record: {"step", "phase", "time", metric: value, ...}
    events.out.tfevents* TensorBoard scalars (same names as metrics.jsonl)
    plots/*.png          success by phase, warm-start loss, reward/return/turns per role
    transcripts.jsonl    sample episodes of each evaluation (prompts, actions, rewards)
    summary.json         held-out success before / after warm start / after RL, wall time
    checkpoints/step-N/  <policy>/ (Hugging Face folder) + learner-<policy>.pt + trainer_state.json
    checkpoints/latest   name of the newest complete checkpoint

Checkpoints are written to a temporary folder and renamed into place, and ``latest`` is replaced
atomically, so a crash mid-save leaves the previous checkpoint intact and ``latest`` pointing at it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["RunDir", "read_metrics"]

KEEP_CHECKPOINTS = 2
"""Complete checkpoints kept on disk (older ones are deleted after a successful save)."""


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


@contextlib.contextmanager
def _no_hub_progress_bars() -> Iterator[None]:
    """Hide Hugging Face's own progress bars ("Writing model shards") while a checkpoint is
    written: each one broke into the training progress bar at every save."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # a checkpoint writer without transformers shows no such bar
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` (a truncated last line from a crash is skipped)."""
    records = []
    for line in Path(path).read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class RunDir:
    """Writes one run's outputs.

    Args:
        path: The run folder (created if missing; an existing one is appended to, for resume).
        tensorboard: Also write TensorBoard events.
        wandb_config: When given, also log to Weights & Biases with this config.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        tensorboard: bool = True,
        wandb_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "checkpoints").mkdir(exist_ok=True)
        self.metrics_path = self.path / "metrics.jsonl"
        self._metrics = self.metrics_path.open("a")
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.path))
        self._wandb = None
        if wandb_config is not None:
            try:
                import wandb
            except ImportError as e:
                raise ImportError("run.wandb needs wandb: pip install 'mas-rl[wandb]'") from e
            self._wandb = wandb.init(
                config=dict(wandb_config), name=self.path.name, dir=str(self.path)
            )

    # ------------------------------------------------------------------ config, metrics, text

    def write_json(self, name: str, data: Any) -> None:
        """Write ``name`` in the run folder atomically (tmp file + rename)."""
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(json.dumps(data, indent=2, default=_json_default) + "\n")
        os.replace(tmp, self.path / name)

    def log(self, step: int, metrics: Mapping[str, float], *, phase: str = "rl") -> None:
        """Append one record to ``metrics.jsonl`` and the scalars to TensorBoard (and wandb)."""
        record = {"step": step, "phase": phase, "time": round(time.time(), 3), **metrics}
        self._metrics.write(json.dumps(record, default=_json_default) + "\n")
        self._metrics.flush()
        scalars = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
        if self._tb is not None:
            for key, value in scalars.items():
                if math.isfinite(value):
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)

    def write_transcripts(self, step: int, tag: str, episodes: Iterable[Any]) -> None:
        """Append episodes (objects with ``uid, task_id, success, transcript``) to transcripts."""
        with (self.path / "transcripts.jsonl").open("a") as f:
            for ep in episodes:
                row = {
                    "step": step,
                    "tag": tag,
                    "uid": ep.uid,
                    "task_id": ep.task_id,
                    "success": ep.success,
                    "turns": ep.turns,
                    "steps": ep.transcript,
                }
                f.write(json.dumps(row, default=_json_default) + "\n")

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self, step: int, write: Callable[[Path], None]) -> Path:
        """Save a checkpoint atomically.

        Args:
            step: The training step; the checkpoint is ``checkpoints/step-<step>``.
            write: Fills the (temporary) folder it is given with the checkpoint's files.

        Returns:
            The final checkpoint folder.
        """
        root = self.path / "checkpoints"
        final = root / f"step-{step:06d}"
        tmp = root / f".tmp-step-{step:06d}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        with _no_hub_progress_bars():
            write(tmp)
        if final.exists():  # re-saving the same step (e.g. Ctrl-C right after a save)
            old = root / f".old-{final.name}-{os.getpid()}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old)
        else:
            os.replace(tmp, final)
        latest_tmp = root / ".latest.tmp"
        latest_tmp.write_text(final.name + "\n")
        os.replace(latest_tmp, root / "latest")
        for old in sorted(root.glob("step-*"))[:-KEEP_CHECKPOINTS]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint folder, or None."""
        latest = self.path / "checkpoints" / "latest"
        if not latest.is_file():
            return None
        folder = self.path / "checkpoints" / latest.read_text().strip()
        return folder if folder.is_dir() else None

    def close(self) -> None:
        """Flush and close the writers."""
        self._metrics.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
