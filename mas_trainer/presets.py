"""The named presets of ``mas-train`` (``mas-train PRESET``), as plain tables.

Two families:

* **the tiny CPU preset** (``plan-path-tiny``): a model built in code that trains on a laptop CPU
  in minutes (Plan-Path only: the Sokoban and Sudoku tiny presets learnt nothing, 0% -> 4% -> 1%
  and 0% -> 0% -> 0%, and were removed; docs/trainer.md);
* **paper presets** (``<task>-qwen3-<size>[-<variant>]``): one per cell of the paper's Tables 1-2,
  generated from :data:`PAPER_ROWS` (task x model size: env id, tasks per step, response tokens,
  steps) x :data:`PAPER_VARIANTS` (the table's rows: AT-GRPO per-role, shared, and the baselines),
  over one block of values the paper's runs share (:func:`_paper_common`) and the resources of each
  model size (:data:`PAPER_SCALE`). To add a task, append a :class:`PaperRow`; its five variants
  appear at once. ``docs/reproduce.md`` maps every preset to its paper row.

Each preset is ``{section: {field: value}}`` over the defaults of
:class:`~mas_trainer.config.TrainConfig`; :data:`mas_trainer.config.PRESETS` holds them as
validated configs (built, and so checked, on import). ``mas-train --help PRESET`` prints every
field with its value in that preset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CODE_DATA",
    "DEFAULT_PRESET",
    "MATH_DATA",
    "PAPER_ROWS",
    "PAPER_TESTS",
    "PAPER_VARIANTS",
    "PRESETS",
    "PaperRow",
    "paper_presets",
]

Table = dict[str, Any]
Preset = dict[str, Table]


# ----------------------------------------------------------------------------- paper presets (GPU)


@dataclass(frozen=True)
class PaperRow:
    """One task at one model size of the paper's tables, with the values its scripts ran.

    Attributes:
        task: Preset name prefix (``plan-path``).
        env_id: The registered env (the game tool agents write and run code: ``*Code`` ids).
        size: Model size in the preset name (``1.7b``, ``8b``; :data:`PAPER_MODELS`).
        tasks_per_step: Root tasks per RL step (x K candidates per turn and agent).
        max_new_tokens: Response tokens per agent turn.
        steps: RL steps.
        env_options: Env constructor arguments (the game ids' defaults are the paper's boards;
            code and math read the files that ``mas-data prepare`` writes: :data:`CODE_DATA`,
            :data:`MATH_DATA`).
        algo: Algorithm settings of this row only (code and math: the paper's group filter).
        max_turns: Turns per episode.
        test_episodes: Held-out test episodes per evaluation (games: 100 generated boards; code
            and math: every problem of the benchmark, the first ``test_episodes`` of them).
    """

    task: str
    env_id: str
    size: str
    tasks_per_step: int
    max_new_tokens: int
    steps: int
    env_options: Table = field(default_factory=dict)
    algo: Table = field(default_factory=dict)
    max_turns: int = 3
    test_episodes: int = 100

    def name(self, variant: str = "") -> str:
        return f"{self.task}-qwen3-{self.size}{variant}"


PAPER_MODELS = {"1.7b": "Qwen/Qwen3-1.7B", "8b": "Qwen/Qwen3-8B"}
"""The base model of each size (a hub id; ``--model.name /path`` for a local copy)."""

CODE_DATA: Table = {
    "train": ["data/apps/train.jsonl", "data/codecontests/train.jsonl"],
    "validation": ["data/apps/validation.jsonl", "data/codecontests/validation.jsonl"],
    "test": "data/livecodebench/test.jsonl",
}
"""The code rows' problems: trained on APPS [500:4500] and CodeContests' train split, selected on
APPS [4500:] and CodeContests' valid split, tested on LiveCodeBench v6 (``mas-data prepare apps |
codecontests | livecodebench --out data``; docs/data.md)."""

MATH_DATA: Table = {
    "train": "data/polaris/train.jsonl",
    "validation": "data/polaris/validation.jsonl",
    "test": "data/aime24/test.jsonl",
}
"""The math rows' problems: trained on Polaris-53K, selected on problems held out of it, tested on
AIME24 (``mas-data prepare polaris --validation 500 --out data``, ``mas-data prepare aime24 --out
data``; docs/data.md)."""

ALL_PROBLEMS = 100_000
"""``eval.episodes`` that plays every problem of a benchmark (the largest has a few thousand)."""

_GROUP_FILTER: Table = {"drop_low_mean": 0.3}
"""The paper's code and math runs drop the lowest-mean 30% of each step's groups."""

PAPER_ROWS: list[PaperRow] = [
    # task       env id (code tool)       size   tasks/step  response tokens  steps
    PaperRow("plan-path", "mas/PlanPathCode-v0", "1.7b", 128, 4096, 200),
    PaperRow("plan-path", "mas/PlanPathCode-v0", "8b", 128, 4096, 200),
    PaperRow("sokoban", "mas/SokobanCode-v0", "1.7b", 64, 2048, 200),
    PaperRow("sokoban", "mas/SokobanCode-v0", "8b", 32, 2048, 200),
    PaperRow("sudoku", "mas/SudokuCode-v0", "1.7b", 64, 4096, 400),
    PaperRow("sudoku", "mas/SudokuCode-v0", "8b", 64, 4096, 400),
    # Code and math: the prepared data sets (relative to the folder the run starts in), 400
    # steps, and the paper's group filter (drop the lowest-mean 30% of each step's groups).
    *(
        PaperRow(
            task,
            env_id,
            size,
            64,
            4096,
            400,
            {"problems": data},
            _GROUP_FILTER,
            test_episodes=ALL_PROBLEMS,
        )
        for task, env_id, data in (
            ("code", "mas/Code-v1", CODE_DATA),
            ("math", "mas/Math-v1", MATH_DATA),
        )
        for size in ("1.7b", "8b")
    ),
]
"""The paper's rows (Tables 1-2; values from its scripts, docs/reproduce.md and issues 12 and 14). A
code or math row's test split is the first benchmark of its column group (LiveCodeBench v6,
AIME24); :data:`PAPER_TESTS` names the files of the others, scored on the same checkpoint."""

PAPER_TESTS: dict[str, dict[str, str]] = {
    "code": {
        "LiveCodeBench v6": "data/livecodebench/test.jsonl",
        "APPS": "data/apps/test.jsonl",
        "CodeContests": "data/codecontests/test.jsonl",
    },
    "math": {
        "AIME24": "data/aime24/test.jsonl",
        "AIME25": "data/aime25/test.jsonl",
        "OlympiadBench": "data/olympiadbench/test.jsonl",
    },
}
"""The test benchmarks (the paper's columns) of the code and math rows: prepared test files."""

_UNTRAINED: Preset = {
    "model": {"engine_tp": 1},
    "optim": {"steps": 0},
    "algo": {"policy_map": "shared"},
    "run": {"backend": "local", "ray_sharding": "replicate"},
}

PAPER_VARIANTS: dict[str, tuple[str, Preset]] = {
    "": ("MAS + AT-GRPO, per-role policies", {"algo": {"policy_map": "per_role"}}),
    "-shared": ("MAS + AT-GRPO, shared policy", {"algo": {"policy_map": "shared"}}),
    "-prompting": ("MAS prompting (no training)", _UNTRAINED),
    "-single": ("single agent (no training)", {**_UNTRAINED, "env": {"mode": "single"}}),
    "-single-grpo": (
        "single agent + GRPO",
        {"env": {"mode": "single"}, "algo": {"policy_map": "shared"}},
    ),
}
"""The rows of the paper's tables: preset-name suffix -> (row, what the variant sets). The
untrained rows evaluate the base model only (``optim.steps 0``: held-out success at step 0 is the
row's number); they run on one GPU whatever the size (one engine, not tensor-parallel)."""

PAPER_SCALE: dict[str, Preset] = {
    # One 80 GB GPU. Micro-batches of 2 with every layer checkpointed selectively (each keeps its
    # matmul and attention outputs; the replay recomputes only pointwise ops, no matmul FLOPs):
    # the per-role rows hold two learners on the card and peak at ~65 GiB, the shared ones at
    # ~45 GiB (`mas-train plan-path-qwen3-1.7b --plan`); the training pass costs 1.00x one
    # forward + backward, against 1.32x with every layer fully recomputed.
    "1.7b": {
        "model": {
            "engine_batch_size": 256,
            "checkpoint_layers": "0",
            "checkpoint_mode": "selective",
        },
        "optim": {"micro_batch_size": 2},
    },
    # A full fine-tune of 8B is 16 bytes/parameter = 131 GB per policy: FSDP2 over the 4 GPUs of
    # each policy's Ray pool (33 GB each), vLLM tensor-parallel over 2 of them (the paper's TP).
    "8b": {
        "model": {"engine_batch_size": 128, "engine_tp": 2},
        "optim": {"micro_batch_size": 2},
        "run": {
            "backend": "ray",
            "ray_gpus_per_policy": 4,
            "ray_learners": 4,
            "ray_sharding": "fsdp",
        },
    },
}
"""Resources and batch shapes of each model size (memory only: no value the algorithm sees)."""


def _paper_common(row: PaperRow) -> Preset:
    """What every paper run shares: fp32 master weights with bf16 compute (the engine gets bf16
    copies), Qwen3's chat template with thinking off, one temperature for sampling and learner,
    K=4, 16 prompts x K = 64 samples per optimizer step, the paper's PPO-clip and AdamW values."""
    return dict(
        model={
            "name": PAPER_MODELS[row.size],
            "dtype": "float32",
            "autocast": "bfloat16",
            "engine_dtype": "bfloat16",
            "device": "cuda",
            "engine": "vllm",
            "engine_memory": 0.4,
            "gradient_checkpointing": True,
        },
        env={
            "id": row.env_id,
            "mode": "mas",
            "max_turns": row.max_turns,
            "options": dict(row.env_options),
        },
        rollout={
            "mode": "tree",
            "k": 4,
            "tasks_per_step": row.tasks_per_step,
            "max_new_tokens": row.max_new_tokens,
            "temperature": 0.6,
            "top_p": 1.0,
            "enable_thinking": False,
            "system_message": True,
        },
        algo={
            "clip_low": 0.2,
            "clip_high": 0.2,
            "dual_clip": 3.0,
            "kl_coef": 0.0,
            # The post-update KL / clip-fraction diagnostic on one sample in 8, not all.
            "measure_change": 0.125,
            **row.algo,
        },
        optim={
            "steps": row.steps,
            "lr": 1e-6,
            "weight_decay": 0.01,
            "grad_clip": 1.0,
            "mini_batch_size": 64,
            "warmstart_steps": 0,
        },
        run={"save_every": 20},
        eval={
            "episodes": row.test_episodes,
            "every": 0,
            "select_every": 20,
            "select_episodes": 100,
        },
    )


def _merge(*presets: Preset) -> Preset:
    """Section-wise merge: later presets override earlier ones field by field."""
    out: Preset = {}
    for preset in presets:
        for section, fields in preset.items():
            out[section] = {**out.get(section, {}), **fields}
    return out


def paper_presets(rows: list[PaperRow] | None = None) -> dict[str, Preset]:
    """Every (row x variant) preset, by name (``plan-path-qwen3-1.7b-shared``)."""
    return {
        row.name(suffix): _merge(_paper_common(row), PAPER_SCALE[row.size], variant)
        for row in (PAPER_ROWS if rows is None else rows)
        for suffix, (_, variant) in PAPER_VARIANTS.items()
    }


# ---------------------------------------------------------------------------------------- presets

PRESETS: dict[str, Preset] = {
    # The embedded default (docs/trainer.md has the numbers and what each phase contributes): the
    # paper's mechanism at CPU scale. Plan-Path 5x5 in which the tool agent writes a program that
    # the sandbox runs (mas/PlanPathCode-v1); one 0.6M-parameter model per role with a BPE
    # tokenizer built from Plan-Path's texts. The warm start teaches the answer formats: the tool
    # sees the oracle's search program in 20% of its targets and programs printing random moves
    # otherwise, the planner the oracle team's answers; AT-GRPO then finds which program earns
    # the reward. Sampling at T=1 keeps the minority program in reach.
    "plan-path-tiny": dict(
        model={"name": "tiny:tiny-bpe", "dtype": "float32"},
        env={
            "id": "mas/PlanPathCode-v1",
            "max_turns": 3,
            "options": {"rows": 5, "cols": 5, "wall_prob": 0.22},
        },
        rollout={
            "k": 4,
            "tasks_per_step": 16,
            "max_new_tokens": 48,
            "system_message": False,
            "temperature": 1.0,
        },
        algo={"policy_map": "per_role", "drop_zero_var": True},
        optim={
            "steps": 60,
            "lr": 3e-4,
            "mini_batch_size": 32,
            "warmstart_steps": 400,
            # The planner's copy of the printed path is learnt late (docs/results.md): 800 steps.
            "warmstart_steps_factor_by_policy": {"planner": 2},
            "warmstart_lr": 1e-2,
            # Cosine decay to 5%: at a constant rate the SFT loss stalls at the minibatch noise.
            "warmstart_min_lr_ratio": 0.05,
            "warmstart_batch_size": 32,
            "warmstart_episodes": 512,  # twice the planner's steps: twice the episodes
            "warmstart_oracle_share": {"tool": 0.2},
        },
        # One thread: on a shared 2-core machine two threads fight other processes and can run
        # 10x slower; one thread loses at most 2x on an idle machine.
        run={"save_every": 0, "threads": 1},
        # Held-out success every 20 RL steps as well: the run's own plot shows RL's curve.
        eval={"episodes": 200, "every": 20},
    ),
    **paper_presets(),
}
"""Named presets, as ``{section: {field: value}}`` over the defaults of
:class:`~mas_trainer.config.TrainConfig`; ``plan-path-tiny`` is what ``mas-train`` runs with no
arguments."""

DEFAULT_PRESET = "plan-path-tiny"
