"""The run folder: resolved config, metrics, TensorBoard, plots, transcripts and checkpoints.

Layout of ``runs/<name>/``::

    config.json          the resolved TrainConfig (what ``--run.resume`` reads back)
    metrics.jsonl        one JSON object per record: {"step", "phase", "time", metric: value, ...}
    events.out.tfevents* TensorBoard scalars (same names as metrics.jsonl)
    plots/*.png          success by phase, warm-start loss, reward/return/turns per role
    transcripts.jsonl    sample episodes of each evaluation (prompts, actions, rewards)
    summary.json         held-out success before / after warm start / after RL, wall time
    checkpoints/step-N/  <policy>/ (Hugging Face folder) + learner-<policy>/ + trainer_state.json
                         (the TrainState); ``step-000000`` during and after the warm start
    checkpoints/latest   name of the newest complete checkpoint
    checkpoints/best/    the weights the validation split chose (``eval.select_every``), same layout

A checkpoint is either fully there or not there, whenever the process is killed:

* it is written into ``checkpoints/.tmp-step-N-<pid>/``, ends with a ``COMPLETE`` marker, and every
  file and folder of it is fsynced before it is renamed to ``step-N`` (and the rename fsynced);
* re-saving a step moves the old ``step-N`` to ``.old-step-N-<pid>`` first; ``latest`` (the newest
  complete checkpoint's name) is replaced atomically (a fsynced temporary file, then a rename);
* old checkpoints are deleted by renaming them to ``.del-...`` first, so no ``step-N`` is ever half
  deleted;
* :meth:`RunDir.recover` (run when a run folder is opened) puts back a ``.old-step-N`` whose new
  copy never arrived, sweeps the temporary and ``.del`` folders of dead processes, and points
  ``latest`` at the newest complete checkpoint when it points at nothing.

Resuming (:func:`resume_point`) also rewinds the logs to what they held when the checkpoint was
saved (:meth:`RunDir.log_sizes`, kept in the checkpoint's trainer state): ``metrics.jsonl``,
``transcripts.jsonl`` and the TensorBoard events read as if the run had never stopped.

:func:`find_run` is the one reader of that layout from outside a run: given a path (a run folder,
one of its checkpoints, or one policy's folder inside a checkpoint) it returns the run's config and
the checkpoint meant (``mas-eval``, leaderboards). It runs :meth:`RunDir.recover` first, so a run
killed mid-save reads as its newest complete checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from mas_envs.optional import require

__all__ = [
    "ResumeError",
    "RunDir",
    "RunRef",
    "TrainState",
    "cpu_seconds",
    "find_run",
    "latest_checkpoint",
    "read_metrics",
    "resume_point",
]

KEEP_CHECKPOINTS = 2
"""Complete checkpoints kept on disk (older ones are deleted after a successful save)."""
COMPLETE = "COMPLETE"
"""The marker a checkpoint folder gets last, before it is renamed into place."""
_EVENTS = "events.out.tfevents*"


class ResumeError(ValueError):
    """``--run.resume`` names a folder that cannot be resumed; the message says what is there."""


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


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint folder of a run folder, or None.

    That is the one ``checkpoints/latest`` names; when it names none that is complete (a folder
    left by a kill mid-save that :meth:`RunDir.recover` could not repair, e.g. read-only), the
    complete ``step-N`` with the highest N.
    """
    root = Path(run_dir) / "checkpoints"
    latest = root / "latest"
    if latest.is_file():
        folder = root / latest.read_text().strip()
        if _complete(folder):
            return folder
    steps = [d for d in root.glob("step-*") if d.name[5:].isdigit() and _complete(d)]
    return max(steps, key=lambda d: int(d.name[5:]), default=None)


