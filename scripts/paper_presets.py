"""The paper presets' tables in ``docs/reproduce.md``: which paper row each preset is and how each
code and math cell is scored.

    python scripts/paper_presets.py                           # the two markdown tables
    python scripts/paper_presets.py --check docs/reproduce.md # exit 1 if the page's copy is stale
    python scripts/paper_presets.py --plan                    # the memory table (a few minutes)

The memory plan of each preset is `mas-train PRESET --plan` (:mod:`mas_trainer.plan`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mas_trainer.config import PRESETS, TrainConfig
from mas_trainer.presets import (
    PAPER_ROWS,
    PAPER_TESTS,
    PAPER_VARIANTS,
    PaperRow,
)

# The paper's numbers (accuracy %, Qwen3; docs/algorithm.md) by (task, size, variant suffix).
PAPER_NUMBERS = {
    ("sudoku", "1.7b", ""): "99",
    ("sokoban", "1.7b", ""): "11.5",
    ("plan-path", "1.7b", ""): "97",
    ("sudoku", "8b", ""): "99",
    ("sokoban", "8b", ""): "98",
    ("plan-path", "8b", ""): "96",
    ("sokoban", "8b", "-single-grpo"): "14",
    ("plan-path", "8b", "-single-grpo"): "47",
    ("code", "1.7b", ""): "LCB 24.0, APPS 18.6, CC 7.8",
    ("code", "8b", ""): "LCB 33.1, APPS 46.5, CC 18.1",
    ("math", "1.7b", ""): "AIME24 13.3, AIME25 18.3, OlympiadBench 35.2",
    ("math", "8b", ""): "AIME24 57.0, AIME25 40.0, OlympiadBench 56.6",
}
TASK_NAMES = {
    "plan-path": "Plan-Path",
    "sokoban": "Sokoban",
    "sudoku": "Sudoku",
    "code": "Code",
    "math": "Math",
}


def _paper_presets() -> list[tuple[PaperRow, str, str, TrainConfig]]:
    """(row, variant suffix, preset name, config) of every paper preset, in table order."""
    return [(r, v, r.name(v), PRESETS[r.name(v)]) for r in PAPER_ROWS for v in PAPER_VARIANTS]


def mapping_table() -> str:
    """Every paper preset, its cell of the paper's Table 1 and the values that make it."""
    lines = [
        "| preset | paper row (Tables 1-2) | Qwen3 | env (mode) | policies | tasks/step x K | "
        "response tokens | RL steps | paper's number |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row, suffix, name, cfg in _paper_presets():
        label = PAPER_VARIANTS[suffix][0]
        number = PAPER_NUMBERS.get((row.task, row.size, suffix), "see the paper")
        lines.append(
            f"| `{name}` | {TASK_NAMES.get(row.task, row.task)}: {label} | "
            f"{row.size.upper()} | `{cfg.env.id}` ({cfg.env.mode}) | {cfg.algo.policy_map} | "
            f"{cfg.rollout.tasks_per_step} x {cfg.rollout.k} | {cfg.rollout.max_new_tokens} | "
            f"{cfg.optim.steps} | {number} |"
        )
    return "\n".join(lines) + "\n"


def plan_table() -> str:
    """Every paper preset's memory plan (``mas-train PRESET --plan``) on 80 GB and 141 GB cards."""
    from mas_trainer.plan import GIB, plan_run

    lines = [
        "| preset | GPUs | learner shards per policy | micro-batch x tokens | peak per GPU, "
        "rollout / update (80 GB card) | fits 80 GB (79 GiB) | fits 141 GB (139 GiB) | "
        "checkpoints on disk |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, _, name, cfg in _paper_presets():
        small, big = plan_run(cfg, 79.0), plan_run(cfg, 139.0)
        rollout = max(sum(g.rollout.values()) for g in small.gpus) / GIB
        update = max(sum(g.update.values()) for g in small.gpus) / GIB
        sharded = cfg.run.backend == "ray" and cfg.run.ray_sharding == "fsdp"
        micro = cfg.optim.micro_batch_size or cfg.optim.mini_batch_size
        length = 2 * cfg.rollout.max_new_tokens + 1024
        lines.append(
            f"| `{name}` | {small.count} | {cfg.run.ray_learners if sharded else 1} | "
            f"{micro} x {length} | {rollout:.0f} / {update:.0f} GiB | "
            f"{'yes' if small.fits else 'no'} | {'yes' if big.fits else 'no'} | "
            f"{small.disk / 1e9:.0f} GB |"
        )
    return "\n".join(lines) + "\n"


def cells_table() -> str:
    """The code and math cells: the test benchmark of each column and the command that scores a
    preset's run on it (its row's own test split is the first; the others on the same weights)."""
    lines = [
        "| rows | paper column | prepared test file | score a run of the row on it |",
        "|---|---|---|---|",
    ]
    for task, tests in PAPER_TESTS.items():
        row = next(r for r in PAPER_ROWS if r.task == task)
        env_id = row.env_id
        for i, (column, path) in enumerate(tests.items()):
            if i == 0:
                how = "the run's own test evaluation (`success_best` in `summary.json`)"
            else:
                options = '{"problems": {"test": "' + path + '"}}'
                how = (
                    f"`mas-eval --env {env_id} --policy runs/RUN/checkpoints/best "
                    f"--env-options '{options}' --episodes 100000` (add `--mode single` for the "
                    "single-agent rows; `--policy Qwen/Qwen3-...` for the untrained ones)"
                )
            lines.append(f"| `{task}-qwen3-*` | {column} | `{path}` | {how} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", default="", help="a page that must hold the current table")
    p.add_argument("--plan", action="store_true", help="print the memory table instead")
    args = p.parse_args(argv)
    if args.plan:
        print(plan_table(), end="")
        return 0
    tables = {"mapping": mapping_table(), "cells": cells_table()}
    if args.check:
        page = Path(args.check).read_text()
        stale = [name for name, text in tables.items() if text not in page]
        for name in stale:
            print(f"{args.check} lacks the current {name} table; paste:\n\n{tables[name]}")
        return 1 if stale else 0
    print("\n".join(tables.values()), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
