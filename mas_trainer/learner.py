"""The learner: PPO-clip (AT-GRPO) and supervised updates of one policy.

One :class:`Learner` owns one policy's optimizer: a whole model (``shared`` / ``per_role``) or one
LoRA adapter of a shared ``peft`` base (``per_role_lora``: pass ``adapter=<role>``; every learner of
that base activates its adapter with ``set_adapter`` before each forward pass).

``update(samples)`` runs, for the samples of one training step (advantages already filled in):

1. old log-probs: recompute the sampled tokens' log-probs with the learner's own forward pass
   and log ``perf/logprob_mismatch`` = mean |engine - learner| per token, so numeric
   engine/learner differences show up as a metric instead of a silent bias in the ratio. The
   first mini-batch's training forward runs before any step: its detached log-probs are its old
   ones, and only the other mini-batches' samples are scored (no grad) first. Optionally the
   reference policy's log-probs for the KL term;
2. ``epochs`` passes (default 1) over the samples, shuffled and cut into mini-batches of
   ``mini_batch_size`` samples; each mini-batch is one AdamW step on the PPO-clip token-mean loss
   (:func:`mas_trainer.at_grpo.ppo_clip_loss`, plus ``kl_coef * kl_k3``) after gradient clipping.
   A mini-batch may be split into micro-batches (gradient accumulation) of similar length; the
   loss stays the token mean over the whole mini-batch;
3. one step of the learning-rate schedule (the schedule counts ``update`` calls, i.e. training
   steps, so ``total_steps`` is the run's number of steps).

Log-probs come from the final hidden states and the LM head's weight in vocabulary blocks
(:func:`chunked_logprobs`): no ``(B, T, V)`` logits tensor is built (top-p < 1 aside).
Checkpoints: :meth:`Learner.save` / :meth:`Learner.load` (torch distributed checkpoint, written
from the live tensors, each rank its own shards).

Precision: the parameters are the master weights and AdamW keeps its moments in their dtype. An
AdamW step moves a weight by about ``lr``; a weight ``w`` stored in bf16 only changes when that
step exceeds half its spacing, ``2^-8 |w|`` to ``2^-9 |w|`` (fp16: 2^-11, fp32: 2^-24), so at the
paper's lr 1e-6 almost no bf16 weight of size ~0.02 ever moves. :func:`update_resolution`
measures, on the actual weights, which share an update of size ``lr`` can move, and a learner on
low-precision parameters whose learning rate cannot move most of them refuses to start
(:data:`MIN_RESOLVABLE_SHARE`). Keep fp32 master weights and compute in bf16 (``dtype``: autocast).

Sequences are right-padded prompt+completion; with right padding a causal model never lets a real
token see a pad, so no attention mask is needed (the fast causal attention path), and the LM head
runs only on the positions that predict completion tokens (prompt logits are never built). When
several samples share a prompt (the K candidates of an AT-GRPO group), each distinct prompt runs
once (``share_prompts``; same numbers, less work): per block of ``micro_batch_size`` prompts a
prompt pass keeps each layer's keys and values, and the block's completions run in micro-batches of
similar length on them (:class:`PromptStates`: with gradients the prompt states are leaves, and the
prompts' backward runs once after the block's micro-batches). The cache is replayable, so this holds
under gradient checkpointing too (:func:`_replayable_cache`). Without shared prompts, micro-batches
are buckets of similar total length. Where transformers drops a cache under checkpointing (no
``_can_checkpoint_with_cache``), a training pass packs instead: one row per prompt, ``[prompt,
completion 1, ..., completion K]``, with a block attention mask (:class:`_Packed`), where that costs
fewer FLOPs than a row per sample (:class:`_LayoutCost`).
``checkpoint_mode="selective"`` checkpoints the layers past ``checkpoint_layers`` keeping their
matmul and attention outputs (torch's selective activation checkpointing): their replay costs no
matmul FLOPs.
"""

from __future__ import annotations

import copy
import functools
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from mas_trainer.at_grpo import (
    kl_k3,
    policy_change,
    ppo_clip_loss,
    role_token_weights,
    token_logprobs,
    weighted_sft_loss,
)
from mas_trainer.models import cache_argument
from mas_trainer.samples import TrainSample

if TYPE_CHECKING:
    from transformers import PreTrainedModel

LR_SCHEDULES = ("constant", "cosine")

CHECKPOINT_FORMAT = 1
"""Version of :meth:`Learner.save`'s layout (a torch distributed checkpoint + ``state.pt``)."""
STATE_FILE = "state.pt"
"""The small part of a learner checkpoint: hyperparameters, schedule, step count, RNG."""

MIN_RESOLVABLE_SHARE = 0.5
"""A learner on bf16/fp16 parameters refuses a learning rate that can move fewer of its weights."""


def update_resolution(tensors: Iterable[torch.Tensor], lr: float) -> tuple[float, float]:
    """Which share of the weights an update of size ``lr`` changes, in their own dtype.

    A float ``w`` with ``2^(e-1) <= |w| < 2^e`` has spacing ``2^(e-1) * eps`` (``eps`` of its
    dtype: bf16 2^-7, fp16 2^-10, fp32 2^-23); rounding to nearest keeps ``w`` unless the update
    exceeds half of it. AdamW's first step is exactly ``lr`` per weight (``m / sqrt(v) = +-1``) and
    later ones are at most about that, so the share is an upper bound on what AdamW moves.

    Args:
        tensors: The trainable parameters (any float dtypes; DTensors are read by their local
            shard).
        lr: The update size.

    Returns:
        ``(share, lr_for_half)``: the share of elements an update of ``lr`` changes, and the
        smallest update that changes at least half of them.
    """
    half_spacing: dict[float, int] = {}  # half the spacing -> how many elements have it
    for t in tensors:
        eps = torch.finfo(t.dtype).eps
        local = t.to_local() if hasattr(t, "to_local") else t
        for chunk in local.detach().reshape(-1).split(1 << 22):
            exponent = torch.frexp(chunk.float())[1]  # |w| in [2^(e-1), 2^e)
            exponent = torch.where(chunk == 0, torch.full_like(exponent, -1000), exponent)
            values, counts = torch.unique(exponent, return_counts=True)
            for e, n in zip(values.tolist(), counts.tolist(), strict=True):
                key = 0.0 if e == -1000 else 2.0 ** (e - 2) * eps
                half_spacing[key] = half_spacing.get(key, 0) + n
    total = sum(half_spacing.values())
    if total == 0:
        return 1.0, 0.0
    moved = sum(n for h, n in half_spacing.items() if lr > h)
    seen, lr_for_half = 0, 0.0
    for h in sorted(half_spacing):
        seen += half_spacing[h]
        if 2 * seen >= total:
            lr_for_half = h
            break
    return moved / total, lr_for_half


def check_update_precision(tensors: Iterable[torch.Tensor], lr: float, what: str = "") -> None:
    """Refuse AdamW at ``lr`` on low-precision weights that it could barely move.

    Raises:
        ValueError: fewer than :data:`MIN_RESOLVABLE_SHARE` of the bf16/fp16 weights would change
            in one step of size ``lr``; the message says what to set.
    """
    low = [t for t in tensors if t.dtype in (torch.bfloat16, torch.float16)]
    if not low:
        return
    share, needed = update_resolution(low, lr)
    if share < MIN_RESOLVABLE_SHARE:
        dtype = str(low[0].dtype).removeprefix("torch.")
        raise ValueError(
            f"AdamW at lr {lr:g} on {dtype} parameters{what} would change only {share:.1%} of the "
            f"weights per step: the rest are rounded back, since an update below half of a "
            f"weight's {dtype} spacing is lost (a step of lr >= {needed:.2g} would move half of "
            "them). Keep fp32 master weights and compute in bf16: --model.dtype float32 "
            "--model.autocast bfloat16 (the paper's setting; Learner(dtype=torch.bfloat16) on "
            "float32 parameters), or raise the learning rate."
        )


@dataclass
class _Prefix:
    """The distinct prompts of a micro-batch, run once and shared by their completions."""

    ids: torch.Tensor  # (u, P) long, left-padded
    mask: torch.Tensor  # (u, P) long, 1 on real tokens
    source: torch.Tensor  # (b,) long: row -> distinct prompt


@dataclass
class _Packed:
    """One row per distinct prompt of a micro-batch: the prompt, then each of its completions
    (u rows of L tokens). A completion attends to its prompt and causally to itself, and its
    positions continue the prompt's, so each token sees exactly what it sees in its own row."""

    position_ids: torch.Tensor  # (u, L) long: RoPE positions, 0 on padding
    segments: torch.Tensor  # (u, L) long: 0 the prompt, k >= 1 its k-th completion, -1 padding
    row: torch.Tensor  # (b,) long: the packed row holding each sample

    def attention_mask(self, implementation: str) -> torch.Tensor:
        """``(u, 1, L, L)``: true where a query may attend to a key (``eager``, which adds the
        mask to the scores: 0 there, else float32's minimum). A padding query (position 0) sees
        the prompt's first token and the padding: a query with no key would give NaN."""
        seg, pos = self.segments, self.position_ids
        causal = pos.unsqueeze(-1) >= pos.unsqueeze(-2)  # (u, L, L) key not after the query
        same = seg.unsqueeze(-1) == seg.unsqueeze(-2)  # (u, L, L)
        allowed = (causal & (same | (seg == 0).unsqueeze(-2))).unsqueeze(1)  # (u, 1, L, L)
        if implementation == "eager":  # added to the scores
            return torch.zeros(allowed.shape, device=seg.device).masked_fill(
                ~allowed, torch.finfo(torch.float32).min
            )
        return allowed


