"""The memory plan of a run (``mas-train PRESET --plan``): what each GPU will hold, before any model
loads, and whether it fits.

The learner's figures are torch's own accounting, not arithmetic: the model is built from its
config under ``torch._subclasses.FakeTensorMode`` (tensors with shapes and dtypes but no storage),
and one training step at the run's micro-batch shape runs the learner's own code path under
``torch.distributed._tools``' ``MemTracker``: the decoder through
:func:`~mas_trainer.learner.completion_hidden`, log-probs through
:func:`~mas_trainer.learner.hidden_logprobs` (over vocabulary chunks of
:data:`~mas_trainer.learner.VOCAB_CHUNK` rows: no ``(B, T, V)`` tensor unless ``rollout.top_p``
< 1), backward with the run's gradient checkpointing and autocast, gradient clipping and an AdamW
step whose moments already exist. On ``run.ray_sharding fsdp`` the model is sharded with
:func:`~mas_trainer.distributed.learners.shard_model` over a fake process group of the run's
learner ranks and called through its root (``CompletionLM``, what ``FSDPLearner`` calls), under
``FSDPMemTracker``. The tracker reports the peak by kind: parameters, gradients, optimizer states,
activations and temporaries, FSDP's gathered bf16 units.

Tracking every layer of an 8B model takes minutes on a CPU, so the step is tracked with 1 and 2
decoder layers (2 and 3 under FSDP2, whose prefetch makes the first layer differ) and extrapolated
per layer (every tracked figure is linear in the layer count:
parameters, gradients and moments per layer, one gradient-checkpoint input per layer; the rest
does not depend on it). Two phases are tracked apart, since their peaks grow differently: forward
and backward (peak in the backward pass: checkpointed layers recomputed, the LM head's
chunks) and the optimizer step
(every gradient alive). Where the K samples of a group share a prompt, the step runs the
learner's layout: the micro-batch's prompts in a pass of their own, held with their keys' and
values' gradients while its completions run forward and backward on them, then the prompts'
backward. With ``model.checkpoint_layers`` below all layers, a checkpointed and a
plain layer are tracked apart, each extrapolated by its own count (from a base of 2 plain
layers, where the plain layers' activations are the backward pass's peak); with
``model.checkpoint_mode selective`` the "plain" layers are checkpointed selectively (they keep
their matmul and attention outputs only, torch's selective checkpointing holds them), tracked
the same way. ``auto`` is the fewest checkpointed layers whose update fits every GPU.
``tests/trainer/test_plan.py`` checks the extrapolation against a full track.

The checkpoint disk estimate is :func:`checkpoint_bytes` per policy (the HF export and
:meth:`~mas_trainer.learner.Learner.save`'s sharded state) times the checkpoints kept.

The engine's figures are arithmetic: vLLM takes ``model.engine_memory`` of each card while awake
(its weights, ``2 N / tp`` bytes in bf16, and the KV cache in the rest) and sleeps during updates
(weights to CPU memory, cache dropped). Sequences are ``P + R`` tokens, ``R`` the preset's
``rollout.max_new_tokens`` and ``P = R + PROMPT_OVER_RESPONSE`` (the planner's prompt holds the
tool's program and its output).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mas_trainer.config import TrainConfig

__all__ = [
    "QWEN3_SHAPES",
    "LearnerMemory",
    "ModelShape",
    "RunPlan",
    "check_cluster",
    "checkpoint_bytes",
    "checkpoint_layers",
    "learner_memory",
    "model_shape",
    "plan_run",
    "ray_request",
    "recompute_ratio",
]

GIB = 2**30
PROMPT_OVER_RESPONSE = 1024
"""Prompt tokens beyond the response length that the plan assumes (``P = R + 1024``)."""
RESERVE_GIB = 2.0
"""Per GPU, what the plan keeps free for the CUDA context, NCCL buffers and allocator slack."""
DEFAULT_GPU_GIB = 79.0
"""An 80 GB H100 or A100 as torch sees it (``total_memory``: 79.2 GiB)."""


@dataclass(frozen=True)
class ModelShape:
    """A Qwen3-style decoder's shape (the fields of its ``config.json`` that size memory)."""

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
        """Parameters: attention (with q/k norms), MLP and norms per layer, embeddings, LM head."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        layer = attn + 3 * self.hidden * self.intermediate + 2 * self.hidden + 2 * self.head_dim
        return self.layers * layer + self.hidden + self.vocab * self.hidden * (1 + (not self.tied))

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes of one token in bf16 (keys and values of every layer)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2

    def hf_config(self, layers: int | None = None) -> Any:
        """A transformers ``Qwen3Config`` of this shape (``layers`` decoder layers if given)."""
        from transformers import Qwen3Config

        cfg = Qwen3Config(
            vocab_size=self.vocab,
            hidden_size=self.hidden,
            intermediate_size=self.intermediate,
            num_hidden_layers=layers or self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            head_dim=self.head_dim,
            tie_word_embeddings=self.tied,
            max_position_embeddings=40960,
        )
        cfg._attn_implementation = "sdpa"  # flash/memory-efficient: no (L, L) scores
        return cfg


QWEN3_SHAPES: dict[str, ModelShape] = {
    # Their published config.json: hidden_size, num_hidden_layers, num_attention_heads,
    # num_key_value_heads, head_dim, intermediate_size, vocab_size, tie_word_embeddings.
    "Qwen/Qwen3-1.7B": ModelShape(2048, 28, 16, 8, 128, 6144, 151936, True),
    "Qwen/Qwen3-8B": ModelShape(4096, 36, 32, 8, 128, 12288, 151936, False),
}
"""The paper's models, so that a plan needs no download."""