@dataclass
class TrainState:
    """What the training loop carries from phase to phase, and what a checkpoint keeps of it
    (``trainer_state.json``): a resume continues from exactly this.

    Attributes:
        step: RL steps done.
        policy_of: Role -> policy name.
        warmstart_done: The warm start (and its evaluation) is over.
        warmstart_step: Warm-start steps done (a run killed during its warm start resumes there).
        warmstart_rng: The run generator's state when the warm start began: a resume in the
            middle of the warm start draws the same oracle episodes and minibatches from it.
        summary: The run summary so far (``summary.json``).
        elapsed_s: Wall seconds of the run's earlier sessions (before this resume).
        cpu_s: CPU seconds of the run's earlier sessions.
        best: ``{"step", "success"}`` of the best validation evaluation so far, or None.
        final: The final evaluation's metrics once it ran (a resume of a finished run logs them
            again instead of playing it again); None while the run is training.
        rng: State of the run's generator (task draws, warm-start minibatches).
        rollout_rng: State of the rollout's generator (tie breaks, sampling seeds).
        logs: :meth:`RunDir.log_sizes` at the save; a resume cuts the logs back to it.
    """

    step: int = 0
    policy_of: dict[str, str] = field(default_factory=dict)
    warmstart_done: bool = False
    warmstart_step: int = 0
    warmstart_rng: dict[str, Any] | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    best: dict[str, Any] | None = None
    final: dict[str, float] | None = None
    rng: dict[str, Any] | None = None
    rollout_rng: dict[str, Any] | None = None
    logs: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The state as ``trainer_state.json`` holds it."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrainState:
        """Read a ``trainer_state.json``; a key an older run did not save takes its default
        (``best`` before model selection, ``rollout_rng`` and ``logs`` before exact resume, the
        warm-start and final fields before they were kept)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def load(cls, checkpoint: str | Path) -> TrainState:
        """The state a checkpoint folder (``checkpoints/step-N``) saved."""
        return cls.from_json(json.loads((Path(checkpoint) / "trainer_state.json").read_text()))


@dataclass(frozen=True)
class RunRef:
    """What a path names inside a ``mas-train`` run (see :func:`find_run`).

    Attributes:
        run_dir: The run folder.
        config: Its ``config.json`` (the resolved ``TrainConfig`` as plain data).
        checkpoint: The checkpoint folder the path names (the latest one for a run folder; None
            when the run has none yet).
        policy: The policy whose folder the path is (``checkpoints/step-N/<policy>``), or None
            when the path is the run or a whole checkpoint.
    """

    run_dir: Path
    config: dict[str, Any]
    checkpoint: Path | None
    policy: str | None = None


def _run_config(folder: Path) -> dict[str, Any] | None:
    """A run folder's config, or None when ``folder`` is not a run folder (a model folder also
    has a ``config.json``: a run folder has ``checkpoints/`` and its config an ``env`` section)."""
    path = folder / "config.json"
    if not (path.is_file() and (folder / "checkpoints").is_dir()):
        return None
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    return config if isinstance(config, dict) and "env" in config else None


def find_run(path: str | Path) -> RunRef | None:
    """The run behind ``path``: a run folder, one of its checkpoints (``checkpoints/step-N``), or
    one policy's folder in a checkpoint (``checkpoints/step-N/<policy>``, a Hugging Face folder).

    Returns:
        None when ``path`` is none of these (a plain model folder, a hub id, ``tiny:<preset>``).
    """
    p = Path(path)
    if not p.is_dir():
        return None
    if (config := _run_config(p)) is not None:
        # what a kill mid-save left, as opening the run does (read-only: read around it)
        with contextlib.suppress(OSError):
            RunDir.recover(p)
        return RunRef(p, config, latest_checkpoint(p))
    if (p / "trainer_state.json").is_file():
        config = _run_config(p.parent.parent)
        return None if config is None else RunRef(p.parent.parent, config, p)
    if (p.parent / "trainer_state.json").is_file():
        run_dir = p.parent.parent.parent
        config = _run_config(run_dir)
        return None if config is None else RunRef(run_dir, config, p.parent, p.name)
    return None


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
        self.recover(self.path)
        self.metrics_path = self.path / "metrics.jsonl"
        self._metrics = self.metrics_path.open("a")
        self._tb = None
        self._tb_file: Path | None = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            before = set(self.path.glob(_EVENTS))
            self._tb = SummaryWriter(log_dir=str(self.path))
            self._tb.flush()
            new = sorted(set(self.path.glob(_EVENTS)) - before)
            self._tb_file = new[-1] if new else None
        self._wandb = None
        if wandb_config is not None:
            wandb = require("wandb", purpose="run.wandb")
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

    def log_sizes(self) -> dict[str, Any]:
        """What the logs hold now (flushed): bytes of ``metrics.jsonl`` and ``transcripts.jsonl``,
        the TensorBoard event files and the size of this run's own. A checkpoint keeps it, so a
        resume can :meth:`rewind` the logs to it."""
        self._metrics.flush()
        if self._tb is not None:
            self._tb.flush()
        sizes: dict[str, Any] = {}
        for name in ("metrics.jsonl", "transcripts.jsonl"):
            f = self.path / name
            sizes[name] = f.stat().st_size if f.exists() else 0
        sizes["events"] = sorted(f.name for f in self.path.glob(_EVENTS))
        if self._tb_file is not None and self._tb_file.exists():
            sizes["events_file"] = [self._tb_file.name, self._tb_file.stat().st_size]
        return sizes

    @staticmethod
    def rewind(path: str | Path, sizes: Mapping[str, Any]) -> None:
        """Cut the logs of the run folder ``path`` back to ``sizes`` (:meth:`log_sizes`): what was
        logged after the checkpoint goes, so a resumed run logs those steps once."""
        path = Path(path)
        for name in ("metrics.jsonl", "transcripts.jsonl"):
            f = path / name
            if f.exists() and f.stat().st_size > int(sizes.get(name, 0)):
                os.truncate(f, int(sizes.get(name, 0)))
        if "events" not in sizes:
            return
        kept = set(sizes["events"])
        for f in path.glob(_EVENTS):  # files of sessions that started after the checkpoint
            if f.name not in kept:
                f.unlink()
        if sizes.get("events_file"):
            name, size = sizes["events_file"]
            own = path / str(name)
            if own.exists() and own.stat().st_size > int(size):
                os.truncate(own, int(size))  # flushed at the save: a record boundary

    def save_checkpoint(
        self, step: int, write: Callable[[Path], None], *, tag: str | None = None
    ) -> Path:
        """Save a checkpoint atomically: after a kill at any instant it is fully there or not.

        Args:
            step: The training step; the checkpoint is ``checkpoints/step-<step>``.
            write: Fills the (temporary) folder it is given with the checkpoint's files.
            tag: Save as ``checkpoints/<tag>`` instead (e.g. ``best``, the model selection's
                pick): replaced atomically, never pruned, and ``latest`` is left alone.

        Returns:
            The final checkpoint folder.
        """
        root = self.path / "checkpoints"
        name = tag or f"step-{step:06d}"
        final = root / name
        tmp = root / f".tmp-{name}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        with _no_hub_progress_bars():
            write(tmp)
        (tmp / COMPLETE).write_text(f"{final.name}\n")
        _fsync_tree(tmp)
        if final.exists():  # re-saving the same step (e.g. Ctrl-C right after a save)
            old = root / f".old-{final.name}-{os.getpid()}"
            os.replace(final, old)  # a kill here: recover() puts the old one back
            os.replace(tmp, final)
            _fsync_dir(root)
            _remove(old)
        else:
            os.replace(tmp, final)
            _fsync_dir(root)
        if tag is not None:
            return final
        _point_latest(root, final.name)
        for old in sorted(root.glob("step-*"))[:-KEEP_CHECKPOINTS]:
            if old != final:
                _remove(old)
        return final

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint folder, or None."""
        return latest_checkpoint(self.path)

    @staticmethod
    def recover(path: str | Path) -> None:
        """Repair what a kill mid-save left in ``path/checkpoints`` (see the module docstring).

        A ``.old-step-N`` (or ``.old-best``) whose ``step-N`` (``best``) is missing goes back in
        place; temporary, ``.old`` and ``.del`` folders of processes that are gone are deleted;
        ``latest`` is pointed at the newest complete checkpoint when it points at none.
        """
        root = Path(path) / "checkpoints"
        if not root.is_dir():
            return
        for old in sorted([*root.glob(".old-step-*"), *root.glob(".old-best-*")]):
            name, owner = old.name[len(".old-") :].rsplit("-", 1)
            if _alive_other(owner):
                continue
            if not (root / name).exists() and _complete(old):
                os.replace(old, root / name)
                _fsync_dir(root)
            else:
                _remove(old)
        for leftover in [
            *root.glob(".tmp-step-*"),
            *root.glob(".tmp-best-*"),
            *root.glob(".del-*"),
        ]:
            if not _alive_other(leftover.name.rsplit("-", 1)[-1]):
                shutil.rmtree(leftover, ignore_errors=True)
        (root / ".latest.tmp").unlink(missing_ok=True)
        latest = root / "latest"
        pointed = root / latest.read_text().strip() if latest.is_file() else None
        if pointed is None or not _complete(pointed):
            complete = [d for d in sorted(root.glob("step-*")) if _complete(d)]
            if complete:
                _point_latest(root, complete[-1].name)
            else:
                latest.unlink(missing_ok=True)

    def close(self) -> None:
        """Flush and close the writers."""
        self._metrics.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