@dataclass
class PromptStates:
    """A block of distinct prompts run once (:func:`run_prompts`): per prompt, each
    layer's ``(keys, values)`` ``(kv_heads, P, head_dim)`` and its last hidden state ``(H,)``
    (which predicts the first completion token). With grad they are slices of leaves cut from
    the prompt pass's graph, so each micro-batch of completions runs its backward alone;
    :meth:`backward` then sends what the leaves gathered through the prompt pass, once."""

    prompts: list[tuple[int, ...]]
    states: dict[tuple[int, ...], tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]] = (
        field(default_factory=dict)
    )
    roots: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)  # (out, leaf)

    def leaf(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` cut from its graph (a leaf whose gradient :meth:`backward` sends back)."""
        if not t.requires_grad:
            return t
        cut = t.detach().requires_grad_()
        self.roots.append((t, cut))
        return cut

    def backward(self) -> None:
        """Backward through the prompt pass with the gradients its completions left."""
        pairs = [(t, cut.grad) for t, cut in self.roots if cut.grad is not None]
        self.states, self.roots = {}, []
        if pairs:
            torch.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])


@dataclass
class PromptRows:
    """The rows of a micro-batch read their prompts from ``states`` (``rows``: each one's)."""

    states: PromptStates
    rows: list[tuple[int, ...]]


@dataclass
class _Batch:
    """Tensors of a few samples (b samples, Tc = longest completion).

    Plain layout: ``input_ids`` (b, L) is prompt+completion right-padded. Shared-prompt layout:
    the prompts are in ``prefix``; ``input_ids``/``positions`` are empty. Packed layout:
    ``input_ids`` (u, L) holds one row per distinct prompt (``packed``); ``positions`` index the
    row ``packed.row`` of each sample.
    """

    input_ids: torch.Tensor  # (b, L) long (packed: (u, L))
    positions: torch.Tensor  # (b, Tc) long: the position predicting each completion token
    targets: torch.Tensor  # (b, Tc) long: the completion tokens
    mask: torch.Tensor  # (b, Tc) bool: true on real completion tokens
    index: list[int]  # which samples of the update these rows are
    prefix: _Prefix | None = None
    packed: _Packed | None = None
    prompts: PromptRows | None = None

    @property
    def n_tokens(self) -> int:
        return int(self.mask.sum().item())


@dataclass(frozen=True)
class _LayoutCost:
    """Forward FLOPs of a decoder over a ``(rows, width)`` batch: the layers' matmuls per token
    and, per (query, key) pair, the attention scores and their product with the values. A causal
    pass without a mask computes half the pairs (flash kernels skip the masked blocks); a packed
    row's block mask is computed dense."""

    per_token: float  # 2 x the decoder layers' parameters
    per_pair: float  # 4 x layers x heads x head dim

    @classmethod
    def of(cls, model: Any) -> _LayoutCost:
        decoder = model.get_decoder()
        weights = sum(p.numel() for p in decoder.parameters())
        weights -= decoder.get_input_embeddings().weight.numel()
        cfg = model.config.get_text_config()
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        return cls(2.0 * weights, 4.0 * cfg.num_hidden_layers * cfg.num_attention_heads * head_dim)

    def __call__(self, rows: int, width: int, dense: bool) -> float:
        pairs = width * width if dense else width * (width + 1) / 2
        return rows * (width * self.per_token + pairs * self.per_pair)


CHECKPOINT_MODES = ("full", "selective")
"""What the layers past ``checkpoint_layers`` do: ``full`` keeps all their activations (no
recompute); ``selective`` checkpoints them too but saves every matmul and attention output, so
their replay recomputes only pointwise ops (norms, activations, RoPE: no matmul FLOPs)."""


def _saved_by_selective() -> frozenset[Any]:
    """The ops whose outputs a selectively checkpointed layer keeps (torchtitan's "op" policy
    without its every-other-matmul thinning): every matmul and attention kernel."""
    aten = torch.ops.aten
    names = (
        "mm", "addmm", "bmm", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
    )  # fmt: skip
    return frozenset(getattr(aten, n).default for n in names if hasattr(aten, n))


def _selective_context() -> tuple[Any, Any]:
    """``context_fn`` of a selectively checkpointed layer (:data:`CHECKPOINT_MODES`)."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    saved = _saved_by_selective()

    def policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def enable_checkpointing(model: Any, layers: int | None = None, mode: str = "full") -> None:
    """Turn on gradient checkpointing for the first ``layers`` decoder layers of ``model`` (None:
    all of them); the later layers keep their activations for the backward pass (``mode``
    ``full``: no recompute) or their matmul and attention outputs (``selective``: the replay
    recomputes only pointwise ops).

    Raises:
        ValueError: ``layers`` is negative or ``mode`` unknown.
    """
    from functools import partial

    from torch.utils.checkpoint import checkpoint
    from transformers.modeling_layers import GradientCheckpointingLayer

    if layers is not None and layers < 0:
        raise ValueError(f"checkpoint_layers must be >= 0 or None (all), got {layers}")
    if mode not in CHECKPOINT_MODES:
        raise ValueError(f"checkpoint mode must be one of {CHECKPOINT_MODES}, got {mode!r}")
    # transformers >= 5.24 renamed it; the old name still works there but warns.
    enable = getattr(model, "activation_checkpointing_enable", None)
    (enable or model.gradient_checkpointing_enable)({"use_reentrant": False})
    blocks = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    for block in blocks:  # the learner passes checkpointed layers replayable caches only
        block._can_checkpoint_with_cache = True
    for block in blocks[layers:] if layers is not None else []:
        if mode == "selective":
            func = partial(checkpoint, use_reentrant=False, context_fn=_selective_context)
            setattr(block, "_gradient_checkpointing_func", func)  # noqa: B010 (a Module attribute)
        else:
            block.gradient_checkpointing = False


def prompt_once_supported() -> bool:
    """Whether this transformers lets a checkpointed layer keep a KV cache that its replay reads
    (``_can_checkpoint_with_cache``, with per-layer caches): what running a prompt once for its
    completions needs under gradient checkpointing."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    return hasattr(GradientCheckpointingLayer, "_can_checkpoint_with_cache")


@functools.cache
def _replayable_cache() -> type:
    """A ``DynamicCache`` that a checkpointed layer's replay can call again with the same result.
    Unfrozen (a prompt pass) it keeps each layer's newest keys and values, replacing instead of
    appending. Frozen (:meth:`freeze`: completions on their prompts) it keeps nothing: each call
    returns the rows' prompt states, left-padded, followed by the new ones (built inside the
    layer, so a checkpointed layer recomputes the padded copy instead of holding it)."""
    from transformers import DynamicCache

    class ReplayableCache(DynamicCache):
        rows: list[tuple[list[torch.Tensor], list[torch.Tensor]]] | None = None

        def freeze(
            self, rows: list[tuple[list[torch.Tensor], list[torch.Tensor]]], width: int
        ) -> None:
            """Per layer, each row's prompt ``(keys, values)`` ``(kv_heads, P, head_dim)``."""
            self.rows = rows
            for layer, (keys, values) in zip(self.layers, rows, strict=True):
                k = keys[0]
                shape = (len(keys), k.shape[0], width, k.shape[-1])
                held: Any = layer
                held.lazy_initialization(k, values[0])
                # Shape only (no storage), for the mask's length: the states are in ``rows``.
                held.keys = held.values = k.new_zeros(()).expand(shape)

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
            *args: Any, **kwargs: Any,
        ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
            layer: Any = self.layers[layer_idx]  # a DynamicLayer: keys (b, kv_heads, P, d)
            if self.rows is not None:
                width = layer.keys.shape[-2]
                pad = [(0, 0, width - x.shape[-2], 0) for x in self.rows[layer_idx][0]]
                keys, values = (
                    torch.stack(
                        [torch.nn.functional.pad(x, p) for x, p in zip(xs, pad, strict=True)]
                    )
                    for xs in self.rows[layer_idx]
                )  # (b, kv_heads, width, head_dim) each
                return (
                    torch.cat([keys, key_states], dim=-2),
                    torch.cat([values, value_states], dim=-2),
                )
            if not layer.is_initialized:
                layer.lazy_initialization(key_states, value_states)
            layer.keys, layer.values = key_states, value_states
            return key_states, value_states

    return ReplayableCache


def packable(model: Any) -> bool:
    """Whether ``model`` takes the packed layout's block mask: every layer full attention (no
    sliding window) and an attention that reads a 4-D mask (``sdpa`` or ``eager``)."""
    cfg = model.config.get_text_config()
    layer_types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
    return layer_types == {"full_attention"} and cfg._attn_implementation in ("sdpa", "eager")


class Learner:
    """PPO-clip and SFT updates for one policy.

    Args:
        model: A Hugging Face causal LM (or a ``peft`` model when ``adapter`` is set); trained in
            place, so an engine holding the same object sees new weights immediately.
        lr: Peak learning rate of AdamW.
        weight_decay: AdamW weight decay.
        grad_clip: Max global grad norm per optimizer step (``0`` disables clipping).
        mini_batch_size: Samples per optimizer step.
        micro_batch_size: Samples per forward/backward pass (gradient accumulation); default
            ``mini_batch_size``.
        epochs: Passes over the samples per ``update`` (1: the paper's setting).
        temperature: Sampling temperature of the engine; log-probs are computed at it.
        top_p: Sampling top-p of the engine; log-probs use the same nucleus.
        clip_low: PPO ratio lower clip (``1 - clip_low``).
        clip_high: PPO ratio upper clip (``1 + clip_high``).
        dual_clip: Dual-clip constant for negative advantages (None: off).
        kl_coef: Weight of the k3 KL to the reference policy (0: off, no reference pass).
        ref_model: The frozen reference; default when ``kl_coef > 0``: the adapter-free base for a
            LoRA learner, a frozen copy of ``model`` (as it is now) otherwise.
        dtype: Autocast dtype of the learner's forward passes (e.g. ``torch.bfloat16``); None runs
            in the parameters' dtype.
        lr_schedule: ``"constant"`` or ``"cosine"`` (after warmup, decays to
            ``min_lr_ratio * lr`` at ``total_steps``).
        warmup_steps: Linear warmup length in ``update`` calls.
        total_steps: Number of ``update`` calls of the run (needed by ``"cosine"``).
        min_lr_ratio: Final learning rate of the cosine schedule as a fraction of ``lr``.
        recompute_logprobs: Recompute old log-probs with the learner (True, the default). False
            uses the engine's log-probs as old log-probs (saves one forward pass; only sound when
            engine and learner compute the same numbers; ``perf/logprob_mismatch`` is then absent).
        adapter: LoRA adapter this learner trains (``per_role_lora``); None trains all parameters.
        pad_token_id: Id written into padding positions (never attended to, never scored).
        share_prompts: Run each distinct prompt once and let its completions attend to its keys
            and values (gradients flow through them), instead of re-running the prompt for every
            one of the K candidates of a group. Same numbers, up to K times less work when
            prompts dominate; under gradient checkpointing too. Where transformers drops the
            cache under checkpointing, a training pass packs a prompt and its completions into
            one row instead, where that costs fewer FLOPs than a row per sample.
        gradient_checkpointing: Trade compute for activation memory (large models).
        checkpoint_layers: Under ``gradient_checkpointing``, checkpoint only the first this many
            decoder layers (the rest keep their activations: no recompute there); None: all.
        checkpoint_mode: What the layers past ``checkpoint_layers`` do (:data:`CHECKPOINT_MODES`):
            ``full`` keeps their activations, ``selective`` checkpoints them saving every matmul
            and attention output (their replay costs no matmul FLOPs, their memory lies between).
        measure_change: After each update, score this share of its samples again (every
            ``1 / measure_change``-th; a no-grad forward pass over them) and report
            ``algo/approx_kl`` and ``algo/clip_frac``: how far the update moved the policy
            (1: all samples, the default; 0: off; 0.25 saves three quarters of that pass, a
            sixth of a forward + backward, but a sharded learner's ranks then measure other
            subsets than one learner would).
        seed: Seed of the learner's own shuffling generator.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        lr: float = 1e-6,
        weight_decay: float = 0.01,
        grad_clip: float = 1.0,
        mini_batch_size: int = 16,
        micro_batch_size: int | None = None,
        epochs: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        clip_low: float = 0.2,
        clip_high: float = 0.2,
        dual_clip: float | None = 3.0,
        kl_coef: float = 0.0,
        ref_model: PreTrainedModel | None = None,
        dtype: torch.dtype | None = None,
        lr_schedule: str = "constant",
        warmup_steps: int = 0,
        total_steps: int | None = None,
        min_lr_ratio: float = 0.0,
        recompute_logprobs: bool = True,
        adapter: str | None = None,
        pad_token_id: int = 0,
        share_prompts: bool = True,
        gradient_checkpointing: bool = False,
        checkpoint_layers: int | None = None,
        checkpoint_mode: str = "full",
        measure_change: float = 1.0,
        seed: int = 0,
    ) -> None:
        if mini_batch_size < 1 or (micro_batch_size is not None and micro_batch_size < 1):
            raise ValueError("mini_batch_size and micro_batch_size must be >= 1")
        if epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}")
        if lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {lr_schedule!r}")
        if lr_schedule == "cosine" and not total_steps:
            raise ValueError("lr_schedule='cosine' needs total_steps (the number of update calls)")
        if temperature <= 0:
            raise ValueError(
                f"temperature must be > 0 (the engine's sampling temperature), got {temperature}"
            )
        if not 0.0 <= measure_change <= 1.0:
            raise ValueError(
                f"measure_change is the share of samples re-scored after an update, in [0, 1]; "
                f"got {measure_change}"
            )
        self.model: Any = model  # a transformers or peft model
        self.adapter = adapter
        self.mini_batch_size = mini_batch_size
        self.micro_batch_size = micro_batch_size or mini_batch_size
        self.epochs = epochs
        self.temperature = temperature
        self.top_p = top_p
        self.clip_low, self.clip_high, self.dual_clip = clip_low, clip_high, dual_clip
        self.kl_coef = kl_coef
        self.grad_clip = grad_clip
        self.dtype = dtype
        self.recompute_logprobs = recompute_logprobs
        self.pad_token_id = pad_token_id
        self.share_prompts = share_prompts
        if checkpoint_mode not in CHECKPOINT_MODES:
            raise ValueError(
                f"checkpoint_mode must be one of {CHECKPOINT_MODES}, got {checkpoint_mode!r}"
            )
        # No checkpointed layer is no checkpointing (the KV cache of shared prompts survives).
        gradient_checkpointing = gradient_checkpointing and (
            checkpoint_layers != 0 or checkpoint_mode == "selective"
        )
        self.gradient_checkpointing = gradient_checkpointing
        self.measure_change = measure_change
        self.device = next(model.parameters()).device
        self._rng = torch.Generator().manual_seed(seed)

        if adapter is not None:
            if not hasattr(model, "set_adapter"):
                raise TypeError(
                    f"adapter={adapter!r} needs a peft model (mas_trainer.models.add_lora_adapters)"
                )
            named = [
                (n, p) for n, p in model.named_parameters() if "lora_" in n and f".{adapter}." in n
            ]
            if not named:
                raise ValueError(f"model has no LoRA adapter named {adapter!r}")
            model.set_adapter(adapter)
            for _, p in named:
                p.requires_grad_(True)
        else:
            named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self._params = dict(named)
        check_update_precision(self._params.values(), lr)

        self.ref_model = ref_model
        self._own_ref = kl_coef > 0 and ref_model is None and adapter is None
        if self._own_ref:
            self.ref_model = copy.deepcopy(model).requires_grad_(False).eval()

        base: Any = self.model
        if hasattr(base, "get_base_model"):  # peft wraps the transformers model
            base = base.get_base_model()
        # Packing replaces the KV cache that checkpointing drops, when the model can take it.
        self._pack_cost = (
            _LayoutCost.of(base)
            if share_prompts and gradient_checkpointing and packable(base)
            else None
        )
        if gradient_checkpointing:
            enable_checkpointing(model, checkpoint_layers, checkpoint_mode)
        self.optimizer = torch.optim.AdamW(
            list(self._params.values()), lr=lr, weight_decay=weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, _lr_lambda(lr_schedule, warmup_steps, total_steps, min_lr_ratio)
        )
        self.updates = 0

    # ---------------------------------------------------------------- public API

    def update(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One AT-GRPO training step on ``samples`` (advantages filled in).

        Returns:
            Metrics: ``loss/policy``, ``loss/kl`` (when on), ``algo/approx_kl`` and
            ``algo/clip_frac`` (after the update, with ``measure_change``: see
            :func:`~mas_trainer.at_grpo.policy_change`), ``algo/approx_kl_in_loss``,
            ``algo/clip_frac_in_loss``, ``algo/dual_clip_frac``, ``algo/ratio_mean`` (in the loss,
            before each mini-batch's step), ``algo/entropy``,
            ``algo/advantage_abs_mean``, ``perf/logprob_mismatch`` (+ ``_max``),
            ``optim/grad_norm``, ``optim/lr``, ``perf/update_s``, ``perf/learner_tokens_per_s``.
        """
        start = time.perf_counter()
        _check_samples(samples, need_logprobs=True)
        metrics: dict[str, float] = {}
        engine_lp = [torch.tensor(s.logprobs, dtype=torch.float32) for s in samples]
        advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
        if not torch.isfinite(advantages).all():
            raise ValueError("update: a sample has a non-finite advantage; check the rewards")

        # 1. Old (and reference) log-probs, before any parameter moves. The first mini-batch's
        # forward pass runs before any step: its detached log-probs are the old ones (no
        # separate scoring pass); the other mini-batches' samples are scored now.
        minis = list(self._mini_batches(samples))
        old_lp: list[torch.Tensor] = list(engine_lp)
        entropy = [0.0, 0]  # summed over tokens, tokens
        if self.recompute_logprobs and len(minis) > 1:
            rest = [i for mini in minis[1:] for i in mini]
            scored, (ent_sum, ent_n) = self._score([samples[i] for i in rest], with_entropy=True)
            for i, lp in zip(rest, scored, strict=True):
                old_lp[i] = lp
            entropy = [ent_sum, ent_n]
        ref_lp = self._score(samples, reference=True)[0] if self.kl_coef > 0 else None

        # 2. PPO-clip passes.
        sums: dict[str, float] = {}
        n_tok = 0
        grad_norms: list[float] = []
        for epoch in range(self.epochs):
            for k, mini in enumerate(minis if epoch == 0 else self._mini_batches(samples)):
                own_old = self.recompute_logprobs and epoch == 0 and k == 0
                mini_tokens = self._mini_tokens(samples, mini)
                for batch in self._with_prompt_backward(self._micro_batches(samples, mini)):
                    logp, ent = self._logprobs(batch, with_entropy=own_old)  # (b, Tc)
                    if own_old:
                        assert ent is not None
                        detached = logp.detach().float().cpu()
                        for r, i in enumerate(batch.index):
                            old_lp[i] = detached[r, : len(samples[i].completion_ids)]
                        entropy[0] += float((ent * batch.mask).sum())
                        entropy[1] += batch.n_tokens
                    old = _pad([old_lp[i] for i in batch.index], logp.shape[1]).to(self.device)
                    loss, m = ppo_clip_loss(
                        logp,
                        old,
                        advantages[batch.index].to(self.device),
                        batch.mask,
                        self.clip_low,
                        self.clip_high,
                        self.dual_clip,
                    )
                    m["loss/policy"] = loss.item()
                    if ref_lp is not None:
                        ref = _pad([ref_lp[i] for i in batch.index], logp.shape[1]).to(self.device)
                        kl = kl_k3(logp, ref, batch.mask)
                        loss = loss + self.kl_coef * kl
                        m["loss/kl"] = kl.item()
                    # Token mean over the mini-batch: weigh each micro-batch by its token share.
                    (loss * (batch.n_tokens / mini_tokens)).backward()
                    for key, v in m.items():
                        sums[key] = sums.get(key, 0.0) + v * batch.n_tokens
                    n_tok += batch.n_tokens
                grad_norms.append(self._optimizer_step())
        metrics.update({k: v / max(n_tok, 1) for k, v in sums.items()})
        if self.recompute_logprobs:
            diff = torch.cat([(a - b).abs() for a, b in zip(engine_lp, old_lp, strict=True)])
            metrics["perf/logprob_mismatch"] = diff.mean().item()
            metrics["perf/logprob_mismatch_max"] = diff.max().item()
            metrics["algo/entropy"] = entropy[0] / max(entropy[1], 1)
        if self.measure_change > 0:
            # The in-loss clip fraction and KL describe the policy before each mini-batch's step
            # (exactly 0 with one mini-batch): measure what the whole update did, after it, on
            # every (1 / measure_change)-th sample.
            every = max(1, round(1 / self.measure_change))
            picked = list(range(0, len(samples), every))
            new_lp = self._score([samples[i] for i in picked])[0]
            metrics.update(
                policy_change(
                    torch.cat(new_lp),
                    torch.cat([old_lp[i] for i in picked]),
                    self.clip_low,
                    self.clip_high,
                )
            )
        metrics["algo/advantage_abs_mean"] = advantages.abs().mean().item()
        metrics["optim/grad_norm"] = sum(grad_norms) / max(len(grad_norms), 1)
        metrics["optim/lr"] = self.optimizer.param_groups[0]["lr"]
        self.scheduler.step()
        self.updates += 1
        elapsed = time.perf_counter() - start
        metrics["perf/update_s"] = elapsed
        # Real prompt+completion tokens trained per second (padding and prompt sharing aside).
        trained = self.epochs * sum(s.num_tokens for s in samples)
        metrics["perf/learner_tokens_per_s"] = trained / elapsed
        return metrics

    def sft_update(
        self, samples: Sequence[TrainSample], lr: float | None = None
    ) -> dict[str, float]:
        """One supervised pass: cross-entropy on completion tokens only (prompts are not trained).

        Shuffled mini-batches of ``mini_batch_size``, one AdamW step each, log-probs at temperature
        1 over the full vocabulary. The loss of a mini-batch is each role's token mean, averaged
        over its roles (:func:`~mas_trainer.at_grpo.role_token_weights`; with one role, the plain
        token mean). Does not advance the RL learning-rate schedule.

        Args:
            samples: Prompt and target completion ids; ``logprobs`` and ``advantage`` are ignored.
            lr: Learning rate for this call (default: the current scheduled one).

        Returns:
            ``loss/sft`` (the loss above), ``loss/sft/<role>`` (each role's token mean) when the
            samples have several roles, ``optim/grad_norm``, ``perf/update_s``,
            ``perf/learner_tokens_per_s``.
        """
        start = time.perf_counter()
        _check_samples(samples, need_logprobs=False)
        saved = [g["lr"] for g in self.optimizer.param_groups]
        if lr is not None:
            for g in self.optimizer.param_groups:
                g["lr"] = lr
        total = 0.0
        role_nll: dict[str, list[float]] = {}  # role -> [summed nll, tokens]
        grad_norms = []
        try:
            for mini in self._mini_batches(samples):
                weight_of = dict(zip(mini, self._sft_weights(samples, mini), strict=True))
                for batch in self._with_prompt_backward(self._micro_batches(samples, mini)):
                    logp = self._logprobs(batch, temperature=1.0, top_p=1.0)[0]  # (b, Tc)
                    w = torch.tensor([weight_of[i] for i in batch.index], device=self.device)
                    loss = weighted_sft_loss(logp, batch.mask, w)
                    loss.backward()
                    total += loss.item()
                    nll = -(logp.detach() * batch.mask).sum(-1)  # (b,)
                    for r, i in enumerate(batch.index):
                        acc = role_nll.setdefault(samples[i].role, [0.0, 0.0])
                        acc[0] += nll[r].item()
                        acc[1] += len(samples[i].completion_ids)
                grad_norms.append(self._optimizer_step())
        finally:
            for g, v in zip(self.optimizer.param_groups, saved, strict=True):
                g["lr"] = v
        elapsed = time.perf_counter() - start
        return {
            **self._sft_losses(total, len(grad_norms), role_nll),
            "optim/grad_norm": sum(grad_norms) / max(len(grad_norms), 1),
            "perf/update_s": elapsed,
            "perf/learner_tokens_per_s": sum(s.num_tokens for s in samples) / elapsed,
        }

    def _sft_losses(
        self, total: float, steps: int, role_nll: dict[str, list[float]]
    ) -> dict[str, float]:
        """``loss/sft`` (the mini-batches' mean loss, from their sum ``total``) and, with several
        roles, ``loss/sft/<role>`` (each role's token mean, from ``role -> [nll sum, tokens]``)."""
        out = {"loss/sft": total / max(steps, 1)}
        if len(role_nll) > 1:
            out.update({f"loss/sft/{r}": v[0] / max(v[1], 1) for r, v in sorted(role_nll.items())})
        return out

    @torch.no_grad()
    def logprobs(self, samples: Sequence[TrainSample]) -> list[list[float]]:
        """The learner's log-probs of each sample's completion tokens (no grad, current weights)."""
        return [lp.tolist() for lp in self._score(samples)[0]]

    def reset_reference(self) -> None:
        """Make the policy as it is now the KL reference (e.g. after a warm start).

        Only for the learner's own frozen copy (``kl_coef > 0`` without ``ref_model``); a LoRA
        learner's reference is its base, which never changes.
        """
        if self._own_ref:
            assert self.ref_model is not None
            with torch.no_grad():
                self.ref_model.load_state_dict(self.model.state_dict())

    def state_dict(self) -> dict[str, Any]:
        """Trainable weights (the adapter's for LoRA), optimizer, schedule, step count and RNG
        (and the KL reference's weights when the learner holds its own copy), in memory.

        The tensors are the live ones, not copies (a copy of AdamW's moments is twice the model
        again): save them, or copy what you keep, before the next update. Checkpoints use
        :meth:`save`, which writes them without any copy.
        """
        state = {
            "trainable": {n: p.detach() for n, p in self._params.items()},
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "updates": self.updates,
            "rng": self._rng.get_state(),
        }
        if self._own_ref:
            assert self.ref_model is not None
            state["reference"] = {k: v.detach() for k, v in self.ref_model.state_dict().items()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (resume continues bit-for-bit where it stopped).

        Raises:
            KeyError: The checkpoint's trainable tensors do not match this learner's (another model
                or another adapter).
        """
        self._check_names(set(state["trainable"]))
        with torch.no_grad():
            for n, p in self._params.items():
                p.copy_(state["trainable"][n])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self._own_ref and "reference" in state:
            assert self.ref_model is not None
            self.ref_model.load_state_dict(state["reference"])
        self.updates = int(state["updates"])
        self._rng.set_state(state["rng"])

    def save(self, folder: str | Path) -> None:
        """Write the resumable state into ``folder`` with torch's distributed checkpoint.

        The tensors (master weights, AdamW moments, the KL reference) go through
        ``torch.distributed.checkpoint.save`` straight from the live tensors, one at a time: no
        copy of the optimizer is made, and on a sharded learner each rank writes only its own
        shards (``__<rank>_0.distcp``), so no rank ever holds more than its shard. The small
        state (hyperparameters, schedule, step count, RNG) goes to ``folder/state.pt`` (rank 0).
        Any number of ranks (or one process) can :meth:`load` it: the checkpoint is resharded on
        load. A collective on a sharded or replicated learner: call it on every rank.
        """
        import torch.distributed.checkpoint as dcp

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with _single_process_quiet():
            dcp.save(self._checkpoint_tensors(), checkpoint_id=str(folder), no_dist=not _in_group())
        if _rank() == 0:
            groups = [
                {k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups
            ]
            meta = {
                "format": CHECKPOINT_FORMAT,
                "param_groups": groups,
                "scheduler": self.scheduler.state_dict(),
                "updates": self.updates,
                "rng": self._rng.get_state(),
            }
            torch.save(meta, folder / STATE_FILE)

    def load(
        self, folder: str | Path, *, lr: float | None = None, weight_decay: float | None = None
    ) -> None:
        """Restore what :meth:`save` wrote (on any number of ranks), in place: each rank reads
        only its shards into its live tensors; resume continues bit-for-bit.

        Args:
            folder: A folder written by :meth:`save`.
            lr: The peak learning rate to run at from now on (default: the saved one), as
                :func:`with_hyperparameters` sets it (the schedule's position is kept).
            weight_decay: AdamW's weight decay from now on (default: the saved one).

        Raises:
            KeyError: The checkpoint's trainable tensors do not match this learner's.
            FileNotFoundError: ``folder`` holds no learner checkpoint.
        """
        import torch.distributed.checkpoint as dcp

        folder = Path(folder)
        if not (folder / STATE_FILE).is_file() or not (folder / ".metadata").is_file():
            raise FileNotFoundError(
                f"{folder} is not a learner checkpoint (Learner.save writes .metadata and "
                f"{STATE_FILE} there)"
            )
        saved = dcp.FileSystemReader(str(folder)).read_metadata().state_dict_metadata
        self._check_names(
            {k.removeprefix("trainable.") for k in saved if k.startswith("trainable.")}
        )
        self._prepare_optimizer_state(saved)
        tensors = {k: v for k, v in self._checkpoint_tensors().items() if k in saved}
        with torch.no_grad(), _single_process_quiet():
            dcp.load(tensors, checkpoint_id=str(folder), no_dist=not _in_group())
        meta = torch.load(folder / STATE_FILE, weights_only=False)
        state = {
            "optimizer": {"param_groups": meta["param_groups"]},
            "scheduler": meta["scheduler"],
        }
        if lr is not None or weight_decay is not None:
            group = meta["param_groups"][0]
            state = with_hyperparameters(
                state,
                lr=group["initial_lr"] if lr is None else lr,
                weight_decay=group["weight_decay"] if weight_decay is None else weight_decay,
            )
        for group, saved_group in zip(
            self.optimizer.param_groups, state["optimizer"]["param_groups"], strict=True
        ):
            group.update(saved_group)
        self.scheduler.load_state_dict(state["scheduler"])
        self.updates = int(meta["updates"])
        self._rng.set_state(meta["rng"])

    def _checkpoint_tensors(self) -> dict[str, torch.Tensor]:
        """The live tensors a checkpoint holds, by flat name (DTensor shards on a sharded
        learner): ``trainable.<param>``, ``optimizer.<param>.<state>``, ``reference.<tensor>``."""
        out = {f"trainable.{n}": p.detach() for n, p in self._params.items()}
        for n, p in self._params.items():
            for k, v in self.optimizer.state.get(p, {}).items():
                if torch.is_tensor(v):
                    out[f"optimizer.{n}.{k}"] = v
        if self._own_ref:
            assert self.ref_model is not None
            out.update({f"reference.{k}": v for k, v in self.ref_model.state_dict().items()})
        return out

    def _prepare_optimizer_state(self, saved: dict[str, Any]) -> None:
        """Give every parameter the optimizer-state tensors the checkpoint has for it (zeros,
        laid out as the parameter, to be loaded into in place), and none it lacks (a
        checkpoint saved before the parameter's first step)."""
        for n, p in self._params.items():
            keys = [k for k in saved if k.startswith(f"optimizer.{n}.")]
            if not keys:
                self.optimizer.state.pop(p, None)
                continue
            entry = self.optimizer.state[p]
            for key in keys:
                meta = saved[key]
                name = key.removeprefix(f"optimizer.{n}.")
                dtype = meta.properties.dtype
                if tuple(meta.size) == tuple(p.shape):
                    entry[name] = torch.zeros_like(p, dtype=dtype)
                else:  # AdamW's step count: a scalar on the CPU
                    entry[name] = torch.zeros(tuple(meta.size), dtype=dtype)

    def _check_names(self, names: set[str]) -> None:
        if names != set(self._params):
            missing = sorted(set(self._params) - names)[:3]
            extra = sorted(names - set(self._params))[:3]
            raise KeyError(
                f"checkpoint does not match this learner's parameters (missing e.g. {missing}, "
                f"unexpected e.g. {extra}); was it saved from another model or adapter?"
            )

    # ---------------------------------------------------------------- internals

    def _optimizer_step(self) -> float:
        params = list(self._params.values())
        if self.grad_clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(params, self.grad_clip))
        else:
            norm = float(
                torch.linalg.vector_norm(
                    torch.stack(
                        [torch.linalg.vector_norm(p.grad) for p in params if p.grad is not None]
                    )
                )
            )
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm

    def _mini_tokens(self, samples: Sequence[TrainSample], mini: list[int]) -> float:
        """The denominator of a mini-batch's token mean: its completion tokens (a sharded learner
        makes it the mean over ranks of the whole mini-batch's, so averaged gradients match)."""
        return float(sum(len(samples[i].completion_ids) for i in mini))

    def _mini_batches(self, samples: Sequence[TrainSample]) -> Iterator[list[int]]:
        """Shuffled mini-batches; samples of the same prompt (a group's K candidates) stay adjacent.

        Keeping a group together lets a micro-batch run its prompt once (``share_prompts``).
        With all prompts distinct this is a plain shuffle of the samples.
        """
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for i, sample in enumerate(samples):
            by_prompt.setdefault(tuple(sample.prompt_ids), []).append(i)
        groups = list(by_prompt.values())
        perm = torch.randperm(len(groups), generator=self._rng).tolist()
        order = [i for g in perm for i in groups[g]]
        for start in range(0, len(order), self.mini_batch_size):
            yield order[start : start + self.mini_batch_size]

    def _sft_weights(self, samples: Sequence[TrainSample], mini: list[int]) -> list[float]:
        """Per-token weight of each sample of a supervised mini-batch: every role weighs the same
        (:func:`~mas_trainer.at_grpo.role_token_weights`)."""
        roles = [samples[i].role for i in mini]
        return role_token_weights(roles, [len(samples[i].completion_ids) for i in mini])

    def _micro_batches(self, samples: Sequence[TrainSample], index: list[int]) -> Iterator[_Batch]:
        """The micro-batches of the samples ``index``, in the layout the pass runs.

        Length buckets: similar lengths together (less padding). Where prompts repeat, each
        distinct prompt runs once (:meth:`_prompt_blocks`); without shared prompts, by total
        length alone. Where transformers drops the cache under checkpointing, a pass with
        gradients there shares prompts by packing, or not at all; without gradients, identical
        prompts adjacent, each run once per micro-batch.
        """
        by_length = self._chunks(sorted(index, key=lambda i: (samples[i].num_tokens, i)))
        if not self.share_prompts:
            yield from (self._collate(samples, c) for c in by_length)
            return
        if len({tuple(samples[i].prompt_ids) for i in index}) < len(index) and (
            prompt_once_supported()
        ):
            yield from self._prompt_blocks(samples, index)
            return
        by_prompt = self._chunks(
            sorted(
                index,
                key=lambda i: (
                    len(samples[i].prompt_ids),
                    samples[i].prompt_ids,
                    samples[i].num_tokens,
                ),
            )
        )
        share = self._collate_shared
        if self.gradient_checkpointing and torch.is_grad_enabled():
            cost = self._pack_cost
            if cost is None or sum(self._packed_cost(samples, c, cost) for c in by_prompt) >= sum(
                cost(len(c), max(samples[i].num_tokens for i in c), dense=False) for c in by_length
            ):
                yield from (self._collate(samples, c) for c in by_length)
                return
            share = self._collate_packed
        for c in by_prompt:
            repeated = len({tuple(samples[i].prompt_ids) for i in c}) < len(c)
            yield share(samples, c) if repeated else self._collate(samples, c)

    def _chunks(self, order: list[int]) -> list[list[int]]:
        return [
            order[s : s + self.micro_batch_size]
            for s in range(0, len(order), self.micro_batch_size)
        ]

    @staticmethod
    def _packed_cost(samples: Sequence[TrainSample], chunk: list[int], cost: _LayoutCost) -> float:
        """Forward FLOPs of ``chunk`` laid out by :meth:`_collate_packed` (plain: no repeats)."""
        rows: dict[tuple[int, ...], int] = {}
        for i in chunk:
            prompt = tuple(samples[i].prompt_ids)
            rows[prompt] = rows.get(prompt, len(prompt)) + len(samples[i].completion_ids)
        if len(rows) == len(chunk):
            return cost(len(chunk), max(samples[i].num_tokens for i in chunk), dense=False)
        return cost(len(rows), max(rows.values()), dense=True)

    def _collate(self, samples: Sequence[TrainSample], index: list[int]) -> _Batch:
        rows = [samples[i] for i in index]
        width = max(s.num_tokens for s in rows)
        t_c = max(len(s.completion_ids) for s in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        positions = torch.zeros((len(rows), t_c), dtype=torch.long)
        targets = torch.full((len(rows), t_c), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), t_c), dtype=torch.bool)
        for r, s in enumerate(rows):
            p, c = len(s.prompt_ids), len(s.completion_ids)
            ids[r, : p + c] = torch.tensor(s.prompt_ids + s.completion_ids, dtype=torch.long)
            positions[r, :c] = torch.arange(p - 1, p + c - 1)  # position p-1 predicts token p
            targets[r, :c] = torch.tensor(s.completion_ids, dtype=torch.long)
            mask[r, :c] = True
        d = self.device
        return _Batch(ids.to(d), positions.to(d), targets.to(d), mask.to(d), index)

    def _collate_shared(self, samples: Sequence[TrainSample], index: list[int]) -> _Batch:
        rows = [samples[i] for i in index]
        distinct: dict[tuple[int, ...], int] = {}
        source = [distinct.setdefault(tuple(s.prompt_ids), len(distinct)) for s in rows]
        ids, pmask = left_padded(list(distinct), self.pad_token_id)
        targets, mask = self._targets(samples, index)
        d = self.device
        prefix = _Prefix(ids.to(d), pmask.to(d), torch.tensor(source, device=d))
        empty = torch.empty((len(rows), 0), dtype=torch.long, device=d)
        return _Batch(empty, empty, targets, mask, index, prefix)

    def _targets(
        self, samples: Sequence[TrainSample], index: list[int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(b, Tc)`` completion tokens right-padded, and the mask of the real ones."""
        rows = [samples[i] for i in index]
        t_c = max(len(s.completion_ids) for s in rows)
        targets = torch.full((len(rows), t_c), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), t_c), dtype=torch.bool)
        for r, s in enumerate(rows):
            targets[r, : len(s.completion_ids)] = torch.tensor(s.completion_ids, dtype=torch.long)
            mask[r, : len(s.completion_ids)] = True
        return targets.to(self.device), mask.to(self.device)

    def _collate_packed(self, samples: Sequence[TrainSample], index: list[int]) -> _Batch:
        rows = [samples[i] for i in index]
        # Per distinct prompt: the packed row's ids, segments and RoPE positions.
        packed: dict[tuple[int, ...], tuple[list[int], list[int], list[int]]] = {}
        t_c = max(len(s.completion_ids) for s in rows)
        positions = torch.zeros((len(rows), t_c), dtype=torch.long)
        targets = torch.full((len(rows), t_c), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), t_c), dtype=torch.bool)
        row: list[int] = []  # sample -> its packed row
        slot: dict[tuple[int, ...], int] = {}
        for r, s in enumerate(rows):
            p, c = len(s.prompt_ids), len(s.completion_ids)
            key = tuple(s.prompt_ids)
            if key not in packed:
                slot[key] = len(packed)
                packed[key] = (list(s.prompt_ids), [0] * p, list(range(p)))
            row.append(slot[key])
            ids, seg, pos = packed[key]
            # The prompt's last token predicts completion token 0, completion token j token j+1.
            positions[r, :c] = torch.tensor([p - 1, *range(len(ids), len(ids) + c - 1)])
            targets[r, :c] = torch.tensor(s.completion_ids, dtype=torch.long)
            mask[r, :c] = True
            seg += [seg[-1] + 1] * c
            ids += s.completion_ids
            pos += range(p, p + c)
        width = max(len(ids) for ids, _, _ in packed.values())
        input_ids = torch.full((len(packed), width), self.pad_token_id, dtype=torch.long)
        segments = torch.full((len(packed), width), -1, dtype=torch.long)
        position_ids = torch.zeros((len(packed), width), dtype=torch.long)
        for u, (ids, seg, pos) in enumerate(packed.values()):
            input_ids[u, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            segments[u, : len(ids)] = torch.tensor(seg, dtype=torch.long)
            position_ids[u, : len(ids)] = torch.tensor(pos, dtype=torch.long)
        d = self.device
        pk = _Packed(position_ids.to(d), segments.to(d), torch.tensor(row, device=d))
        return _Batch(input_ids.to(d), positions.to(d), targets.to(d), mask.to(d), index, packed=pk)

    def _token_logprobs(
        self,
        model: Any,
        batch: _Batch,
        temperature: float,
        top_p: float,
        with_entropy: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(b, Tc)`` log-probs of the targets (and, with ``with_entropy``, the ``(b, Tc)``
        entropy of each position's distribution, without grad) under ``model``."""
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        if batch.prompts is not None and not batch.prompts.states.states:
            # An autocast region of its own: the completions' pass then casts each weight anew
            # (autocast caches casts per region), as its checkpointed replay does.
            with self._autocast():
                run_prompts(base, batch.prompts.states, self.pad_token_id)
        with self._autocast():
            if batch.prompts is not None:
                hidden = prompt_once_hidden(base, batch.targets, batch.prompts)
            elif batch.prefix is not None:
                hidden = self._shared_prefix_hidden(base, base.get_decoder(), batch)
            else:
                hidden = completion_hidden(base, batch.input_ids, batch.positions, batch.packed)
            return hidden_logprobs(
                base.get_output_embeddings(), hidden, batch.targets, temperature, top_p,
                with_entropy,
            )  # fmt: skip

    def _shared_prefix_hidden(self, base: Any, decoder: Any, batch: _Batch) -> torch.Tensor:
        """``(b, Tc, H)`` hidden states predicting each completion token, prompts run once."""
        from transformers import DynamicCache

        pre = batch.prefix
        assert pre is not None
        cache_kw = cache_argument(base)
        # Left-padded prompts: positions count real tokens, so they match the plain layout.
        pos = (pre.mask.cumsum(-1) - 1).clamp(min=0)  # (u, P)
        cache = DynamicCache(config=base.config)
        out = decoder(
            input_ids=pre.ids,
            attention_mask=pre.mask,
            position_ids=pos,
            use_cache=True,
            **{cache_kw: cache},
        )
        first = out.last_hidden_state[:, -1][pre.source].unsqueeze(1)  # (b, 1, H) predicts token 0
        t_c = batch.targets.shape[1]
        if t_c == 1:
            return first
        # Each row gets its prompt's keys/values (indexing is differentiable: the prompt's
        # gradient is the sum over its completions, as if it had been run once per row).
        cache.batch_select_indices(pre.source)
        n = batch.targets.shape[0]
        attn = torch.cat([pre.mask[pre.source], pre.mask.new_ones((n, t_c - 1))], dim=-1)
        cpos = pos[pre.source, -1:] + 1 + torch.arange(t_c - 1, device=pos.device)  # (b, Tc-1)
        rest = decoder(
            input_ids=batch.targets[:, :-1],  # token j predicts token j+1; right padding at the end
            attention_mask=attn,
            position_ids=cpos,
            use_cache=True,
            **{cache_kw: cache},
        ).last_hidden_state  # (b, Tc-1, H)
        return torch.cat([first, rest], dim=1)

    def _logprobs(
        self,
        batch: _Batch,
        temperature: float | None = None,
        top_p: float | None = None,
        with_entropy: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(b, Tc)`` log-probs of the targets under the trained policy (with grad), and the
        entropy (no grad) with ``with_entropy``."""
        if self.adapter is not None:
            self.model.set_adapter(self.adapter)
        self.model.train()
        t = self.temperature if temperature is None else temperature
        p = self.top_p if top_p is None else top_p
        return self._token_logprobs(self.model, batch, t, p, with_entropy)

    @torch.no_grad()
    def _score(
        self, samples: Sequence[TrainSample], *, reference: bool = False, with_entropy: bool = False
    ) -> tuple[list[torch.Tensor], tuple[float, int]]:
        """Per-sample log-prob vectors under the policy (or the reference), and the entropy summed
        over the samples' tokens with their count."""
        model = self.model if not reference or self.ref_model is None else self.ref_model
        if self.adapter is not None:
            self.model.set_adapter(self.adapter)
        # A LoRA learner's reference is its base without adapters.
        ctx: AbstractContextManager[Any] = nullcontext()
        if reference and self.ref_model is None:
            ctx = self.model.disable_adapter()
        out: list[torch.Tensor] = [torch.empty(0)] * len(samples)
        ent_sum, n_tok = 0.0, 0
        was_training = model.training
        model.eval()
        with ctx:
            for batch in self._micro_batches(samples, list(range(len(samples)))):
                lp, ent = self._token_logprobs(
                    model, batch, self.temperature, self.top_p, with_entropy
                )
                if ent is not None:
                    ent_sum += float((ent * batch.mask).sum())
                    n_tok += batch.n_tokens
                for r, i in enumerate(batch.index):
                    out[i] = lp[r, : len(samples[i].completion_ids)].float().cpu()
        model.train(was_training)
        return out, (ent_sum, n_tok)

    def _prompt_blocks(self, samples: Sequence[TrainSample], index: list[int]) -> Iterator[_Batch]:
        """Micro-batches that run each distinct prompt once: per block of ``micro_batch_size``
        prompts (by length), one prompt pass, then the block's completions in micro-batches of
        similar length (little padding), each row attending to its own prompt's keys and values.
        Under gradient checkpointing too (:func:`_replayable_cache`); with grad, the block's
        prompt pass runs backward after its last micro-batch (:meth:`_with_prompt_backward`)."""
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for i in sorted(index, key=lambda i: (len(samples[i].prompt_ids), samples[i].prompt_ids)):
            by_prompt.setdefault(tuple(samples[i].prompt_ids), []).append(i)
        prompts = list(by_prompt)
        for start in range(0, len(prompts), self.micro_batch_size):
            states = PromptStates(prompts[start : start + self.micro_batch_size])
            members = [i for p in states.prompts for i in by_prompt[p]]
            by_length = sorted(members, key=lambda i: (len(samples[i].completion_ids), i))
            for chunk in self._chunks(by_length):
                targets, mask = self._targets(samples, chunk)
                rows = PromptRows(states, [tuple(samples[i].prompt_ids) for i in chunk])
                empty = torch.empty((len(chunk), 0), dtype=torch.long, device=self.device)
                yield _Batch(empty, empty, targets, mask, chunk, prompts=rows)

    @staticmethod
    def _with_prompt_backward(batches: Iterator[_Batch]) -> Iterator[_Batch]:
        """``batches``, and after the last micro-batch of a prompt block (when the caller, its
        backward done, asks for the next), the backward pass through that block's prompts."""
        held: PromptStates | None = None
        for batch in batches:
            states = batch.prompts.states if batch.prompts is not None else None
            if held is not None and states is not held:
                held.backward()
            held = states
            yield batch
        if held is not None:
            held.backward()

    def _autocast(self) -> AbstractContextManager[Any]:
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)


def left_padded(
    prompts: Sequence[Sequence[int]], pad_token_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(u, P)`` token ids of ``prompts`` left-padded to the longest, and the mask of the real
    ones (a prompt's last token in the last column, where its completion continues)."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[r, width - len(p) :] = 1
    return ids, mask


def run_prompts(base: Any, states: PromptStates, pad_token_id: int) -> None:
    """Fill ``states``: one decoder pass over its prompts (left-padded), each layer's keys and
    values kept per prompt (cut from the graph into leaves when it has grad)."""
    prompts = states.prompts
    device = base.get_input_embeddings().weight.device
    ids, mask = (t.to(device) for t in left_padded(prompts, pad_token_id))
    width = ids.shape[1]
    cache = _replayable_cache()(config=base.config)
    last = base.get_decoder()(
        input_ids=ids,
        attention_mask=mask,
        position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
        use_cache=False,  # the layers still write to the cache passed (no warning under
        **{cache_argument(base): cache},  # checkpointing, which sets it False anyway)
    ).last_hidden_state[:, -1]  # (u, H)
    last = states.leaf(last)
    layers: list[Any] = list(cache.layers)  # DynamicLayer: keys (u, kv_heads, P, head_dim)
    kv = [(states.leaf(x.keys), states.leaf(x.values)) for x in layers]
    for r, p in enumerate(prompts):  # (kv_heads, P, head_dim) each, padding cut
        states.states[p] = ([(k[r, :, width - len(p) :], v[r, :, width - len(p) :])
                             for k, v in kv], last[r])  # fmt: skip


def prompt_once_hidden(base: Any, targets: torch.Tensor, prompts: PromptRows) -> torch.Tensor:
    """``(b, Tc, H)`` hidden states predicting each completion token (``targets`` ``(b, Tc)``),
    each row reading its prompt's keys and values from ``prompts`` (filled by
    :func:`run_prompts`), left-padded to the longest prompt of the rows."""
    states, keys = prompts.states, prompts.rows
    first = torch.stack([states.states[k][1] for k in keys]).unsqueeze(1)  # (b, 1, H)
    t_c = targets.shape[1]
    if t_c == 1:
        return first
    width = max(len(k) for k in keys)
    cache = _replayable_cache()(config=base.config)
    per_layer = zip(*(states.states[k][0] for k in keys), strict=True)  # per layer, each row's
    cache.freeze([([k for k, _ in rows], [v for _, v in rows]) for rows in per_layer], width)
    n, device = len(keys), targets.device
    pmask = torch.zeros((n, width), dtype=torch.long, device=device)
    for r, k in enumerate(keys):
        pmask[r, width - len(k) :] = 1
    attn = torch.cat([pmask, pmask.new_ones((n, t_c - 1))], dim=-1)
    lengths = torch.tensor([len(k) for k in keys], device=device).unsqueeze(1)
    rest = base.get_decoder()(
        input_ids=targets[:, :-1],  # token j predicts token j+1; right padding at the end
        attention_mask=attn,
        position_ids=lengths + torch.arange(t_c - 1, device=device),  # (b, Tc-1)
        use_cache=False,
        **{cache_argument(base): cache},
    ).last_hidden_state  # (b, Tc-1, H)
    return torch.cat([first, rest], dim=1)


def completion_hidden(
    model: Any, input_ids: torch.Tensor, positions: torch.Tensor, packed: _Packed | None = None
) -> torch.Tensor:
    """``(b, Tc, H)`` final hidden states of a causal LM at ``positions`` only (those predicting
    completion tokens): the decoder over ``input_ids`` ``(b, L)``, gathered at ``positions``
    ``(b, Tc)``. The LM head never runs on the prompt. With ``packed``, ``input_ids`` is ``(u, L)``
    packed rows, run under their block mask and positions, and sample ``r`` reads row
    ``packed.row[r]``."""
    decoder = model.get_decoder()
    if packed is None:
        full = decoder(input_ids=input_ids, use_cache=False).last_hidden_state  # (b, L, H)
        idx = positions.unsqueeze(-1).expand(-1, -1, full.shape[-1])  # (b, Tc, H)
        return full.gather(1, idx)
    mask = packed.attention_mask(model.config.get_text_config()._attn_implementation)
    full = decoder(
        input_ids=input_ids,
        position_ids=packed.position_ids,
        attention_mask={"full_attention": mask},  # a prepared mask: used as it is
        use_cache=False,
    ).last_hidden_state  # (u, L, H)
    return full[packed.row.unsqueeze(-1), positions]  # (b, Tc, H)


VOCAB_CHUNK = 8192
"""Vocabulary rows per chunk of :func:`chunked_logprobs`: at 4 x 4096 completion tokens, one
chunk's fp32 logits are 0.5 GB, where the whole (B, T, V) tensor of Qwen3's 151,936 ids is 10 GB."""


def hidden_logprobs(
    head: Any,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    temperature: float,
    top_p: float,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(b, Tc)`` log-probs of ``targets`` under ``softmax(head(hidden) / temperature)`` and,
    with ``with_entropy``, the ``(b, Tc)`` entropy of each distribution (no grad).

    With ``top_p == 1`` and a bias-free head (every Qwen and Llama LM head) the vocabulary is
    processed in chunks (:func:`chunked_logprobs`), so no ``(b, Tc, V)`` tensor exists; top-p
    needs each position's whole sorted distribution and builds the logits.
    """
    if top_p >= 1.0 and getattr(head, "bias", None) is None and hasattr(head, "weight"):
        return chunked_logprobs(hidden, head.weight, targets, temperature, with_entropy)
    logits = head(hidden)  # (b, Tc, V)
    logp = token_logprobs(logits, targets, temperature, top_p)
    if not with_entropy:
        return logp, None
    with torch.no_grad():
        logp_all = (logits.float() / temperature).log_softmax(-1)  # (b, Tc, V)
        return logp, -(logp_all.exp() * logp_all).sum(-1)


def chunked_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of ``targets`` under ``softmax(hidden @ weight.T / temperature)``, the vocabulary
    in chunks of ``chunk`` rows: the same numbers as :func:`~mas_trainer.at_grpo.token_logprobs`
    on the whole logits (fp32 softmax over the matmul's output, as there), with at most one
    ``(N, chunk)`` block alive. The backward pass recomputes each block (one more matmul of the
    LM head's size) instead of keeping the logits.

    Args:
        hidden: ``(..., H)`` final hidden states (grad flows to them).
        weight: ``(V, H)`` the LM head (grad flows to it; tied embeddings included).
        targets: ``(...)`` long token ids.
        temperature: Softmax temperature (> 0).
        with_entropy: Also return each position's entropy (no grad; no extra matmul).
        chunk: Vocabulary rows per block (default :data:`VOCAB_CHUNK`).

    Returns:
        ``(logp, entropy)``: ``(...)`` float32, and ``(...)`` float32 or None.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs, got {temperature}")
    shape = targets.shape
    flat_h = hidden.reshape(-1, hidden.shape[-1])  # (N, H)
    logp, entropy = _ChunkedLogprobs.apply(
        flat_h, weight, targets.reshape(-1), temperature, chunk or VOCAB_CHUNK, with_entropy
    )
    return logp.view(shape), (entropy.view(shape) if with_entropy else None)


def _autocast_state(device: torch.device) -> tuple[str, bool, torch.dtype]:
    kind = device.type
    return kind, torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind)


class _ChunkedLogprobs(torch.autograd.Function):
    """``log softmax(h W^T / t)[y]`` over vocabulary blocks (see :func:`chunked_logprobs`)."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,  # (N, H)
        weight: torch.Tensor,  # (V, H)
        targets: torch.Tensor,  # (N,)
        temperature: float,
        chunk: int,
        with_entropy: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = hidden.shape[0]
        dev = hidden.device
        run_max = torch.full((n,), -math.inf, device=dev)  # (N,) running max of the logits
        run_sum = torch.zeros(n, device=dev)  # (N,) sum exp(z - max)
        run_dot = torch.zeros(n, device=dev)  # (N,) sum exp(z - max) * z (for the entropy)
        picked = torch.zeros(n, device=dev)  # (N,) the target's logit
        for start in range(0, weight.shape[0], chunk):
            z = (hidden @ weight[start : start + chunk].T).float() / temperature  # (N, c)
            new_max = torch.maximum(run_max, z.amax(-1))
            scale = torch.exp(run_max - new_max)
            e = torch.exp(z - new_max.unsqueeze(-1))  # (N, c)
            run_sum = run_sum * scale + e.sum(-1)
            if with_entropy:
                run_dot = run_dot * scale + (e * z).sum(-1)
            run_max = new_max
            inside = (targets >= start) & (targets < start + z.shape[1])
            local = (targets - start).clamp(0, z.shape[1] - 1).unsqueeze(-1)
            picked = torch.where(inside, z.gather(-1, local).squeeze(-1), picked)
        lse = run_max + run_sum.log()  # (N,)
        entropy = lse - run_dot / run_sum if with_entropy else torch.empty(0, device=dev)
        ctx.save_for_backward(hidden, weight, targets, lse)
        ctx.temperature, ctx.chunk = temperature, chunk
        ctx.autocast = _autocast_state(dev)
        ctx.mark_non_differentiable(entropy)
        return picked - lse, entropy

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor, _: Any) -> tuple[Any, ...]:
        hidden, weight, targets, lse = ctx.saved_tensors
        t, chunk = ctx.temperature, ctx.chunk
        kind, enabled, dtype = ctx.autocast
        grad_h = torch.zeros_like(hidden, dtype=torch.float32) if ctx.needs_input_grad[0] else None
        grad_w = torch.zeros_like(weight, dtype=torch.float32) if ctx.needs_input_grad[1] else None
        with torch.autocast(kind, dtype=dtype, enabled=enabled):
            for start in range(0, weight.shape[0], chunk):
                w = weight[start : start + chunk]  # (c, H)
                z = (hidden @ w.T).float() / t  # (N, c), recomputed
                # d logp / d z = onehot(y) - softmax(z); times the incoming grad, / t for h W^T
                dz = -torch.exp(z - lse.unsqueeze(-1)) * grad.unsqueeze(-1)  # (N, c)
                # + grad at each row's target column when it falls in this block: a scatter, not
                # boolean indexing (no data-dependent shape: no device sync, and it traces on
                # fake tensors for --plan)
                inside = (targets >= start) & (targets < start + z.shape[1])
                local = (targets - start).clamp(0, z.shape[1] - 1).unsqueeze(-1)  # (N, 1)
                dz.scatter_add_(-1, local, torch.where(inside, grad, 0.0).unsqueeze(-1))
                dz = (dz / t).to(z.dtype if not enabled else dtype)
                if grad_h is not None:
                    grad_h += (dz @ w.to(dz.dtype)).float()
                if grad_w is not None:
                    grad_w[start : start + chunk] += (dz.T @ hidden.to(dz.dtype)).float()
        return (
            None if grad_h is None else grad_h.to(hidden.dtype),
            None if grad_w is None else grad_w.to(weight.dtype),
            None, None, None, None,
        )  # fmt: skip


def _in_group() -> bool:
    """Whether this process is a rank of a ``torch.distributed`` group (a sharded or replicated
    learner), so checkpoint I/O is a collective."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


@contextmanager
def _single_process_quiet() -> Iterator[None]:
    """Silence torch's notice that a checkpoint is read or written by one process (intended)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def read_checkpoint(folder: str | Path) -> dict[str, Any]:
    """A learner checkpoint (:meth:`Learner.save`) read whole into this process, for inspection.

    Returns:
        ``{"trainable": {param: tensor}, "optimizer": {"state": {param: {"step", "exp_avg",
        ...}}, "param_groups": [...]}, "scheduler", "updates", "rng"}`` (and ``"reference"``
        when the learner kept its own KL reference): the layout of :meth:`Learner.state_dict`
        with the optimizer state keyed by parameter name. It holds the whole state in memory;
        resuming goes through :meth:`Learner.load`, which reads each rank's shards only.
    """
    import torch.distributed.checkpoint as dcp

    folder = Path(folder)
    saved: dict[str, Any] = dcp.FileSystemReader(str(folder)).read_metadata().state_dict_metadata
    tensors = {k: torch.empty(tuple(m.size), dtype=m.properties.dtype) for k, m in saved.items()}
    with _single_process_quiet():
        dcp.load(tensors, checkpoint_id=str(folder), no_dist=True)
    meta = torch.load(folder / STATE_FILE, weights_only=False)
    out: dict[str, Any] = {
        "trainable": {},
        "optimizer": {"state": {}, "param_groups": meta["param_groups"]},
        **{k: meta[k] for k in ("scheduler", "updates", "rng")},
    }
    for key, t in tensors.items():
        kind, name = key.split(".", 1)
        if kind == "optimizer":
            param, state = name.rsplit(".", 1)
            out["optimizer"]["state"].setdefault(param, {})[state] = t
        else:
            out.setdefault(kind, {})[name] = t
    return out


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if _in_group() else 0


def _pad(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    """Stack 1-D tensors right-padded with 0 to ``(len(rows), width)``."""
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for r, v in enumerate(rows):
        out[r, : len(v)] = v
    return out


def _check_samples(samples: Sequence[TrainSample], *, need_logprobs: bool) -> None:
    if not samples:
        raise ValueError("update got no samples")
    for k, s in enumerate(samples):
        if not s.prompt_ids or not s.completion_ids:
            raise ValueError(
                f"sample {k} has an empty prompt or completion; drop it before training"
            )
        if need_logprobs and len(s.logprobs) != len(s.completion_ids):
            raise ValueError(
                f"sample {k}: {len(s.logprobs)} engine log-probs for {len(s.completion_ids)} "
                "completion tokens; PPO needs the engine's log-prob of every sampled token"
            )


def cosine_decay(progress: float, min_ratio: float) -> float:
    """The cosine schedule's multiplier of the peak rate: 1 at ``progress`` 0, ``min_ratio`` at 1,
    half a cosine in between (the RL learner's ``"cosine"`` and the warm start's schedule)."""
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _lr_lambda(schedule: str, warmup_steps: int, total_steps: int | None, min_ratio: float) -> Any:
    """Multiplier of the peak lr after ``step`` update calls."""

    def f(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "constant" or total_steps is None:
            return 1.0
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return cosine_decay(progress, min_ratio)

    return f


def with_hyperparameters(
    state: dict[str, Any], *, lr: float, weight_decay: float
) -> dict[str, Any]:
    """A :meth:`Learner.state_dict` whose optimiser runs at peak rate ``lr`` and ``weight_decay``.

    Loading a saved optimiser and schedule restores their rate and decay, so a resumed run would
    keep the old ones whatever its config says; this sets the config's (the schedule's position
    is kept: the current rate is ``lr`` times the schedule's factor now). Pure: ``state`` is not
    changed (only its small hyperparameter dicts are copied, never its tensors).
    """
    optimizer = state["optimizer"]
    state = {
        **state,
        "optimizer": {**optimizer, "param_groups": copy.deepcopy(optimizer["param_groups"])},
    }
    sched = dict(state["scheduler"])
    old_base = list(sched.get("base_lrs") or [])
    groups = state["optimizer"]["param_groups"]
    for i, group in enumerate(groups):
        base = old_base[i] if i < len(old_base) else group.get("initial_lr", group["lr"])
        factor = group["lr"] / base if base else 1.0
        group["lr"] = lr * factor
        group["initial_lr"] = lr
        group["weight_decay"] = weight_decay
    sched["base_lrs"] = [lr] * len(groups)
    if "_last_lr" in sched:
        sched["_last_lr"] = [g["lr"] for g in groups]
    state["scheduler"] = sched
    return state