def model_shape(name: str) -> ModelShape:
    """The shape of ``model.name``: a paper model, a ``tiny:<preset>``, or a local folder with a
    ``config.json``.

    Raises:
        ValueError: a hub id the plan does not know (it downloads nothing): name a local copy.
    """
    if name in QWEN3_SHAPES:
        return QWEN3_SHAPES[name]
    if name.startswith("tiny:"):
        from mas_trainer.models import PRESETS, tiny_tokenizer

        p = PRESETS.get(name[5:])
        if p is None:
            raise ValueError(f"unknown tiny model preset {name!r}; choose one of {sorted(PRESETS)}")
        vocab = p.vocab_size or len(tiny_tokenizer(name[5:]))
        head_dim = p.hidden_size // p.num_attention_heads
        return ModelShape(
            p.hidden_size, p.num_hidden_layers, p.num_attention_heads, p.num_key_value_heads,
            head_dim, p.intermediate_size, vocab, True,
        )  # fmt: skip
    config = Path(name) / "config.json"
    if not config.is_file():
        raise ValueError(
            f"--plan: no shape for model {name!r} (it downloads nothing): pass a local folder "
            f"with a config.json as --model.name, or one of {sorted(QWEN3_SHAPES)}"
        )
    c = json.loads(config.read_text())
    heads = c["num_attention_heads"]
    return ModelShape(
        c["hidden_size"], c["num_hidden_layers"], heads, c.get("num_key_value_heads", heads),
        c.get("head_dim") or c["hidden_size"] // heads, c["intermediate_size"], c["vocab_size"],
        bool(c.get("tie_word_embeddings", False)),
    )  # fmt: skip


# ------------------------------------------------------------------------- the learner, tracked


@dataclass(frozen=True)
class LearnerMemory:
    """Bytes one learner rank holds at the peak of a training step (torch's accounting).

    Attributes:
        weights: Master weights (this rank's shard).
        compute_copy: FSDP's gathered compute-dtype units at the peak (0 unsharded: autocast's
            weight casts are temporaries, counted in ``activations``).
        grads: Gradients alive at the peak (the optimizer step's peak has all of them).
        optimizer: AdamW moments.
        activations: Activations and temporaries at the peak, the logits included.
        logits: The LM head and log-probs of one micro-batch alone (tracked apart): the part of
            ``activations`` that grows with the vocabulary.
        peak: The step's peak, the larger of its two phases (forward+backward, optimizer step).
    """

    weights: int
    compute_copy: int
    grads: int
    optimizer: int
    activations: int
    logits: int
    peak: int


_KINDS = {
    "Parameter": "weights",
    "Sharded Param": "weights",
    "Unsharded Param": "compute_copy",
    "Gradient": "grads",
    "Sharded Grad": "grads",
    "Unsharded Grad": "grads",
    "Optstate": "optimizer",
    "OptState": "optimizer",
}


def _by_kind(snapshot: dict[Any, dict[Any, int]]) -> dict[str, int]:
    """A tracker snapshot (device -> kind -> bytes) as this module's kinds, summed over devices."""
    out = dict.fromkeys(("weights", "compute_copy", "grads", "optimizer", "activations"), 0)
    for kinds in snapshot.values():
        for kind, n in kinds.items():
            name = getattr(kind, "value", kind)
            if name == "Total":
                continue
            out[_KINDS.get(name, "activations")] += n
    out["peak"] = sum(out.values())
    return out


