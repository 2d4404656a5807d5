"""Policies of a run: building them, their learners, syncing their engines, checkpointing them.

A :class:`Policy` is one trainable model with the engine that samples from it and the learner
that trains it. ``algo.policy_map`` decides how many there are (:func:`role_policies`): one
``shared`` policy for every role, or one per role (``per_role``: a model each; ``per_role_lora``:
one frozen base with one LoRA adapter per role).

Each policy has its own tokenizer (``Policy.tokenizer``): with ``model.role_models`` the roles of
a team can start from different base models (the paper paired Qwen3-1.7B with
Qwen2.5-Coder-0.5B), and a sample's token ids are always the ones its own policy's tokenizer made.

Precision: the learner's parameters (``model.dtype``) are the master weights that checkpoints keep
(so a resumed run continues bit for bit); engines with their own weights get copies in
``model.engine_dtype`` at every sync (:func:`engine_weights`).

* :func:`build_policies` builds every policy complete, in one place: its model, its engine (a
  transformers engine sharing the model, or ``--model.engine vllm``: a vLLM engine in a process of
  its own, :mod:`mas_trainer.engines.process`), its learner (resumed from a checkpoint when there
  is one) and its :class:`Placement`. A policy is never changed afterwards. The Ray backend's
  builder is :func:`mas_trainer.distributed.build.build_ray_policies`;
* :func:`learner_kwargs` is a policy's learner's arguments from the run config (the warm start
  and RL share the learner, hence its optimiser state); :func:`restore_learner` resumes it;
* :func:`sync_engines` gives engines that hold their own weights the learners' new ones;
* :func:`save_checkpoint` writes a checkpoint (HF folders, learner state, trainer state) and
  :func:`load_checkpoint_engines` reads one back as engines (``mas-eval``, leaderboards).

Checkpoint layout (inside ``checkpoints/step-N/`` of a run folder, :mod:`mas_trainer.outputs`)::

    <policy>/              a Hugging Face folder per policy (shared, per_role)
    base/ + adapters/<p>/  the frozen base and one peft adapter per policy (per_role_lora)
    learner-<policy>/      the learner's resumable state: master weights, AdamW moments (a torch
                           distributed checkpoint, one file per learner rank), state.pt (schedule,
                           hyperparameters, step count, generator; Learner.save)
    trainer_state.json     step, RNG states, policy_of, summary so far, log sizes (resume)
    COMPLETE               written last: the folder is whole (see mas_trainer.outputs)
"""

from __future__ import annotations

import copy
import functools
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mas_envs.optional import require
from mas_trainer.config import TrainConfig
from mas_trainer.engines import Engine

if TYPE_CHECKING:
    from mas_trainer.engines.process import EngineProcess
    from mas_trainer.outputs import RunDir
    from mas_trainer.samples import TrainSample

__all__ = [
    "EngineSleepsDuringUpdates",
    "Placement",
    "Policy",
    "PolicyLearner",
    "build_policies",
    "close_engines",
    "engine_gpus",
    "engine_weights",
    "free_cached_memory",
    "learner_kwargs",
    "load_checkpoint_engines",
    "load_learner_state",
    "restore_learner",
    "role_policies",
    "save_checkpoint",
    "sync_engines",
    "tokenizers_of",
]


class PolicyLearner(Protocol):
    """What the train loop needs from a learner (:class:`mas_trainer.learner.Learner`, or the
    Ray backend's :class:`~mas_trainer.distributed.handles.RemoteLearner`)."""

    def update(self, samples: Sequence[TrainSample]) -> dict[str, float]: ...
    def sft_update(
        self, samples: Sequence[TrainSample], lr: float | None = None
    ) -> dict[str, float]: ...
    def save(self, folder: str | Path) -> None: ...
    def load(
        self, folder: str | Path, *, lr: float | None = None, weight_decay: float | None = None
    ) -> None: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...
    def reset_reference(self) -> None: ...


