"""The named presets of ``mas-train`` (``mas-train PRESET``), as plain tables.

Each preset is ``{section: {field: value}}`` over the defaults of
:class:`~mas_trainer.config.TrainConfig`; :data:`mas_trainer.config.PRESETS` holds them as
validated configs (built, and so checked, on import). ``mas-train --help PRESET`` prints every
field with its value in that preset.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_PRESET", "PRESETS"]

Table = dict[str, Any]
Preset = dict[str, Table]


def _tiny_preset(env: Table, max_new_tokens: int, temperature: float = 1.0) -> Preset:
    """A CPU preset: tiny byte-level model, warm start on oracle transcripts, then AT-GRPO."""
    return dict(
        model={"name": "tiny:tiny", "dtype": "float32"},
        env={"max_turns": 3, **env},
        rollout={
            "k": 4,
            "tasks_per_step": 16,
            "max_new_tokens": max_new_tokens,
            "system_message": False,
            "temperature": temperature,
        },
        algo={"drop_zero_var": True},
        optim={
            "steps": 20,
            "lr": 1e-4,
            "mini_batch_size": 32,
            "warmstart_steps": 400,
            "warmstart_lr": 5e-3,
            # Cosine decay to 5%: at a constant rate the SFT loss stalls at the minibatch noise.
            "warmstart_min_lr_ratio": 0.05,
            "warmstart_batch_size": 32,
            "warmstart_episodes": 512,
        },
        # One thread: on a shared 2-core machine two threads fight other processes and can run
        # 10x slower; one thread loses at most 2x on an idle machine.
        run={"save_every": 0, "threads": 1},
        eval={"episodes": 100},
    )


# 4x4: on 5x5 the 0.5M model's warm start stalls near 18% and AT-GRPO lowered greedy success in
# every tuning run; on 4x4 the same recipe went 22% -> 40% in the RL phase (docs/trainer.md).
_PLANPATH_TINY_ENV = {"rows": 4, "cols": 4, "wall_prob": 0.1}

PRESETS: dict[str, Preset] = {
    # The embedded default: learns on 2 CPU cores in ~8 minutes (docs/trainer.md has the numbers).
    # Sampling at 0.7 during RL (the learner scores at the same temperature) keeps the candidates
    # near the greedy answer that the evaluation measures.
    "plan-path-tiny": _tiny_preset(
        {"id": "mas/PlanPath-v0", "options": _PLANPATH_TINY_ENV}, 24, 0.7
    ),
    "sokoban-tiny": _tiny_preset(
        {"id": "mas/Sokoban-v0", "options": {"width": 5, "height": 5}}, 24
    ),
    "sudoku-tiny": _tiny_preset({"id": "mas/Sudoku-v0", "options": {"size": 4}}, 48),
    # GPU presets mirror the paper's settings (REFERENCE.md): K=4, 64 problems per step,
    # clip 0.2 with
    # dual clip 3, no KL, lr 1e-6, mini-batch 16, 1 epoch, 200+ steps, per-role models.
    "plan-path-qwen3-1.7b": dict(
        model={
            "name": "Qwen/Qwen3-1.7B",
            "dtype": "bfloat16",
            "device": "cuda",
            "engine_batch_size": 128,
        },
        env={"id": "mas/PlanPath-v0", "max_turns": 3},
        rollout={"k": 4, "tasks_per_step": 64, "max_new_tokens": 2048, "temperature": 1.0},
        algo={"policy_map": "per_role"},
        optim={"steps": 200, "lr": 1e-6, "mini_batch_size": 16},
        run={"save_every": 20},
        eval={"episodes": 100, "every": 20},
    ),
    "plan-path-qwen3-8b": dict(
        model={
            "name": "Qwen/Qwen3-8B",
            "dtype": "bfloat16",
            "device": "cuda",
            "engine_batch_size": 64,
        },
        env={"id": "mas/PlanPath-v0", "max_turns": 3},
        rollout={"k": 4, "tasks_per_step": 64, "max_new_tokens": 2048},
        algo={"policy_map": "per_role"},
        optim={"steps": 200, "lr": 1e-6, "mini_batch_size": 16},
        run={"save_every": 20},
        eval={"episodes": 100, "every": 20},
    ),
    "sokoban-qwen3-8b": dict(
        model={
            "name": "Qwen/Qwen3-8B",
            "dtype": "bfloat16",
            "device": "cuda",
            "engine_batch_size": 64,
        },
        env={"id": "mas/Sokoban-v0", "max_turns": 3},
        rollout={"k": 4, "tasks_per_step": 64, "max_new_tokens": 2048},
        algo={"policy_map": "per_role"},
        optim={"steps": 200, "lr": 1e-6, "mini_batch_size": 16},
        run={"save_every": 20},
        eval={"episodes": 100, "every": 20},
    ),
    "sudoku-qwen3-1.7b": dict(
        model={
            "name": "Qwen/Qwen3-1.7B",
            "dtype": "bfloat16",
            "device": "cuda",
            "engine_batch_size": 128,
        },
        env={"id": "mas/Sudoku-v0", "max_turns": 3},
        rollout={"k": 4, "tasks_per_step": 64, "max_new_tokens": 2048},
        algo={"policy_map": "per_role"},
        optim={"steps": 200, "lr": 1e-6, "mini_batch_size": 16},
        run={"save_every": 20},
        eval={"episodes": 100, "every": 20},
    ),
}
"""Named presets, as ``{section: {field: value}}`` over the defaults of
:class:`~mas_trainer.config.TrainConfig`; ``plan-path-tiny`` is what ``mas-train`` runs with no
arguments."""

DEFAULT_PRESET = "plan-path-tiny"
