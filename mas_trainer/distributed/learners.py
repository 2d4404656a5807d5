"""A policy's learner ranks on ``torch.distributed``: data-parallel replicas or FSDP2 shards.

Both kinds train each rank on its own shard of a step's samples (the driver's
:func:`~mas_trainer.distributed.handles.shard_samples`) and take exactly ``dp_steps`` optimizer
steps per update, so one global mini-batch is the union of the ranks' mini-batches and its loss is
the token mean over all of them: each rank divides its micro-batches' token sums by the mini-batch's
tokens averaged over the ranks (:meth:`RankLearner._mini_tokens`), and the gradients are then
averaged over the ranks. The warm start's supervised loss (each role's token mean, averaged over
the roles) counts each role's tokens over the whole group's mini-batch too
(:meth:`RankLearner._sft_weights`), and its logged losses are the group's. With one mini-batch per
update a sharded step is the single learner's step; with several, the ranks' k-th mini-batches
make another (equally shuffled) partition of the samples than the single learner's.

* :class:`DataParallelLearner`: every rank holds the whole model (``run.ray_sharding=replicate``)
  and all-reduces the gradients before each optimizer step.
* :class:`FSDPLearner` (``run.ray_sharding=fsdp``): the model is sharded with FSDP2
  (``torch.distributed.fsdp.fully_shard``: one unit per decoder layer, and the embeddings, final
  norm and LM head in the root unit). Each rank keeps 1/world of the fp32 master weights, their
  gradients and AdamW state, and so 16/world bytes per parameter. ``MixedPrecisionPolicy(
  param_dtype=bf16, reduce_dtype=fp32)`` is the compute precision (``model.autocast``): weights
  are all-gathered in bf16 for the forward and backward, gradients reduce-scattered in fp32 into
  the fp32 shards. The engine gets full bf16 weights gathered from the shards
  (:meth:`FSDPLearner.full_weights`). Checkpoints (:meth:`~mas_trainer.learner.Learner.save`)
  are torch distributed checkpoints: each rank writes its own shards of the fp32 weights and
  AdamW state, and nothing is gathered; they load, resharded, on any number of ranks, or into
  one unsharded learner. At the start only rank 0 loads the whole model (on the CPU); the other
  ranks build it on the meta device and receive their shards from rank 0
  (:func:`shard_model` with ``from_rank0``), so host memory holds one whole model per group.

FSDP's all-gathers are collectives: every rank must run the same number of forward passes, in the
same order. A rank with fewer micro-batches than another runs copies of one of its own with an
empty loss mask (no token counts, the gradient is zero), and prompts are never shared across a
micro-batch's rows (``share_prompts`` runs the decoder twice per micro-batch).

This module imports torch; :mod:`mas_trainer.distributed.actors` imports it inside the actors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist

from mas_trainer.at_grpo import role_token_counts, role_token_weights
from mas_trainer.learner import Learner, completion_hidden, hidden_logprobs
from mas_trainer.samples import TrainSample

__all__ = ["CompletionLM", "DataParallelLearner", "FSDPLearner", "RankLearner", "shard_model"]


class RankLearner(Learner):
    """A :class:`Learner` on one rank of a group: ``dp_steps`` optimizer steps per update, each
    one mini-batch of this rank's samples; token means over the whole group's mini-batch."""

    dp_steps: int = 1
    _samples: Sequence[TrainSample] = ()

    def update(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        self._samples = samples
        return super().update(samples)

    def sft_update(
        self, samples: Sequence[TrainSample], lr: float | None = None
    ) -> dict[str, float]:
        self._samples = samples
        return super().sft_update(samples, lr=lr)

    def _mini_batches(self, samples: Sequence[TrainSample]) -> Iterator[list[int]]:
        # The learner's own order (shuffled, a prompt's samples adjacent), cut into exactly
        # `dp_steps` mini-batches (the driver makes every shard hold >= dp_steps samples).
        order = [i for mini in super()._mini_batches(samples) for i in mini]
        n, steps = len(order), self.dp_steps
        for i in range(steps):
            yield order[i * n // steps : (i + 1) * n // steps]

    def _sft_weights(self, samples: Sequence[TrainSample], mini: list[int]) -> list[float]:
        # Each role's target tokens over the group's mini-batch, not this rank's share: a rank
        # that normalised by its own tokens made the step the mean of the ranks' token means,
        # which is not the single learner's token mean (the warm start of a sharded run drifted
        # from the single-process run's). x world: the gradients are then averaged over the ranks.
        roles = [samples[i].role for i in mini]
        lengths = [len(samples[i].completion_ids) for i in mini]
        world = dist.get_world_size()
        every: list[dict[str, int] | None] = [None] * world
        dist.all_gather_object(every, role_token_counts(roles, lengths))
        total: dict[str, int] = {}
        for counts in every:
            for role, n in (counts or {}).items():
                total[role] = total.get(role, 0) + n
        return [world * w for w in role_token_weights(roles, lengths, role_tokens=total)]

    def _sft_losses(
        self, total: float, steps: int, role_nll: dict[str, list[float]]
    ) -> dict[str, float]:
        # The group's losses, the same on every rank: the loss is the sum of the ranks' parts
        # (each was weighted x world), each role's the token mean over the whole group.
        loss = torch.tensor([total], dtype=torch.float64, device=self.device)
        dist.all_reduce(loss)
        every: list[dict[str, list[float]] | None] = [None] * dist.get_world_size()
        dist.all_gather_object(every, role_nll)
        group: dict[str, list[float]] = {}
        for part in every:
            for role, (nll, n) in (part or {}).items():
                acc = group.setdefault(role, [0.0, 0.0])
                acc[0] += nll
                acc[1] += n
        return super()._sft_losses(float(loss.item()) / len(every), steps, group)

    def _mini_tokens(self, samples: Sequence[TrainSample], mini: list[int]) -> float:
        # The group's mini-batch tokens over the ranks: after the gradients are averaged over the
        # ranks, the step follows the token mean of the union of the ranks' mini-batches.
        tokens = torch.tensor([super()._mini_tokens(samples, mini)], device=self.device)
        dist.all_reduce(tokens)
        return float(tokens.item()) / dist.get_world_size()


class DataParallelLearner(RankLearner):
    """Full replicas: the gradients are averaged over the ranks before each optimizer step, so the
    replicas take identical steps and stay identical."""

    def _optimizer_step(self) -> float:
        world = dist.get_world_size()
        for p in self._params.values():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            dist.all_reduce(p.grad)
            p.grad.div_(world)
        return super()._optimizer_step()


class CompletionLM(torch.nn.Module):
    """A causal LM as the learner runs it (:func:`~mas_trainer.learner.completion_hidden`, then
    :func:`~mas_trainer.learner.hidden_logprobs`), as one module: FSDP's root unit, whose forward
    gathers the embeddings and LM head it owns."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.lm = model

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        targets: torch.Tensor,
        temperature: float,
        top_p: float,
        with_entropy: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        hidden = completion_hidden(self.lm, input_ids, positions)  # (b, Tc, H)
        head = self.lm.get_output_embeddings()
        return hidden_logprobs(head, hidden, targets, temperature, top_p, with_entropy)


