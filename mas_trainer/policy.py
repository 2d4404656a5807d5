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

* :func:`build_policies` loads the model(s) and wraps each in a transformers engine (the single-
  process backend; the Ray backend's builder is :func:`mas_trainer.distributed.build.
  build_ray_policies`, and ``--model.engine vllm`` swaps in vLLM engines afterwards:
  :func:`mas_trainer.engines.vllm.attach_vllm_engines`);
* :func:`make_learner` builds a policy's learner from the run config (the warm start and RL each
  get their own, hence their own optimiser state);
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
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mas_envs.optional import require
from mas_trainer.config import TrainConfig
from mas_trainer.engines import Engine

if TYPE_CHECKING:
    from mas_trainer.outputs import RunDir
    from mas_trainer.samples import TrainSample

__all__ = [
    "Policy",
    "PolicyLearner",
    "build_policies",
    "engine_weights",
    "load_checkpoint_engines",
    "load_learner_state",
    "make_learner",
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


LearnerFactory = Callable[..., PolicyLearner]
"""Builds a learner: ``factory(model, **learner_kwargs)``, the signature of ``Learner``."""


@dataclass
class Policy:
    """One trainable policy: its model, generation engine and learner.

    Attributes:
        name: ``"shared"`` or the role name.
        model: The torch model (a peft model for ``per_role_lora``; on the Ray backend a
            :class:`~mas_trainer.distributed.handles.RemoteModel` handle on the learner actors).
        engine: Generates with this policy (shares ``model`` on one device: sync is a no-op).
        learner: The PPO-clip learner of this policy (set by the train loop).
        adapter: The LoRA adapter name (``per_role_lora`` only).
        tokenizer: This policy's tokenizer (chat template, stop and pad ids).
        learner_factory: How :func:`make_learner` builds this policy's learners; None builds a
            local :class:`~mas_trainer.learner.Learner` on ``model`` (the Ray backend builds
            remote learners; a colocated vLLM engine, learners that put it to sleep first).
    """

    name: str
    model: Any
    engine: Engine
    learner: PolicyLearner | None = None
    adapter: str | None = None
    learner_factory: LearnerFactory | None = None
    tokenizer: Any = None


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
    """Load the model(s), wrap each policy with a transformers engine (learners come later).

    Policies that start from the same model (all of them unless ``model.role_models`` names
    others) load it once and copy it. On low-precision parameters, a learning rate that AdamW could
    not resolve fails here, before any evaluation runs (:func:`~mas_trainer.learner.
    check_update_precision`).

    Args:
        cfg: The run config.
        policy_names: The policies to build (sorted names).
        load_from: A checkpoint folder to resume from, or None (start from ``model.name``).

    Returns:
        ``name -> Policy``, each with its model, engine and tokenizer.
    """
    import torch

    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.learner import check_update_precision
    from mas_trainer.models import load_model

    dtype = getattr(torch, cfg.model.dtype)
    sample_dtype = getattr(torch, cfg.model.engine_weights_dtype)
    dev = cfg.model.device

    def load(name: str) -> tuple[Any, Any]:
        return load_model(name, device=dev, dtype=dtype, seed=cfg.run.seed)

    def engine(model: Any, tokenizer: Any, adapter: str | None = None) -> TransformersEngine:
        return TransformersEngine(
            model,
            tokenizer,
            batch_size=cfg.model.engine_batch_size,
            adapter=adapter,
            autocast=sample_dtype,
        )

    def check(model: Any, names: Sequence[str]) -> None:
        """Refuse a rate the weights of ``model`` (trained as the policies ``names``) cannot
        resolve: the smallest RL and warm-start rate among those policies."""
        o = cfg.optim
        for steps, rates, field_name, by_policy in (
            (o.steps, {n: o.lr_of(n) for n in names}, "lr", o.lr_by_policy),
            (
                max(o.warmstart_steps_of(n) for n in names),
                {n: o.warmstart_lr_of(n) for n in names if o.warmstart_steps_of(n)},
                "warmstart_lr",
                o.warmstart_lr_by_policy,
            ),
        ):
            if steps:
                name = min(rates, key=rates.__getitem__)
                what = f"{field_name}_by_policy[{name!r}]" if name in by_policy else field_name
                params = [p for p in model.parameters() if p.requires_grad]
                check_update_precision(params, rates[name], f" (optim.{what})")

    policies: dict[str, Policy] = {}
    if cfg.algo.policy_map == "per_role_lora":
        from mas_trainer.models import add_lora_adapters

        base, tokenizer = load(str(load_from / "base") if load_from else cfg.model.name)
        # Fresh adapters; on resume the learners' state restores each adapter's trained weights.
        model = add_lora_adapters(base, policy_names, r=cfg.algo.lora_r, alpha=cfg.algo.lora_alpha)
        check(model, policy_names)
        for name in policy_names:
            policies[name] = Policy(
                name, model, engine(model, tokenizer, name), adapter=name, tokenizer=tokenizer
            )
        return policies
    sources = {n: str(load_from / n) if load_from else cfg.model.model_for(n) for n in policy_names}
    loaded: dict[str, tuple[Any, Any]] = {}
    for name in policy_names:
        source = sources[name]
        if source in loaded:  # same start as an earlier policy: an independent copy
            model, tokenizer = copy.deepcopy(loaded[source][0]), loaded[source][1]
        else:
            model, tokenizer = loaded[source] = load(source)
            check(model, [n for n in policy_names if sources[n] == source])
        policies[name] = Policy(name, model, engine(model, tokenizer), tokenizer=tokenizer)
    return policies


def make_learner(
    cfg: TrainConfig, policy: Policy, *, lr: float, mini_batch_size: int
) -> PolicyLearner:
    """The learner of ``policy``: the warm start's supervised steps and RL's PPO steps (one
    AdamW state for both)."""
    import torch

    from mas_trainer.learner import Learner

    factory: LearnerFactory = policy.learner_factory or Learner
    return factory(
        policy.model,
        lr=lr,
        weight_decay=cfg.optim.weight_decay,
        grad_clip=cfg.optim.grad_clip,
        mini_batch_size=mini_batch_size,
        micro_batch_size=cfg.optim.micro_batch_size or None,
        temperature=cfg.rollout.temperature,
        top_p=cfg.rollout.top_p,
        clip_low=cfg.algo.clip_low,
        clip_high=cfg.algo.clip_high,
        dual_clip=cfg.algo.dual_clip or None,
        kl_coef=cfg.algo.kl_coef,  # the learner keeps a frozen copy of the policy as reference
        dtype=None if cfg.model.autocast == "none" else getattr(torch, cfg.model.autocast),
        adapter=policy.adapter,
        pad_token_id=policy.tokenizer.pad_token_id,
        gradient_checkpointing=cfg.model.gradient_checkpointing,
        seed=cfg.run.seed,
    )


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
            if pol.learner is not None:  # every rank writes its own shards, no copies
                pol.learner.save(folder / f"learner-{name}")
        (folder / "trainer_state.json").write_text(json.dumps(state, indent=2) + "\n")

    return run.save_checkpoint(step, write, tag=tag)


def load_learner_state(
    folder: Path, pol: Policy, *, lr: float | None = None, weight_decay: float | None = None
) -> bool:
    """Restore ``pol.learner`` from checkpoint ``folder`` (``learner-<policy>/``, or the single
    ``learner-<policy>.pt`` file of checkpoints written before the sharded format), running at
    ``lr`` / ``weight_decay`` from now on when given (the config's, not the saved ones).

    Returns:
        Whether the checkpoint held a learner state for the policy.
    """
    assert pol.learner is not None
    if (folder / f"learner-{pol.name}").is_dir():
        pol.learner.load(folder / f"learner-{pol.name}", lr=lr, weight_decay=weight_decay)
        return True
    legacy = folder / f"learner-{pol.name}.pt"
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
    pol.learner.load_state_dict(state)
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
