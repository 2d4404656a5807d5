"""The paper presets' tables in ``docs/reproduce.md``: which paper row each preset is, how each code
and math cell is scored, and the GPU memory plan of each preset.

    python scripts/paper_presets.py                           # the three markdown tables
    python scripts/paper_presets.py --check docs/reproduce.md # exit 1 if the page's copy is stale

Memory plan. Bytes per parameter, per learner GPU (a policy's learner sharded over ``s`` ranks with
FSDP2, or ``s = 1``): fp32 master weights 4/s, fp32 gradients 4/s, AdamW moments (m, v) 8/s, plus
the bf16 compute copy (autocast's weight casts: 2 bytes per parameter, unsharded; FSDP2 holds the
bf16 all-gather of one decoder layer and of the root unit, embeddings and LM head). Activations per
micro-batch with gradient checkpointing, for sequences of ``L = P + R`` tokens (``R`` the preset's
response tokens; ``P = R + 1024``, since the planner's prompt holds the tool's program and its
output): a bf16 checkpoint of every layer's input (``layers x L x hidden x 2``), one layer's
recomputed activations (``L x (6 hidden + 3 intermediate) x 2``), and the LM head on the response
positions only (``R x vocab x 14``: bf16 logits, their fp32 copy and scaled copy, the fp32
gradient). The vLLM engine holds its bf16 weights (``2 N / tp`` per GPU) and KV cache in
``model.engine_memory`` of the card while awake; it sleeps (weights to CPU memory, KV cache
dropped) during updates. Estimates, not measurements: the GPU figures could not be recorded here.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mas_trainer.config import PRESETS, TrainConfig
from mas_trainer.presets import (
    PAPER_MODELS,
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

GB = 1e9
CARDS = {"80 GB": 80.0, "141 GB": 141.0}  # H100/A100-80GB, H200


@dataclass(frozen=True)
class Shape:
    """A Qwen3 model's shape (its published ``config.json``)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool

    @property
    def params(self) -> int:
        """Parameters: attention, MLP and norms of every layer, embeddings (once when tied)."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        norms = 2 * self.hidden + 2 * self.head_dim  # input/post norms, q/k norms
        embed = self.vocab * self.hidden
        return self.layers * (attn + mlp + norms) + self.hidden + embed * (1 if self.tied else 2)

    @property
    def layer_params(self) -> int:
        return (self.params - self.hidden - self.vocab * self.hidden * (1 if self.tied else 2)) // (
            self.layers
        )


SHAPES = {
    "Qwen/Qwen3-1.7B": Shape(2048, 28, 16, 8, 128, 6144, 151936, True),
    "Qwen/Qwen3-8B": Shape(4096, 36, 32, 8, 128, 12288, 151936, False),
}


@dataclass(frozen=True)
class Plan:
    """Per-GPU gigabytes of one learner GPU (update) and of one engine GPU (rollout)."""

    preset: str
    gpus: int
    shards: int
    states: float  # fp32 weights + grads + AdamW, this GPU's share
    compute_copy: float
    activations: float
    engine_weights: float
    update_peak: float  # learner states + compute copy + activations (the engine asleep)
    rollout_peak: float  # learner weights + AdamW (no grads) + the engine's share of the card


def plan(name: str, cfg: TrainConfig, card_gb: float) -> Plan:
    shape = SHAPES[cfg.model.name]
    n = shape.params
    sharded = cfg.run.backend == "ray" and cfg.run.ray_sharding == "fsdp"
    shards = cfg.run.ray_learners if sharded else 1
    trains = cfg.optim.steps > 0
    policies = 1 if cfg.algo.policy_map == "shared" else 2
    gpus = int(cfg.run.ray_gpus_per_policy) * policies if cfg.run.backend == "ray" else 1
    per_gpu_policies = policies if cfg.run.backend == "local" else 1
    states = 16 * n / shards / GB if trains else 4 * n / GB  # untrained: fp32 weights only
    if sharded:  # one decoder layer and the root unit gathered in bf16
        copy = 2 * (shape.layer_params + shape.vocab * shape.hidden * (1 if shape.tied else 2))
    else:
        copy = 2 * n
    copy_gb = copy / GB if trains else 0.0
    r = cfg.rollout.max_new_tokens
    length = 2 * r + 1024
    per_seq = (
        shape.layers * length * shape.hidden * 2
        + length * (6 * shape.hidden + 3 * shape.intermediate) * 2
        + r * shape.vocab * 14
    )
    micro = cfg.optim.micro_batch_size or cfg.optim.mini_batch_size
    act = per_seq * micro / GB if trains else 0.0
    tp = cfg.model.engine_tp
    engine_w = 2 * n / tp / GB
    # Static learners of every policy on this GPU; one update runs at a time.
    static = per_gpu_policies * (12 * n / shards / GB if trains else 4 * n / GB)
    update = static + (4 * n / shards / GB if trains else 0.0) + copy_gb + act
    rollout = static + cfg.model.engine_memory * card_gb
    return Plan(name, gpus, shards, states * per_gpu_policies, copy_gb, act, engine_w,
                update, rollout)  # fmt: skip


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


def memory_table() -> str:
    """The markdown table of every paper preset (per-role and shared; the untrained rows' plan
    is their engine's and one fp32 model's)."""
    lines = [
        "| preset | parameters | GPUs (learner shards per policy) | learner states per GPU "
        "(16 B/param / shards, x policies on it; untrained: 4 B/param) | bf16 compute copy | "
        "activations (micro-batch x tokens) | vLLM weights per GPU | peak per GPU, update / "
        "rollout, 80 GB card | fits 80 GB | fits 141 GB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row, _, name, cfg in _paper_presets():
        shape = SHAPES[PAPER_MODELS[row.size]]
        p80, p141 = plan(name, cfg, CARDS["80 GB"]), plan(name, cfg, CARDS["141 GB"])
        micro = cfg.optim.micro_batch_size or cfg.optim.mini_batch_size
        fits80 = max(p80.update_peak, p80.rollout_peak) <= CARDS["80 GB"]
        fits141 = max(p141.update_peak, p141.rollout_peak) <= CARDS["141 GB"]
        lines.append(
            f"| `{name}` | {shape.params / 1e9:.2f} B | {p80.gpus} ({p80.shards}) | "
            f"{p80.states:.1f} GB | {p80.compute_copy:.1f} GB | "
            f"{p80.activations:.1f} GB ({micro} x {2 * cfg.rollout.max_new_tokens + 1024}) | "
            f"{p80.engine_weights:.1f} GB | "
            f"{p80.update_peak:.0f} / {p80.rollout_peak:.0f} GB | "
            f"{'yes' if fits80 else 'no'} | {'yes' if fits141 else 'no'} |"
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
    args = p.parse_args(argv)
    tables = {"mapping": mapping_table(), "cells": cells_table(), "memory": memory_table()}
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
