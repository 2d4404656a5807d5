"""Placing result files: :func:`submit` validates a file and places it under its board,
:func:`seed` plays the reference policies onto the boards.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mas_trainer.eval.leaderboard.render import percent, render
from mas_trainer.eval.leaderboard.trust import (
    ValidationError,
    record_verified,
    validate_file,
    verify,
)
from mas_trainer.eval.suite import (
    BOARDS,
    load_result,
    save_result,
)

__all__ = ["seed", "submit", "summary"]

# ---------------------------------------------------------------------------------- submit


def _slug(name: str) -> str:
    out = "".join(c if c.isalnum() or c in "-_." else "-" for c in name.lower())
    out = re.sub(r"-{2,}", "-", out).strip("-.")
    return out[:60] or "entry"


def submit(
    path: Path,
    root: Path,
    *,
    force: bool = False,
    replay: bool = True,
    data_dir: str | Path | None = None,
) -> list[Path]:
    """Validate a result file, place one file per board under ``results/``, re-render.

    Returns:
        The placed files.

    Raises:
        ValidationError: The file is invalid (nothing is written).
        FileExistsError: An entry of the same name exists on a board (``force`` replaces it).
    """
    result = validate_file(path, root, replay, data_dir)
    placed = []
    targets = []
    for res in result["results"]:
        board = BOARDS[res.get("board", res["env_id"])]
        target = root / "results" / board.slug / f"{_slug(result['name'])}.json.gz"
        if target.exists() and not force:
            raise FileExistsError(
                f"{target} exists: choose another --name, or --force to replace your own entry"
            )
        targets.append((target, res))
    for target, res in targets:
        placed.append(save_result({**result, "results": [res]}, target))
    for p, text in render(root).items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return placed


def seed(root: Path, boards: Sequence[str], data_dir: str | Path | None = None) -> list[Path]:
    """Make the ``random`` and ``oracle`` entries of ``boards``, verified; returns their files.

    For a new board, or after an env changed under an unreleased version: the old seed files
    would no longer replay. Data boards need their prepared data (``data_dir``).
    """
    import tempfile

    from mas_trainer.eval.suite import run_suite

    placed = []
    for board, policy in [(b, p) for b in boards for p in ("random", "oracle")]:
        cmd = [
            "mas-eval",
            "--suite",
            board,
            "--policy",
            policy,
            "--name",
            policy,
            "--output",
            f"{policy}.json",
        ]
        result = run_suite([board], policy, name=policy, command=cmd, data_dir=data_dir)
        with tempfile.TemporaryDirectory() as tmp:
            seed_file = save_result(result, Path(tmp) / "seed.json")
            files = submit(seed_file, root, force=True, data_dir=data_dir)
        for path in files:
            if verify(load_result(path), data_dir=data_dir):
                raise ValidationError(str(path), ["the seed entry did not reproduce"])
            record_verified(root, path)
        placed += files
    for out, text in render(root).items():
        out.write_text(text)
    return placed


def summary(result: Mapping[str, Any], placed: Sequence[Path], root: Path) -> str:
    lines = [
        f"### Leaderboard submission: {result['name']}",
        "",
        f"- policy: `{result['policy']['spec']}` ({result['policy']['kind']}); "
        f"sampling: {json.dumps(result['sampling'])}",
        f"- command: `{result['meta']['command']}`",
    ]
    if result["model"]:
        lines.append(
            f"- model: `{result['model']['id']}`, revision {result['model']['revision']}, "
            f"weights sha256 {json.dumps(result['model']['weights_sha256'])}"
        )
    lines += ["", "| board | success % | 95% CI | n | file |", "|---|---|---|---|---|"]
    for res, p in zip(result["results"], placed, strict=True):
        a = res["aggregate"]
        rel = p.resolve().relative_to(root.resolve().parent).as_posix()
        lines.append(
            f"| {res.get('board', res['env_id'])} | {percent(a['success'])} | "
            f"{percent(a['ci95'][0])}-{percent(a['ci95'][1])} | {a['episodes']} | `{rel}` |"
        )
    lines += ["", "Validated with `mas-leaderboard validate` (schema, hashes, aggregates, replay)."]
    return "\n".join(lines)