@dataclass(frozen=True)
class Placement:
    """Where a policy's parts run.

    Attributes:
        learner_device: Torch device of the learner's model (in the trainer process; a Ray
            learner rank's own GPU on the Ray backend).
        engine_env: Environment of the engine's process: ``CUDA_VISIBLE_DEVICES`` names the GPUs
            it was given (empty: it shares the learner's model, or runs on the CPU).
        engine_memory: The share of each of its GPUs the engine takes (vLLM's
            ``gpu_memory_utilization``; engines on one GPU split ``model.engine_memory``).
        engine_sleeps: The engine sleeps while the learner updates (vLLM on a GPU it shares with
            the learner).
    """

    learner_device: str = "cpu"
    engine_env: Mapping[str, str] = field(default_factory=dict)
    engine_memory: float = 0.0
    engine_sleeps: bool = False


@dataclass(frozen=True)
class Policy:
    """One trainable policy: its model, generation engine, learner and placement, built together
    (:func:`build_policies`) and never changed afterwards.

    Attributes:
        name: ``"shared"`` or the role name.
        model: The torch model (a peft model for ``per_role_lora``; on the Ray backend a
            :class:`~mas_trainer.distributed.handles.RemoteModel` handle on the learner actors).
        engine: Generates with this policy (shares ``model`` on one device: sync is a no-op).
        learner: The PPO-clip learner of this policy (warm start and RL).
        tokenizer: This policy's tokenizer (chat template, stop and pad ids).
        adapter: The LoRA adapter name (``per_role_lora`` only).
        placement: Where the learner and the engine run.
    """

    name: str
    model: Any
    engine: Engine
    learner: PolicyLearner
    tokenizer: Any
    adapter: str | None = None
    placement: Placement = field(default_factory=Placement)


def tokenizers_of(policies: Mapping[str, Policy]) -> dict[str, Any]:
    """Each policy's tokenizer, by policy name (what rollouts, evaluation and warm start take)."""
    return {name: pol.tokenizer for name, pol in policies.items()}


def role_policies(cfg: TrainConfig, roles: Sequence[str]) -> dict[str, str]:
    """Which policy plays each role: ``shared`` for all, or one named after each role."""
    if cfg.algo.policy_map == "shared":
        return dict.fromkeys(roles, "shared")
    return {r: r for r in roles}


def build_policies(
    cfg: TrainConfig, policy_names: list[str], load_from: Path | None
) -> dict[str, Policy]:
    """Build every policy of a single-process run, complete: model, engine, learner, placement.

    Policies that start from the same model (all of them unless ``model.role_models`` names
    others) load it once and copy it. On low-precision parameters, a learning rate that AdamW could
    not resolve fails here, before any evaluation runs (:func:`~mas_trainer.learner.
    check_update_precision`). ``--model.engine vllm`` starts one engine process per policy
    (``per_role_lora``: one for the base, serving every role's adapter) on a copy of the policy's
    weights (:func:`start_engine_process`).

    Args:
        cfg: The run config.
        policy_names: The policies to build (sorted names).
        load_from: A checkpoint folder to resume from, or None (start from ``model.name``).

    Returns:
        ``name -> Policy``.
    """
    import torch

    from mas_trainer.learner import check_update_precision
    from mas_trainer.models import load_model

    dtype = getattr(torch, cfg.model.dtype)
    dev = cfg.model.device

    def load(name: str) -> tuple[Any, Any]:
        return load_model(name, device=dev, dtype=dtype, seed=cfg.run.seed)

    def check(model: Any, names: Sequence[str]) -> None:
        """Refuse a rate the weights of ``model`` (trained as the policies ``names``) cannot
        resolve: the smallest RL and warm-start rate among those policies."""
        o = cfg.optim
        for steps, rates, field_name, by_policy in (
            (o.steps, {n: o.lr_of(n) for n in names if o.lr_of(n) > 0}, "lr", o.lr_by_policy),
            (
                max(o.warmstart_steps_of(n) for n in names),
                {n: o.warmstart_lr_of(n) for n in names if o.warmstart_steps_of(n)},
                "warmstart_lr",
                o.warmstart_lr_by_policy,
            ),
        ):
            if steps and rates:  # no rate: every policy of the model is frozen (lr 0)
                name = min(rates, key=rates.__getitem__)
                what = f"{field_name}_by_policy[{name!r}]" if name in by_policy else field_name
                params = [p for p in model.parameters() if p.requires_grad]
                check_update_precision(params, rates[name], f" (optim.{what})")

    models: dict[str, tuple[Any, Any, str | None]] = {}  # name -> (model, tokenizer, adapter)
    if cfg.algo.policy_map == "per_role_lora":
        from mas_trainer.models import add_lora_adapters

        base, tokenizer = load(str(load_from / "base") if load_from else cfg.model.name)
        # Fresh adapters; on resume the learners' state restores each adapter's trained weights.
        model = add_lora_adapters(base, policy_names, r=cfg.algo.lora_r, alpha=cfg.algo.lora_alpha)
        check(model, policy_names)
        models = {name: (model, tokenizer, name) for name in policy_names}
    else:
        sources = {
            n: str(load_from / n) if load_from else cfg.model.model_for(n) for n in policy_names
        }
        loaded: dict[str, tuple[Any, Any]] = {}
        for name in policy_names:
            source = sources[name]
            if source in loaded:  # same start as an earlier policy: an independent copy
                model, tokenizer = copy.deepcopy(loaded[source][0]), loaded[source][1]
            else:
                model, tokenizer = loaded[source] = load(source)
                check(model, [n for n in policy_names if sources[n] == source])
            models[name] = (model, tokenizer, None)
    placements = local_placements(cfg, policy_names)
    engines = _local_engines(cfg, models, placements)
    policies = {}
    for name, (model, tokenizer, adapter) in models.items():
        learner: PolicyLearner = _local_learner(cfg, name, model, tokenizer, adapter)
        if placements[name].engine_sleeps:
            learner = EngineSleepsDuringUpdates(learner, engines[name], dev)
        restore_learner(cfg, name, learner, load_from)
        policies[name] = Policy(
            name, model, engines[name], learner, tokenizer, adapter, placements[name]
        )
    return policies