# ---------------------------------------------------------------------------- files, safely


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """Flush every file under ``root`` to disk, then every folder (deepest first)."""
    dirs = [root]
    for top, subdirs, files in os.walk(root):
        dirs += [Path(top) / d for d in subdirs]
        for name in files:
            fd = os.open(Path(top) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for folder in reversed(dirs):
        _fsync_dir(folder)


def _point_latest(root: Path, name: str) -> None:
    tmp = root / ".latest.tmp"
    with open(tmp, "w") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, root / "latest")
    _fsync_dir(root)


def _remove(folder: Path) -> None:
    """Delete a checkpoint folder without ever leaving half of it under its name."""
    gone = folder.with_name(f".del-{folder.name.lstrip('.')}-{os.getpid()}")
    os.replace(folder, gone)
    _fsync_dir(folder.parent)
    shutil.rmtree(gone, ignore_errors=True)


def _complete(folder: Path) -> bool:
    """A checkpoint folder that was fully written (its marker; before markers: its state)."""
    return folder.is_dir() and (
        (folder / COMPLETE).is_file() or (folder / "trainer_state.json").is_file()
    )


def _alive_other(pid: str) -> bool:
    """Whether ``pid`` (from a leftover's name) is another process that is still running."""
    return pid.isdigit() and int(pid) != os.getpid() and os.path.exists(f"/proc/{pid}")