def shard_model(
    model: Any,
    param_dtype: torch.dtype | None,
    device: str | torch.device | None = None,
    *,
    from_rank0: bool = False,
) -> CompletionLM:
    """Shard ``model`` in place over the default process group with FSDP2.

    ``device`` is where the shards live (default: where the model is). A model loaded on the CPU
    moves to ``device`` one ``fully_shard`` unit at a time and is sharded there, so no GPU ever
    holds the whole model.

    One ``fully_shard`` unit per decoder layer, then the root (:class:`CompletionLM`: embeddings,
    final norm, LM head; tied embeddings stay one parameter). Parameters become ``DTensor`` shards
    in their own dtype (the fp32 masters); ``param_dtype`` (e.g. bf16) is what forward and
    backward compute in, with gradients reduced in fp32.

    With ``from_rank0`` only rank 0's ``model`` holds weights; the other ranks built theirs on the
    meta device (:func:`~mas_trainer.models.load_model` with ``device="meta"``: no weight memory).
    Every rank shards its model, the meta ranks allocate their shards (``to_empty``), and rank 0
    sends the weights one tensor at a time (:func:`_load_from_rank0`), so no rank other than 0 ever
    holds more than its shards and one whole tensor. The shards are the ones every rank would have
    cut from a whole model of its own.

    Returns:
        The root module to call (``root(input_ids, positions, targets, temperature, top_p)
        -> (log-probs, entropy or None)``).
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    where = torch.device(device) if device is not None else next(model.parameters()).device
    if where.type == "meta":
        raise ValueError("shard_model: a model on the meta device needs device= (the shards')")
    mesh = init_device_mesh(where.type, (dist.get_world_size(),))
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    root = CompletionLM(model)
    # Rank 0's whole tensors (references: sharding copies each rank's part out of them).
    whole = root.state_dict() if from_rank0 and dist.get_rank() == 0 else {}
    for layer in model.get_decoder().layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(root, mesh=mesh, mp_policy=mp)
    if from_rank0:
        _load_from_rank0(root, whole, where)
    return root


def _load_from_rank0(root: torch.nn.Module, whole: dict[str, Any], device: Any) -> None:
    """Fill every rank's shards of ``root`` (sharded by FSDP2) from rank 0's whole tensors.

    Args:
        root: The sharded model; on ranks other than 0 its tensors may be on the meta device
            (they are allocated on ``device`` first, shards only).
        whole: On rank 0, ``root``'s state dict taken before sharding; ``{}`` on the others.
        device: Where the shards live.

    The state dict goes through torch's ``set_model_state_dict(broadcast_from_rank0=True)``, one
    tensor at a time; the non-persistent buffers (RoPE's ``inv_freq``), which no state dict
    holds, are copied from rank 0's. A collective: every rank calls it.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if any(t.is_meta for t in [*root.parameters(), *root.buffers()]):
        root.to_empty(device=device)  # FSDP2's _apply allocates each parameter's shard only
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(root, whole, options=options)
    saved = set(root.state_dict())
    buffers = {n: b for n, b in root.named_buffers() if n not in saved}
    sent: list[Any] = [{n: b.cpu() for n, b in buffers.items()} if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(sent, src=0)  # small tensors; a shape mismatch fails in copy_
    with torch.no_grad():
        for name, buffer in buffers.items():
            buffer.copy_(sent[0][name])


def _is_dtensor(t: Any) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(t, DTensor)


def _full(t: Any) -> torch.Tensor:
    """The whole tensor behind a shard (a collective for a DTensor), on the CPU."""
    return (t.full_tensor() if _is_dtensor(t) else t).detach().to("cpu")


def _shard_like(full: torch.Tensor, param: Any) -> Any:
    """``full`` laid out as ``param`` is (a DTensor shard of it, or the tensor itself)."""
    if not _is_dtensor(param):
        return full.to(param.device)
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(full.to(param.device), param.device_mesh, param.placements)


class FSDPLearner(RankLearner):
    """A :class:`Learner` whose model is sharded with FSDP2 across the group (module docstring).

    Args:
        model: The whole model, the same weights on every rank (or, with ``from_rank0``, on
            rank 0 only); sharded in place.
        dtype: The compute dtype (``model.autocast``), FSDP's ``MixedPrecisionPolicy.param_dtype``;
            None computes in the parameters' dtype.
        root: The root of a model this group sharded already (``learner.root``: a new learner,
            with a fresh optimizer, on the same shards; e.g. RL after the warm start).
        device: Where the shards live (:func:`shard_model`; default: where the model is).
        from_rank0: Only rank 0's ``model`` holds weights, the other ranks' are on the meta
            device; rank 0 sends them (:func:`shard_model`).
        **kwargs: As :class:`~mas_trainer.learner.Learner` (no ``adapter``, no ``kl_coef``).

    Every method is a collective: call it on every rank of the group, in the same order.
    """

    def __init__(
        self,
        model: Any,
        *,
        dtype: torch.dtype | None = None,
        root: CompletionLM | None = None,
        device: str | None = None,
        from_rank0: bool = False,
        **kwargs: Any,
    ) -> None:
        if kwargs.get("adapter") is not None:
            raise ValueError("FSDP learners train whole models; per_role_lora runs unsharded")
        if kwargs.get("kl_coef", 0.0) > 0:
            raise ValueError(
                "algo.kl_coef > 0 with run.ray_sharding fsdp: the KL reference model is not "
                "sharded; use run.ray_sharding replicate, or kl_coef 0 (the paper's setting)"
            )
        if root is None:
            root = shard_model(model, dtype, device, from_rank0=from_rank0)
        self.root = root
        kwargs["share_prompts"] = False  # one decoder call per micro-batch on every rank
        super().__init__(model, dtype=None, **kwargs)

    def _token_logprobs(
        self,
        model: Any,
        batch: Any,
        temperature: float,
        top_p: float,
        with_entropy: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.root(
            batch.input_ids, batch.positions, batch.targets, temperature, top_p, with_entropy
        )  # (b, Tc) each

    def _micro_batches(self, samples: Sequence[TrainSample], index: list[int]) -> Iterator[Any]:
        batches = list(super()._micro_batches(samples, index))
        count = torch.tensor([len(batches)], device=self.device)
        dist.all_reduce(count, op=dist.ReduceOp.MAX)
        yield from batches
        # Pad to the group's count: a copy of one of this rank's micro-batches that scores no
        # token, so every rank runs the same forward (and backward) passes.
        empty = dataclasses.replace(batches[0], mask=torch.zeros_like(batches[0].mask))
        for _ in range(int(count.item()) - len(batches)):
            yield empty

    def _optimizer_step(self) -> float:
        params = list(self._params.values())
        clip = self.grad_clip if self.grad_clip > 0 else 1e30
        norm = _full(torch.nn.utils.clip_grad_norm_(params, clip))  # a DTensor's: a collective
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    def full_weights(self, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor] | None:
        """Every tensor of the model's ``state_dict`` whole (the engine's copy), cast to ``dtype``
        before the gather (bf16 halves the traffic), on the CPU; None on ranks other than 0."""
        out: dict[str, torch.Tensor] = {}
        gathered: dict[int, torch.Tensor] = {}  # tied tensors are gathered once
        for name, t in self.model.state_dict().items():
            if id(t) not in gathered:
                gathered[id(t)] = _full(t if dtype is None else t.to(dtype))
            out[name] = gathered[id(t)]
        return out if dist.get_rank() == 0 else None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore an unsharded learner's in-memory state (whole tensors: a
        :meth:`~mas_trainer.learner.Learner.state_dict`) into this rank's shards. Checkpoints
        go through :meth:`~mas_trainer.learner.Learner.save` / ``load`` instead, which read and
        write each rank's shards only."""
        params = list(self._params.values())
        optim = dict(state["optimizer"])
        optim["state"] = {
            k: {
                name: _shard_like(v, params[int(k)])
                if torch.is_tensor(v) and v.shape == params[int(k)].shape
                else v
                for name, v in entry.items()
            }
            for k, entry in optim["state"].items()
        }
        trainable = {n: _shard_like(state["trainable"][n], p) for n, p in self._params.items()}
        super().load_state_dict({**state, "trainable": trainable, "optimizer": optim})