@contextmanager
def _fake_group(world: int) -> Iterator[None]:
    """A fake process group of ``world`` ranks (collectives are no-ops), for FSDP's sharding."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("--plan runs before any process group; one is initialised already")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        yield
    finally:
        dist.destroy_process_group()


@functools.cache
def _track_step(
    shape: ModelShape,
    layers: int,
    checkpointed: int,
    spec: tuple[Any, ...],
    mode: str = "full",
    shards: int = 1,
) -> dict[str, dict[str, int]]:
    """One training step of ``shape`` cut to ``layers`` layers, the first ``checkpointed`` of them
    under gradient checkpointing (and the rest selectively checkpointed with ``mode``
    ``selective``), tracked on fake tensors: the peak of forward+backward and of the optimizer
    step, by kind. Sharded (``spec``'s fsdp), over a fake process group of ``shards`` ranks: the
    count is part of the cache's key, as the shards' sizes depend on it."""
    fsdp = spec[5]  # spec: micro, prompt, response, dtype, autocast, fsdp, temperature, ...
    with _fake_group(shards) if fsdp else contextlib.nullcontext():
        return _track_step_in_group(shape, layers, checkpointed, spec, mode)


def _track_step_in_group(
    shape: ModelShape, layers: int, checkpointed: int, spec: tuple[Any, ...], mode: str
) -> dict[str, dict[str, int]]:
    """:func:`_track_step` inside its process group (none unsharded)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker
    from transformers import Qwen3ForCausalLM

    from mas_trainer.learner import (
        PromptRows,
        PromptStates,
        completion_hidden,
        enable_checkpointing,
        hidden_logprobs,
        prompt_once_hidden,
        run_prompts,
    )

    micro, prompt, response, dtype, autocast, fsdp, temperature, top_p, once = spec
    length = prompt + response
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    default = torch.get_default_dtype()
    with fake:
        torch.set_default_dtype(getattr(torch, dtype))  # the masters' dtype, built in it
        try:
            model = Qwen3ForCausalLM(shape.hf_config(layers))
        finally:
            torch.set_default_dtype(default)
        if checkpointed or mode == "selective":
            enable_checkpointing(model, checkpointed, mode)
        model.train()
    root: Any = None
    if fsdp:  # outside the fake mode: the device mesh holds real rank tensors
        from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

        from mas_trainer.distributed.learners import shard_model

        root = shard_model(model, getattr(torch, autocast) if autocast != "none" else None)
    cast = autocast != "none" and root is None
    with fake:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
        for p in model.parameters():  # moments exist from the second step on
            p.grad = torch.zeros_like(p)
        # The step before, untracked: DTensor's first clip_grad_norm_ gathers every gradient
        # (its sharding strategies are chosen and cached then), which a run's later steps skip.
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        ids = torch.zeros((micro, length), dtype=torch.long)
        positions = torch.arange(prompt - 1, length - 1).expand(micro, response)
        targets = ids[:, prompt:]
        # Prompts run once: the micro-batch's completions on a prompt pass over as many distinct
        # prompts (a block's), held until its backward (Learner._prompt_blocks).
        states = PromptStates([(j + 1,) * prompt for j in range(micro)]) if once else None

        def logprobs() -> Any:  # Learner._token_logprobs (FSDPLearner's: the sharded root)
            if root is not None:
                return root(ids, positions, targets, temperature, top_p)[0]
            if states is not None:
                hidden = prompt_once_hidden(model, targets, PromptRows(states, states.prompts))
            else:
                hidden = completion_hidden(model, ids, positions)
            head = model.get_output_embeddings()
            return hidden_logprobs(head, hidden, targets, temperature, top_p)[0]

        compute = torch.bfloat16 if autocast == "none" else getattr(torch, autocast)

        class Step(torch.nn.Module):
            """The micro-batch's forward as one module call: MemTracker refuses a second
            top-level call of the decoder (the prompt pass, then the completions' pass)."""

            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self) -> Any:
                if states is not None:  # an autocast region of its own, as the learner runs it
                    with torch.autocast("cpu", dtype=compute, enabled=cast):
                        run_prompts(model, states, 0)
                with torch.autocast("cpu", dtype=compute, enabled=cast):
                    return logprobs()  # (micro, response) fp32

        step = Step()

        def new_tracker() -> Any:
            if root is None:
                tracker = MemTracker()
                tracker.track_external(step, optimizer)
                return tracker
            return FSDPMemTracker(root, optimizer)

        phases = {}
        gc.collect()  # no dead tensor of an earlier track left for the tracker to count
        tracker = new_tracker()
        with tracker:
            logp = step()
            loss = -logp.mean()  # the PPO loss is elementwise over these: no larger tensor
            loss.backward()
            if states is not None:
                states.backward()
            del logp, loss
        phases["backward"] = _by_kind(tracker.get_tracker_snapshot("peak"))
        gc.collect()  # no dead tensor of an earlier track left for the tracker to count
        tracker = new_tracker()
        with tracker:
            torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
            optimizer.step()
        phases["optimizer"] = _by_kind(tracker.get_tracker_snapshot("peak"))
        optimizer.zero_grad(set_to_none=True)
    return phases