def _describe(path: Path) -> str:
    """What a run folder holds, for an error message: logs, checkpoints, leftovers."""
    parts = []
    if not path.exists():
        return f"{path} does not exist"
    if (path / "config.json").is_file():
        parts.append("config.json")
    if (path / "metrics.jsonl").is_file():
        records = read_metrics(path / "metrics.jsonl")
        last = records[-1] if records else {}
        where = f", the last {last.get('phase')} step {last.get('step')}" if records else ""
        parts.append(f"metrics.jsonl ({len(records)} records{where})")
    root = path / "checkpoints"
    names = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
    steps = [n for n in names if n.startswith("step-")]
    if not steps:
        parts.append("no checkpoint")
    else:
        parts.append(f"checkpoint folders {steps}, none complete")
    tmps = [n for n in names if n.startswith((".tmp-step-", ".old-step-"))]
    if tmps:
        parts.append(f"leftovers of a save that was interrupted: {tmps}")
    if "latest" in names:
        parts.append(f"checkpoints/latest -> {(root / 'latest').read_text().strip()!r}")
    return ", ".join(parts)


def resume_point(path: str | Path, *, fresh: bool = False) -> Path | None:
    """The complete checkpoint to resume the run folder ``path`` from, after :meth:`RunDir.recover`.

    Args:
        path: The run folder (``--run.resume``).
        fresh: When there is no complete checkpoint, start the run over in ``path`` instead of
            refusing: its old logs and checkpoints move to ``path/restarted-<UTC time>/``.

    Returns:
        The checkpoint folder, or ``None`` (``fresh`` and nothing to resume: a new run there).

    Raises:
        ResumeError: No complete checkpoint (and not ``fresh``); the message says what is there.
    """
    path = Path(path)
    RunDir.recover(path)
    latest = path / "checkpoints" / "latest"
    if latest.is_file():
        folder = path / "checkpoints" / latest.read_text().strip()
        if _complete(folder):
            return folder
    if not fresh:
        raise ResumeError(
            f"--run.resume {str(path)!r}: no complete checkpoint to resume from; found: "
            f"{_describe(path)}. The run stopped before its first checkpoint (run.save_every "
            "sets how often it saves). Add --run.fresh true to start it over in this folder "
            "(the old logs move to a restarted-<time>/ folder there), or give another "
            "--run.name for a new run."
        )
    if path.exists():
        aside = path / f"restarted-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
        aside.mkdir()
        for item in path.iterdir():
            if (
                item != aside
                and item.name not in ("config.json",)
                and not item.name.startswith("restarted-")
            ):
                os.replace(item, aside / item.name)
    return None


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its finished child processes (the
    sandbox runs it waited for)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