def close_engines(policies: Mapping[str, Policy]) -> None:
    """End the policies' engine processes (``train`` calls it when the run ends or fails)."""
    from mas_trainer.engines.process import ProcessEngine

    for pol in policies.values():
        if isinstance(pol.engine, ProcessEngine):
            pol.engine.process.close()


def engine_gpus(device: str, tp: int, visible: str | None) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` of an engine process on ``device`` with ``tp`` GPUs: the
    GPUs it was given, and no others.

    Args:
        device: ``model.device`` (``cpu``, ``cuda``, ``cuda:1``).
        tp: The engine's tensor-parallel GPUs (``model.engine_tp``), from the device's index on.
        visible: The trainer's own ``CUDA_VISIBLE_DEVICES`` (None: every GPU), which the indices
            of ``device`` count in.

    Returns:
        The value, or None on the CPU.

    Raises:
        ValueError: ``device`` plus ``tp`` runs past the GPUs ``visible`` names.
    """
    if not device.startswith("cuda"):
        return None
    first = int(device.partition(":")[2] or 0)
    ids = [g for g in (visible or "").split(",") if g.strip()] if visible is not None else None
    wanted = list(range(first, first + tp))
    if ids is None:
        return ",".join(map(str, wanted))
    if wanted[-1] >= len(ids):
        raise ValueError(
            f"model.device {device} with model.engine_tp {tp} needs GPUs {wanted} of "
            f"CUDA_VISIBLE_DEVICES={visible!r}, which names {len(ids)}: lower model.engine_tp or "
            "pick another model.device"
        )
    return ",".join(ids[i].strip() for i in wanted)


def local_placements(cfg: TrainConfig, policy_names: Sequence[str]) -> dict[str, Placement]:
    """Where each policy of a single-process run puts its learner and its engine: the learners
    on ``model.device``; vLLM engines in processes that see only their GPUs, splitting
    ``model.engine_memory`` (one engine per policy, or one for ``per_role_lora``'s base)."""
    dev = cfg.model.device
    if cfg.model.engine != "vllm":
        return {n: Placement(learner_device=dev) for n in policy_names}
    gpus = engine_gpus(dev, cfg.model.engine_tp, os.environ.get("CUDA_VISIBLE_DEVICES"))
    llms = 1 if cfg.algo.policy_map == "per_role_lora" else len(policy_names)
    env = {} if gpus is None else {"CUDA_VISIBLE_DEVICES": gpus}
    return {
        n: Placement(
            learner_device=dev,
            engine_env=env,
            engine_memory=cfg.model.engine_memory / llms,
            engine_sleeps=gpus is not None,
        )
        for n in policy_names
    }


def _local_engines(
    cfg: TrainConfig, models: Mapping[str, tuple[Any, Any, str | None]], placements: Any
) -> dict[str, Engine]:
    """Each policy's engine: a transformers engine on its model, or a vLLM engine process."""
    if cfg.model.engine == "vllm":
        from mas_trainer.engines.process import ProcessEngine

        names = list(models)
        if cfg.algo.policy_map == "per_role_lora":  # one base, every role's adapter
            model, tokenizer, _ = models[names[0]]
            shared = start_engine_process(cfg, names[0], model, tokenizer, placements[names[0]])
            return {n: ProcessEngine(shared, n, adapter=True) for n in names}
        return {
            n: ProcessEngine(start_engine_process(cfg, n, m, tok, placements[n]), n)
            for n, (m, tok, _) in models.items()
        }
    import torch

    from mas_trainer.engines.transformers import TransformersEngine

    return {
        n: TransformersEngine(
            model,
            tokenizer,
            batch_size=cfg.model.engine_batch_size,
            adapter=adapter,
            autocast=getattr(torch, cfg.model.engine_weights_dtype),
        )
        for n, (model, tokenizer, adapter) in models.items()
    }


def start_engine_process(
    cfg: TrainConfig, name: str, model: Any, tokenizer: Any, placement: Placement
) -> EngineProcess:
    """Start the vLLM engine process of policy ``name`` on a copy of ``model``'s weights (in
    ``model.engine_dtype``); a peft model's process serves every adapter of it (one engine each,
    by adapter name), with the adapters' current weights loaded."""
    from mas_trainer.engines.process import EngineProcess, ProcessEngine
    from mas_trainer.engines.vllm import (
        adapter_config,
        llm_options,
        save_for_vllm,
        start_vllm_engines,
    )

    folder = tempfile.TemporaryDirectory(prefix=f"mas-vllm-{name}-")
    save_for_vllm(model, tokenizer, folder.name)
    options = llm_options(
        dtype=cfg.model.engine_weights_dtype,
        seed=cfg.run.seed,
        device=cfg.model.device,
        tensor_parallel_size=cfg.model.engine_tp,
        gpu_memory_utilization=placement.engine_memory,
        max_num_seqs=cfg.model.engine_batch_size,
    )
    lora = getattr(model, "peft_config", None)
    adapters = {a: adapter_config(model, a) for a in lora} if lora else None
    build = functools.partial(
        start_vllm_engines,
        folder.name,
        options,
        device=cfg.model.device,
        seed=cfg.run.seed,
        name=name,
        adapters=adapters,
    )
    # The engine core runs in the engine's process: weight sync hands it the tensors.
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", **placement.engine_env}
    process = EngineProcess(build, env=env, label=name, keep=folder)
    if adapters:
        weights = engine_weights(model, cfg.model.engine_weights_dtype)
        for adapter in adapters:
            ProcessEngine(process, adapter, adapter=True).load_weights(weights)
    return process


def learner_kwargs(
    cfg: TrainConfig, name: str, tokenizer: Any, adapter: str | None
) -> dict[str, Any]:
    """The arguments of policy ``name``'s learner (:class:`~mas_trainer.learner.Learner`'s,
    after the model): the warm start's supervised steps and RL's PPO steps share it (one AdamW
    state for both)."""
    import torch

    from mas_trainer.plan import checkpoint_layers

    return {
        "lr": cfg.optim.lr_of(name),
        "weight_decay": cfg.optim.weight_decay,
        "grad_clip": cfg.optim.grad_clip,
        "mini_batch_size": cfg.optim.mini_batch_size,
        "micro_batch_size": cfg.optim.micro_batch_size or None,
        "temperature": cfg.rollout.temperature,
        "top_p": cfg.rollout.top_p,
        "clip_low": cfg.algo.clip_low,
        "clip_high": cfg.algo.clip_high,
        "dual_clip": cfg.algo.dual_clip or None,
        "kl_coef": cfg.algo.kl_coef,  # the learner keeps a frozen copy of the policy as reference
        "dtype": None if cfg.model.autocast == "none" else getattr(torch, cfg.model.autocast),
        "adapter": adapter,
        "pad_token_id": tokenizer.pad_token_id,
        "gradient_checkpointing": cfg.model.gradient_checkpointing,
        "checkpoint_layers": checkpoint_layers(cfg) if cfg.model.gradient_checkpointing else None,
        "checkpoint_mode": cfg.model.checkpoint_mode,
        "measure_change": cfg.algo.measure_change,
        "seed": cfg.run.seed,
    }


def _local_learner(
    cfg: TrainConfig, name: str, model: Any, tokenizer: Any, adapter: str | None
) -> PolicyLearner:
    from mas_trainer.learner import Learner

    return Learner(model, **learner_kwargs(cfg, name, tokenizer, adapter))


def restore_learner(
    cfg: TrainConfig, name: str, learner: PolicyLearner, load_from: Path | None
) -> None:
    """Resume ``learner`` from checkpoint ``load_from`` when it holds a learner state for
    ``name`` (:func:`load_learner_state`); the config's rate and weight decay win over the saved
    optimiser's."""
    if load_from is not None:
        lr, wd = cfg.optim.lr_of(name), cfg.optim.weight_decay
        load_learner_state(load_from, name, learner, lr=lr, weight_decay=wd)


def free_cached_memory(device: str) -> None:
    """Return the blocks torch's caching allocator holds on ``device`` to the GPU (before an
    engine on the same GPU wakes up and asks for them); a no-op off CUDA."""
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()


class EngineSleepsDuringUpdates:
    """A learner whose updates first put its policy's vLLM engine to sleep (they share a GPU),
    and then give the learner's cached GPU blocks back before the engine wakes.

    The engine wakes its weights for the sync that follows the update and its KV cache for the
    next rollout, so the learner's update and the KV cache never hold the memory at once.

    Args:
        learner: The policy's learner.
        engine: Its engine (``sleep()``; ``wake_up`` happens in the engine's next call).
        device: The learner's device (:func:`free_cached_memory`).
    """

    def __init__(self, learner: PolicyLearner, engine: Any, device: str) -> None:
        self.learner = learner
        self.engine = engine
        self.device = device

    def update(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        self.engine.sleep()
        try:
            return self.learner.update(samples)
        finally:
            free_cached_memory(self.device)

    def sft_update(
        self, samples: Sequence[TrainSample], lr: float | None = None
    ) -> dict[str, float]:
        self.engine.sleep()
        try:
            return self.learner.sft_update(samples, lr=lr)
        finally:
            free_cached_memory(self.device)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.learner, name)


def engine_weights(model: Any, dtype: str) -> Mapping[str, Any]:
    """A policy's weights as its engine takes them: every tensor cast to ``dtype``
    (``model.engine_dtype``; bf16 copies of fp32 master weights). A Ray policy's
    :class:`~mas_trainer.distributed.handles.RemoteModel` gathers them on its learner ranks (from
    the shards, with FSDP) and casts them there."""
    import torch

    if hasattr(model, "engine_weights"):
        return model.engine_weights(dtype)
    target = getattr(torch, dtype)
    return {k: v.detach().to(target) for k, v in model.state_dict().items()}


def sync_engines(policies: Mapping[str, Policy], dtype: str = "float32") -> None:
    """Give engines that hold their own weights (vLLM, remote) the learners' weights, cast to
    ``dtype`` (``model.engine_weights_dtype``); a no-op for engines that share the model."""
    for pol in policies.values():
        if getattr(pol.engine, "model", pol.model) is not pol.model:
            pol.engine.load_weights(engine_weights(pol.model, dtype))


def save_checkpoint(
    run: RunDir,
    step: int,
    policies: Mapping[str, Policy],
    state: dict[str, Any],
    *,
    tag: str | None = None,
) -> Path:
    """Checkpoint every policy (HF folder of its master weights, its tokenizer, learner state) and
    the trainer state, atomically. ``tag="best"`` writes ``checkpoints/best`` instead of
    ``checkpoints/step-N`` (it neither moves ``latest`` nor counts toward the kept ones)."""

    def write(folder: Path) -> None:
        lora = any(pol.adapter is not None for pol in policies.values())
        if lora:  # one frozen base + adapters/<role>/ (peft's layout for named adapters)
            model = next(iter(policies.values())).model
            base = model.get_base_model()
            clean = {  # the frozen base without peft's wrapping
                k.replace(".base_layer.", "."): v
                for k, v in base.state_dict().items()
                if "lora_" not in k
            }
            base.save_pretrained(folder / "base", state_dict=clean)
            next(iter(policies.values())).tokenizer.save_pretrained(folder / "base")
            model.save_pretrained(folder / "adapters")
        for name, pol in policies.items():
            if not lora:
                pol.model.save_pretrained(folder / name)
                pol.tokenizer.save_pretrained(folder / name)
            pol.learner.save(folder / f"learner-{name}")  # each rank its own shards, no copies
        (folder / "trainer_state.json").write_text(json.dumps(state, indent=2) + "\n")

    return run.save_checkpoint(step, write, tag=tag)


def load_learner_state(
    folder: Path,
    name: str,
    learner: PolicyLearner,
    *,
    lr: float | None = None,
    weight_decay: float | None = None,
) -> bool:
    """Restore policy ``name``'s ``learner`` from checkpoint ``folder`` (``learner-<name>/``, or
    the single ``learner-<name>.pt`` file of checkpoints written before the sharded format),
    running at ``lr`` / ``weight_decay`` from now on when given (the config's, not the saved ones).

    Returns:
        Whether the checkpoint held a learner state for the policy.
    """
    if (folder / f"learner-{name}").is_dir():
        learner.load(folder / f"learner-{name}", lr=lr, weight_decay=weight_decay)
        return True
    legacy = folder / f"learner-{name}.pt"
    if not legacy.is_file():
        return False
    import torch

    from mas_trainer.learner import with_hyperparameters

    state = torch.load(legacy, weights_only=False)
    group = state["optimizer"]["param_groups"][0]
    state = with_hyperparameters(
        state,
        lr=group["initial_lr"] if lr is None else lr,
        weight_decay=group["weight_decay"] if weight_decay is None else weight_decay,
    )
    learner.load_state_dict(state)
    return True


def load_checkpoint_engines(
    folder: str | Path, *, device: str, dtype: Any, batch_size: int = 64
) -> tuple[dict[str, Any], Any, dict[str, str]]:
    """Load every policy of a checkpoint folder (``checkpoints/step-N``) as greedy-ready engines.

    Returns:
        ``(engines by policy name, tokenizers by policy name, policy_of role -> policy)``.
    """
    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.models import load_model

    folder = Path(folder)
    state = json.loads((folder / "trainer_state.json").read_text())
    names = sorted(set(state["policy_of"].values()))
    engines: dict[str, Any] = {}
    tokenizers: dict[str, Any] = {}
    if (folder / "base").is_dir():  # per_role_lora: one base, one adapter per policy
        peft = require("peft", purpose="a per_role_lora checkpoint")
        base, tokenizer = load_model(str(folder / "base"), device=device, dtype=dtype)
        lora: Any = peft.PeftModel.from_pretrained(
            base, str(folder / "adapters" / names[0]), adapter_name=names[0]
        )
        for name in names[1:]:
            lora.load_adapter(str(folder / "adapters" / name), adapter_name=name)
        lora.eval()
        for name in names:
            engines[name] = TransformersEngine(lora, tokenizer, batch_size=batch_size, adapter=name)
            tokenizers[name] = tokenizer
    else:
        for name in names:
            model, tokenizers[name] = load_model(str(folder / name), device=device, dtype=dtype)
            engines[name] = TransformersEngine(model, tokenizers[name], batch_size=batch_size)
    return engines, tokenizers, dict(state["policy_of"])