@functools.cache
def _track_logits(
    shape: ModelShape, micro: int, response: int, spec: tuple[str, str, float, float]
) -> int:
    """Peak bytes of the LM head and log-probs of one micro-batch, forward and backward, as the
    learner runs them (:func:`~mas_trainer.learner.hidden_logprobs`: vocabulary chunks unless
    top-p < 1): activations and temporaries, not the head's own gradient (counted with the
    gradients)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    from mas_trainer.learner import hidden_logprobs

    dtype, autocast, temperature, top_p = spec
    compute = getattr(torch, dtype) if autocast == "none" else getattr(torch, autocast)
    with FakeTensorMode(allow_non_fake_inputs=True):
        head = torch.nn.Linear(shape.hidden, shape.vocab, bias=False, dtype=getattr(torch, dtype))
        hidden = torch.zeros((micro, response, shape.hidden), dtype=compute, requires_grad=True)
        targets = torch.zeros((micro, response), dtype=torch.long)
        tracker = MemTracker()
        tracker.track_external(head)
        with tracker:
            with torch.autocast("cpu", dtype=compute, enabled=autocast != "none"):
                logp = hidden_logprobs(head, hidden, targets, temperature, top_p)[0]
            logp.mean().backward()
        peak = _by_kind(tracker.get_tracker_snapshot("peak"))
    return peak["activations"]


@functools.cache
def learner_memory(
    shape: ModelShape,
    *,
    micro_batch: int,
    prompt: int,
    response: int,
    dtype: str = "float32",
    autocast: str = "bfloat16",
    checkpointing: bool = True,
    shards: int = 1,
    fsdp: bool | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    layers: int | None = None,
    checkpoint_layers: int | None = None,
    checkpoint_mode: str = "full",
    prompts_once: bool = False,
) -> LearnerMemory:
    """One learner rank's peak over a training step, tracked on fake tensors (module docstring).

    Args:
        shape: The model.
        micro_batch: Sequences per forward/backward pass.
        prompt: Prompt tokens per sequence.
        response: Response tokens per sequence (the LM head runs on these only).
        dtype: Master weights' dtype (``model.dtype``).
        autocast: Compute dtype (``model.autocast``; FSDP2's ``param_dtype`` when sharded).
        checkpointing: Gradient checkpointing (``model.gradient_checkpointing``).
        shards: FSDP2 ranks the model is sharded over.
        fsdp: Shard with FSDP2 (default: when ``shards > 1``; ``True`` with one shard is FSDP2
            over a group of one, as ``benchmarks/gpu_check.py`` runs it).
        temperature: Sampling temperature (``rollout.temperature``; the learner scores at it).
        top_p: Sampling top-p (``rollout.top_p``): below 1 the learner builds the whole logits.
        layers: Track this many layers whole instead of extrapolating (a check).
        checkpoint_layers: With ``checkpointing``, the layers checkpointed (the first ones; the
            rest keep their activations); None: all.
        checkpoint_mode: With ``checkpointing``, what the other layers do
            (:data:`~mas_trainer.learner.CHECKPOINT_MODES`): keep their activations (``full``) or
            only their matmul and attention outputs (``selective``).
        prompts_once: The learner runs each distinct prompt once (samples share prompts, K > 1,
            unsharded): a micro-batch's ``response`` tokens run on a prompt pass over
            ``micro_batch`` prompts, held (with its keys' and values' gradients) until the
            micro-batch's backward is done.
    """
    fsdp = shards > 1 if fsdp is None else fsdp
    once = prompts_once and not fsdp
    spec = (micro_batch, prompt, response, dtype, autocast, fsdp, temperature, top_p, once)
    total = layers or shape.layers
    ckpt = (
        0
        if not checkpointing
        else min(total, total if checkpoint_layers is None else checkpoint_layers)
    )
    # FSDP2 prefetches the next layer's all-gather: from 2 layers on, one more layer adds the
    # same bytes (1 -> 2 does not), so a sharded model is tracked from 2 layers. A mix of
    # checkpointed and plain layers is tracked from 2 plain layers: with fewer, the peak can be a
    # checkpointed layer's recompute rather than the plain layers' activations at the start of
    # the backward pass, and one more plain layer would not add its activations to it.
    a = 2 if fsdp else 1
    plain = shape.layers - ckpt
    c0, u0 = (a, 0) if not plain else (0, a) if not ckpt else (a, 2)
    counts = [(layers - ckpt, ckpt)] if layers else [(u0, c0)]
    counts += [(u0, c0 + 1)] if not layers and ckpt != c0 else []  # a checkpointed layer more
    counts += [(u0 + 1, c0)] if not layers and plain != u0 else []  # a plain layer more
    mode = checkpoint_mode if checkpointing else "full"
    tracked = {uc: _track_step(shape, sum(uc), uc[1], spec, mode, shards) for uc in counts}
    if layers:
        phases = tracked[counts[0]]
    else:  # linear in the layer counts: the base plus each kind of layer's slope times its count
        lo = tracked[(u0, c0)]
        per_ckpt = tracked.get((u0, c0 + 1), lo)
        per_plain = tracked.get((u0 + 1, c0), lo)
        phases = {
            phase: {k: lo[phase][k] + (ckpt - c0) * (per_ckpt[phase][k] - lo[phase][k])
                    + (plain - u0) * (per_plain[phase][k] - lo[phase][k]) for k in lo[phase]}
            for phase in lo
        }  # fmt: skip
    top = max(phases.values(), key=lambda kinds: kinds["peak"])
    return LearnerMemory(
        weights=top["weights"],
        compute_copy=top["compute_copy"],
        grads=top["grads"],
        optimizer=top["optimizer"],
        activations=top["activations"],
        # Alive at the backward phase's peak; none at the optimizer step's.
        logits=min(
            _track_logits(shape, micro_batch, response, (dtype, autocast, temperature, top_p)),
            top["activations"],
        ),
        peak=top["peak"],
    )


# --------------------------------------------------------------------------------- the run's GPUs


@dataclass
class GpuPlan:
    """What one GPU holds while the engines generate (``rollout``) and while a learner updates
    (``update``), item -> bytes."""

    name: str
    rollout: dict[str, int] = field(default_factory=dict)
    update: dict[str, int] = field(default_factory=dict)

    @property
    def peak(self) -> int:
        return max(sum(self.rollout.values()), sum(self.update.values()))


@dataclass
class RunPlan:
    """A run's memory plan: per GPU, the disk its checkpoints take, and what does not fit."""

    preset: str
    gpu_gib: float
    gpus: list[GpuPlan]
    count: int  # GPUs the run uses in all
    disk: int
    notes: list[str]
    problems: list[str]
    checkpoint_layers: int | None = None  # decoder layers checkpointed (None: checkpointing off)

    @property
    def fits(self) -> bool:
        return not self.problems

    def render(self) -> str:
        """The plan as text (what ``mas-train --plan`` prints)."""
        lines = [
            f"memory plan of {self.preset}: {self.count} GPU(s) of {self.gpu_gib:g} GiB "
            f"({RESERVE_GIB:g} GiB of each kept free for the CUDA context and NCCL)"
        ]
        for gpu in self.gpus:
            lines.append(f"\n{gpu.name}")
            for phase, items in (("rollout", gpu.rollout), ("update", gpu.update)):
                if not items:
                    continue
                lines.append(f"  {phase}: {sum(items.values()) / GIB:6.1f} GiB")
                lines.extend(f"    {n / GIB:6.1f} GiB  {item}" for item, n in items.items() if n)
        lines.append(f"\ncheckpoints on disk: {self.disk / 1e9:.0f} GB")
        lines.extend(f"note: {n}" for n in self.notes)
        if self.problems:
            lines.append("\nDOES NOT FIT:")
            lines.extend(f"  - {p}" for p in self.problems)
        else:
            lines.append("\nfits: every GPU's peak is within its memory")
        return "\n".join(lines)


def policy_names(cfg: TrainConfig) -> list[str]:
    """The run's policies (one shared, or one per role of the env's ``env.mode``)."""
    from mas_envs.registry import entry

    if cfg.algo.policy_map != "per_role":
        return ["shared"]
    env_class: Any = entry(cfg.env.id).load()
    return sorted(env_class.roles[cfg.env.mode])


def _engine_items(cfg: TrainConfig, shape: ModelShape, engines: int, gpu: int) -> dict[str, int]:
    """One GPU's engine items while awake: the vLLM budget split into weights and KV cache; for
    the transformers engine (the learner's own weights) the KV cache of one generation batch."""
    if cfg.model.engine != "vllm":
        length = 2 * cfg.rollout.max_new_tokens + PROMPT_OVER_RESPONSE
        batch = cfg.model.engine_batch_size
        kv = batch * length * shape.kv_bytes_per_token
        return {f"transformers engine KV cache ({batch} x {length} tokens, bf16)": kv}
    budget = int(cfg.model.engine_memory * gpu)
    weights = engines * 2 * shape.params // cfg.model.engine_tp
    return {
        f"vLLM weights (bf16, {engines} engine(s), tp {cfg.model.engine_tp})": weights,
        "vLLM KV cache (the rest of model.engine_memory)": max(budget - weights, 0),
    }


def plan_run(cfg: TrainConfig, gpu_gib: float = DEFAULT_GPU_GIB) -> RunPlan:
    """The memory plan of ``cfg`` on GPUs of ``gpu_gib`` GiB (module docstring)."""
    from mas_trainer.learner import prompt_once_supported

    shape = model_shape(cfg.model.name)
    n = shape.params
    names = policy_names(cfg)
    gpu = int(gpu_gib * GIB)
    trains = cfg.optim.steps > 0 or cfg.optim.warmstart_steps > 0
    response = cfg.rollout.max_new_tokens
    prompt = response + PROMPT_OVER_RESPONSE
    micro = cfg.optim.micro_batch_size or cfg.optim.mini_batch_size
    ray = cfg.run.backend == "ray"
    sharded = ray and cfg.run.ray_sharding == "fsdp" and cfg.run.ray_learners > 1
    shards = cfg.run.ray_learners if sharded else 1
    bytes_per = {"float32": 4, "bfloat16": 2, "float16": 2}[cfg.model.dtype]
    tp = cfg.model.engine_tp if cfg.model.engine == "vllm" else 1
    checkpointing = trains and cfg.model.gradient_checkpointing

    def layout(ckpt: int) -> tuple[LearnerMemory | None, list[GpuPlan], int, list[str], list[str]]:
        """The GPUs' items with ``ckpt`` layers checkpointed, and what does not fit."""
        ckpt_label = f"{ckpt} of {shape.layers} layers" if checkpointing else "off"
        if checkpointing and cfg.model.checkpoint_mode == "selective":
            ckpt_label += ", the rest selective"
        notes, problems = [], []

        learner: LearnerMemory | None = None
        if trains:
            learner = learner_memory(
                shape,
                micro_batch=micro,
                prompt=prompt,
                response=response,
                dtype=cfg.model.dtype,
                autocast=cfg.model.autocast,
                checkpointing=cfg.model.gradient_checkpointing,
                checkpoint_layers=ckpt,
                checkpoint_mode=cfg.model.checkpoint_mode,
                prompts_once=cfg.rollout.k > 1 and prompt_once_supported(),
                shards=shards,
                temperature=cfg.rollout.temperature,
                top_p=cfg.rollout.top_p,
            )
        weights = learner.weights if learner else bytes_per * n // shards
        optimizer = learner.optimizer if learner else 0

        def static(k: int) -> dict[str, int]:  # what k policies' learners hold between updates
            items = {f"learner master weights ({cfg.model.dtype}, {k} policy(ies))": k * weights}
            if optimizer:
                items[f"AdamW moments ({k} policy(ies))"] = k * optimizer
            return items

        def update(k: int) -> dict[str, int]:  # one learner updates, k - 1 others wait
            if learner is None:
                return static(k)
            return {
                **static(k),
                "gradients": learner.grads,
                "bf16 compute copy (FSDP's gathered units)": learner.compute_copy,
                f"activations + temporaries (micro-batch {micro} x {prompt + response} tokens, "
                f"checkpointing {ckpt_label})": (learner.activations - learner.logits),
                f"logits: LM head + log-probs (micro-batch {micro} x {response} x {shape.vocab})": (
                    learner.logits
                ),
            }

        gpus: list[GpuPlan] = []
        if cfg.model.device.startswith("cuda") and not ray:
            one = GpuPlan(f"GPU 0: {len(names)} polic{'y' if len(names) == 1 else 'ies'} "
                          f"({', '.join(names)}), learners and engines")  # fmt: skip
            one.rollout = {**static(len(names)), **_engine_items(cfg, shape, len(names), gpu)}
            one.update = update(len(names))
            gpus.append(one)
            engine_only = _engine_items(cfg, shape, len(names), gpu)
            gpus += [GpuPlan(f"GPU {i}: vLLM tensor-parallel rank {i}", rollout=dict(engine_only))
                     for i in range(1, tp)]  # fmt: skip
            count = tp
        elif ray and cfg.run.ray_gpus_per_policy > 0:
            per_pool = cfg.run.ray_gpus_per_policy
            ranks = cfg.run.ray_learners
            colocate = cfg.run.ray_colocate
            for i in range(math.ceil(per_pool)):
                has_learner = colocate or i < per_pool / 2
                has_engine = (i < tp) if colocate else (i >= per_pool / 2 and i - per_pool / 2 < tp)
                held = (("a learner rank", has_learner), ("the engine", has_engine))
                g = GpuPlan(f"each policy's GPU {i} (x{len(names)} pools): "
                            + ", ".join(x for x, on in held if on))  # fmt: skip
                learners_here = max(1, ranks // max(1, math.ceil(per_pool))) if has_learner else 0
                if learners_here:
                    g.rollout = static(learners_here)
                    g.update = update(learners_here)
                if has_engine:
                    g.rollout.update(_engine_items(cfg, shape, 1, gpu))
                gpus.append(g)
            count = math.ceil(per_pool) * len(names)
        else:
            count = 0
            notes.append(
                "no GPU: the run uses the CPU (model.device cpu or run.ray_gpus_per_policy 0)"
            )

        limit = gpu - int(RESERVE_GIB * GIB)
        for g in gpus:
            for phase, items in (("rollout", g.rollout), ("update", g.update)):
                total = sum(items.values())
                if total > limit:
                    problems.append(
                        f"{g.name}: the {phase} needs {total / GIB:.1f} GiB of "
                        f"{limit / GIB:.1f} GiB; "
                        + _advice(cfg, phase, total - limit, learner, gpu)
                    )
        return learner, gpus, count, notes, problems

    ckpt = shape.layers
    if cfg.model.checkpoint_layers.isdigit():
        ckpt = min(int(cfg.model.checkpoint_layers), shape.layers)
    if checkpointing and cfg.model.checkpoint_layers == "auto" and layout(0)[1]:
        # The fewest checkpointed layers that fit, from none up (memory falls as layers are
        # added); all of them when none fits. Full checkpointing is tracked only if the search
        # gets there: 5 tracked steps instead of 7 when a mix fits, 2 instead of 4 when none
        # needs checkpointing, 7 instead of 2 when nothing fits (the rare case for "auto").
        ckpt = next((c for c in range(shape.layers) if not layout(c)[4]), shape.layers)
    _, gpus, count, notes, problems = layout(ckpt)
    if checkpointing:
        notes.append(_recompute_note(cfg, shape, ckpt, prompt, response))
    if cfg.model.engine == "vllm" and gpus:
        kv = _engine_items(cfg, shape, len(names) if not ray else 1, gpu)
        engines = len(names) if not ray else 1
        per_engine_tokens = list(kv.values())[1] * tp // engines // shape.kv_bytes_per_token
        seqs = per_engine_tokens // (prompt + response)
        notes.append(f"vLLM KV cache: {per_engine_tokens:,} tokens per engine "
                     f"({seqs} sequences of {prompt + response})")  # fmt: skip
        if per_engine_tokens < prompt + response:
            problems.append(
                f"vLLM's share (model.engine_memory {cfg.model.engine_memory}) leaves KV cache "
                f"for {per_engine_tokens} tokens per engine, less than one sequence of "
                f"{prompt + response}: raise --model.engine_memory or --model.engine_tp"
            )
    if cfg.algo.policy_map == "per_role_lora":
        notes.append(
            "per_role_lora is planned as a full fine-tune of its one base model: an upper "
            "bound (the adapters' gradients and moments are far smaller)"
        )
    if tp > 1 and not ray and cfg.optim.steps == 0:
        notes.append(f"model.engine_tp {tp} spreads one engine over {tp} GPUs; an untrained run "
                     "fits one GPU with --model.engine_tp 1")  # fmt: skip

    from mas_trainer.outputs import KEEP_CHECKPOINTS

    kept = KEEP_CHECKPOINTS + (1 if cfg.eval.select_every else 0)
    reference = cfg.algo.kl_coef > 0 and cfg.algo.policy_map != "per_role_lora"
    per_ckpt = len(names) * checkpoint_bytes(shape, cfg.model.dtype, reference=reference)
    disk = kept * per_ckpt if trains else 0
    ckpt_layers = ckpt if checkpointing else None
    return RunPlan(cfg.preset, gpu_gib, gpus, count, disk, notes, problems, ckpt_layers)


def checkpoint_layers(cfg: TrainConfig) -> int | None:
    """The decoder layers a learner of ``cfg`` checkpoints (``model.checkpoint_layers``; None:
    all), ``auto`` resolved by :func:`plan_run` on the visible GPU (79 GiB without one)."""
    if cfg.model.checkpoint_layers == "all":
        return None
    if cfg.model.checkpoint_layers != "auto":
        return int(cfg.model.checkpoint_layers)
    import torch

    gib = DEFAULT_GPU_GIB
    if torch.cuda.is_available():
        gib = torch.cuda.get_device_properties(0).total_memory / GIB
    return plan_run(cfg, gib).checkpoint_layers


def recompute_ratio(shape: ModelShape, checkpointed: int, prompt: int, response: int) -> float:
    """FLOPs of a training pass (forward, the checkpointed layers' recompute, backward) over one
    forward + backward, by arithmetic: a matmul's backward is twice its forward; the decoder's
    matmuls run on ``prompt + response`` tokens, attention counted over every (query, key) pair
    as torch's counter counts it, the LM head on the ``response`` tokens only.
    ``benchmarks/bench_learner_efficiency.py`` counts the same with ``FlopCounterMode``."""
    tokens = prompt + response
    attn = shape.hidden * shape.head_dim * (2 * shape.heads + 2 * shape.kv_heads)
    per_layer = 2 * tokens * (attn + 3 * shape.hidden * shape.intermediate)
    per_layer += 4 * tokens * tokens * shape.heads * shape.head_dim
    forward = shape.layers * per_layer + 2 * response * shape.hidden * shape.vocab
    return 1 + checkpointed * per_layer / (3 * forward)


def _recompute_note(
    cfg: TrainConfig, shape: ModelShape, ckpt: int, prompt: int, response: int
) -> str:
    """The plan's line on gradient checkpointing: the layers it recomputes and what that costs."""
    chosen = {"auto": " (auto: the fewest that fit)", "all": ""}.get(
        cfg.model.checkpoint_layers, ""
    )
    rest = ""
    if cfg.model.checkpoint_mode == "selective":
        rest = ", the rest checkpointed selectively: no matmul recomputed"
    return (
        f"gradient checkpointing: {ckpt} of {shape.layers} decoder layers recomputed{chosen} "
        f"(model.checkpoint_layers {ckpt}{rest}): the training pass costs "
        f"{recompute_ratio(shape, ckpt, prompt, response):.2f}x one forward + backward "
        f"(all layers: {recompute_ratio(shape, shape.layers, prompt, response):.2f}x; scoring "
        "passes aside)"
    )


def checkpoint_bytes(shape: ModelShape, dtype: str, *, reference: bool = False) -> int:
    """Disk bytes one policy takes in a checkpoint (``checkpoints/step-N/``), as
    :func:`~mas_trainer.policy.save_checkpoint` writes it: the Hugging Face export of its weights
    (``<policy>/``, in the masters' dtype ``dtype``) and :meth:`~mas_trainer.learner.Learner.save`'s
    torch distributed checkpoint (``learner-<policy>/``: master weights, AdamW's two moments in
    the same dtype, the KL reference's state dict when the learner keeps one, every rank its own
    shards, which sum to the whole). Tokenizer files, ``state.pt`` and the checkpoint metadata add
    megabytes (``tests/trainer/test_plan.py`` compares this with a real save).

    Args:
        shape: The model.
        dtype: Master weights' dtype (``model.dtype``).
        reference: The learner keeps its own KL reference (``algo.kl_coef > 0``, not LoRA).
    """
    size = {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]
    n = shape.params
    # A reference's state dict names tied embeddings twice (input and output), each written.
    ref = n + (shape.vocab * shape.hidden if shape.tied else 0) if reference else 0
    return size * (n + 3 * n + ref)  # HF export; DCP: masters + two moments (+ reference)


def _advice(
    cfg: TrainConfig, phase: str, over: int, learner: LearnerMemory | None, gpu: int
) -> str:
    """What to change when a phase is ``over`` bytes above the limit."""
    if phase == "rollout" and cfg.model.engine == "vllm":
        gib = cfg.run.ray_gpus_per_policy or 1
        share = cfg.model.engine_memory - over / gpu
        return (
            f"lower --model.engine_memory (to about {max(share, 0.05):.2f}), or give each policy "
            f"its own GPUs (--run.backend ray --run.ray_gpus_per_policy {gib:g})"
        )
    if phase == "rollout":
        return (
            "lower --model.engine_batch_size (the transformers engine's KV cache grows with "
            "it), or shard the learner over more GPUs (--run.backend ray --run.ray_sharding fsdp)"
        )
    micro = cfg.optim.micro_batch_size or cfg.optim.mini_batch_size
    if learner is not None and learner.activations > over and micro > 1:
        per_seq = learner.activations / micro
        fit = max(1, micro - math.ceil(over / per_seq))
        return (
            f"lower --optim.micro_batch_size (to {fit}), or shard the learner "
            "(--run.backend ray --run.ray_sharding fsdp --run.ray_learners N)"
        )
    return (
        "shard the learner over more GPUs (--run.backend ray --run.ray_sharding fsdp "
        "--run.ray_learners N --run.ray_gpus_per_policy N), or give each policy its own GPUs"
    )


# ------------------------------------------------------------------------------ Ray's resources


def ray_request(cfg: TrainConfig, policies: int) -> dict[str, float]:
    """The Ray resources (``GPU``, ``CPU``) a ``run.backend=ray`` run asks for in all: one pool per
    policy (its learner bundles, and an engine bundle when not colocated) and the env workers.
    Mirrors :func:`mas_trainer.distributed.build.build_ray_policies`."""
    cpu = 0.25  # build_ray_policies' claim per actor
    gpus = cfg.run.ray_gpus_per_policy
    pool_cpu = 2 * cpu * cfg.run.ray_learners + (0 if cfg.run.ray_colocate else cpu)
    asked = {"CPU": policies * pool_cpu + cpu * cfg.run.ray_env_workers}
    if gpus > 0:
        asked["GPU"] = policies * gpus
    return asked


def check_cluster(asked: dict[str, float], have: dict[str, float]) -> None:
    """Refuse a run that asks for more than the cluster has (Ray would wait for it forever).

    Raises:
        ValueError: naming what was asked, what the cluster has, and what to change.
    """
    short = {k: v for k, v in asked.items() if v > have.get(k, 0.0) + 1e-9}
    if not short:
        return
    want = ", ".join(f"{v:g} {k}" for k, v in sorted(asked.items()))
    got = ", ".join(f"{have.get(k, 0.0):g} {k}" for k in sorted(asked))
    raise ValueError(
        f"this run asks Ray for {want}; the cluster has {got}. Join a cluster that has them "
        "(--run.ray_address), or ask for less: --run.ray_gpus_per_policy (0 on a CPU machine), "
        "--run.ray_learners, --run.ray_env_workers"
    )
