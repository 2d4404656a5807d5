"""The embedded engine: batched sampling with a KV cache over any Hugging Face causal LM.

:class:`TransformersEngine` runs on the CPU or a GPU: prompts left-padded, each distinct prompt
prefilled once, rows dropped from the batch as they finish. It shares the learner's model object,
so weight sync is a no-op. The protocol it implements is :class:`mas_trainer.engines.Engine`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from mas_trainer.at_grpo import top_p_filter
from mas_trainer.engines.base import Completion, SamplingParams
from mas_trainer.models import cache_argument, stop_token_ids

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["TransformersEngine"]


class TransformersEngine:
    """Batched sampling with a KV cache over a Hugging Face causal LM.

    Args:
        model: A causal LM (optionally a ``peft`` model); used in place, never copied.
        tokenizer: Its tokenizer; supplies the pad id and the stop ids (``<|im_end|>``,
            ``<|endoftext|>``, eos).
        batch_size: Most sequences decoded together; longer prompt lists are split into chunks of
            similar prompt length (less padding).
        adapter: Name of the LoRA adapter to activate before generating (``per_role_lora``).
        seed: Seed of the engine's own generator, used when ``generate`` gets no seed.
        autocast: Compute dtype of generation when it differs from the parameters' (fp32 master
            weights sampled in bf16, as the learner computes: ``model.engine_dtype``); None runs
            in the parameters' dtype.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        batch_size: int = 64,
        adapter: str | None = None,
        seed: int = 0,
        autocast: torch.dtype | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model: Any = model  # a transformers or peft model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.adapter = adapter
        self.device = next(model.parameters()).device
        self.autocast = autocast if autocast != next(model.parameters()).dtype else None
        pad = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        if pad is None:
            raise ValueError(
                "tokenizer has neither a pad nor an eos token; set tokenizer.pad_token"
            )
        self.pad_id = int(pad)
        self.stop_ids = torch.tensor(stop_token_ids(tokenizer), device=self.device)
        self._generator = torch.Generator(device=self.device).manual_seed(seed)
        self._cache_kwarg = cache_argument(model)

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Copy weights into the model; tensors that already are its own parameters are skipped.

        Raises:
            KeyError: A name the model does not have (the message lists a few that it has).
        """
        own = dict(self.model.state_dict())
        with torch.no_grad():
            for name, value in state_dict.items():
                if name not in own:
                    sample = ", ".join(list(own)[:3])
                    raise KeyError(
                        f"load_weights: model has no tensor {name!r} (it has e.g. {sample})"
                    )
                if own[name].data_ptr() != value.data_ptr():
                    own[name].copy_(value)

    @torch.inference_mode()
    def generate(
        self, prompts: list[list[int]], params: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        """Sample one completion per prompt.

        Args:
            prompts: Token ids per prompt (e.g. from :func:`mas_trainer.models.chat_prompt_ids`).
            params: Sampling settings.
            seed: Seed for this call (reproducible output for the same prompts and settings);
                None draws from the engine's own generator.

        Returns:
            Completions in prompt order.
        """
        if any(len(p) == 0 for p in prompts):
            raise ValueError("generate: every prompt needs at least one token")
        if self.adapter is not None:
            self.model.set_adapter(self.adapter)
        gen = self._generator
        if seed is not None:
            gen = torch.Generator(device=self.device).manual_seed(seed)
        was_training = self.model.training
        self.model.eval()
        # Longest first, so each chunk holds prompts of similar length (less left padding).
        order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
        results: list[Completion | None] = [None] * len(prompts)
        compute: Any = (
            torch.autocast(self.device.type, dtype=self.autocast)
            if self.autocast is not None
            else contextlib.nullcontext()
        )
        try:
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                with compute:
                    done = self._generate_chunk([prompts[i] for i in chunk], params, gen)
                for i, c in zip(chunk, done, strict=True):
                    results[i] = c
        finally:
            self.model.train(was_training)
        return [c for c in results if c is not None]

    def _generate_chunk(
        self, prompts: list[list[int]], params: SamplingParams, gen: torch.Generator
    ) -> list[Completion]:
        n = len(prompts)
        # Tree rollouts send each prompt K times: prefill every distinct prompt once, then give
        # each row a copy of its prompt's KV cache (decoding still samples every row on its own).
        distinct: dict[tuple[int, ...], int] = {}
        source = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
        unique = [list(p) for p in distinct]
        u, width = len(unique), max(len(p) for p in unique)
        ids = torch.full((u, width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((u, width), dtype=torch.long)
        for row, p in enumerate(unique):
            ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attn[row, width - len(p) :] = 1
        ids, attn = ids.to(self.device), attn.to(self.device)
        # Left padding shifts tokens right; positions count real tokens only, as in training.
        pos = (attn.cumsum(-1) - 1).clamp(min=0)  # (u, width)
        cache = _decode_cache(self.model.config, reserve=params.max_tokens)
        out = self.model(
            input_ids=ids,
            attention_mask=attn,
            position_ids=pos,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kwarg: cache},
        )
        logits = out.logits[:, -1]  # (u, V)
        next_pos = pos[:, -1] + 1  # (u,)
        if u < n:
            expand = torch.tensor(source, device=self.device)  # (n,) row -> distinct prompt
            cache.batch_select_indices(expand)
            logits, attn, next_pos = logits[expand], attn[expand], next_pos[expand]
        rows = torch.arange(n, device=self.device)  # original row of each active row
        tokens: list[list[int]] = [[] for _ in range(n)]
        logps: list[list[float]] = [[] for _ in range(n)]
        stopped = [False] * n
        for step in range(params.max_tokens):
            tok, lp = _sample(logits, params, gen)  # (a,), (a,)
            done = torch.isin(tok, self.stop_ids)  # (a,)
            for r, t, p, d in zip(
                rows.tolist(), tok.tolist(), lp.tolist(), done.tolist(), strict=True
            ):
                tokens[r].append(t)
                logps[r].append(p)
                stopped[r] = d
            if step == params.max_tokens - 1:
                break
            if bool(done.any()):
                keep = (~done).nonzero().squeeze(-1)  # (a',)
                if keep.numel() == 0:
                    break
                # Finished rows leave the batch: later steps only pay for live sequences.
                cache.batch_select_indices(keep)
                rows, tok, attn, next_pos = rows[keep], tok[keep], attn[keep], next_pos[keep]
            attn = torch.cat([attn, attn.new_ones((attn.shape[0], 1))], dim=-1)
            out = self.model(
                input_ids=tok.unsqueeze(-1),
                attention_mask=attn,
                position_ids=next_pos.unsqueeze(-1),
                use_cache=True,
                **{self._cache_kwarg: cache},
            )
            logits = out.logits[:, -1]
            next_pos = next_pos + 1
        return [
            Completion(tokens[r], logps[r], "stop" if stopped[r] else "length") for r in range(n)
        ]


def _decode_cache(config: Any, reserve: int) -> Any:
    """A ``DynamicCache`` whose layers append in place into reserved room (``ReservedLayer``)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=config)
    reserved = _reserved_layer_class()
    # Only plain full-attention layers are swapped; anything else keeps transformers' own layer.
    cache.layers = [
        reserved(reserve) if type(layer) is DynamicLayer else layer for layer in cache.layers
    ]
    return cache


@functools.cache
def _reserved_layer_class() -> type:
    """The ``DynamicLayer`` subclass, built on first use (transformers is imported lazily)."""
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        """KV layer that preallocates room for ``reserve`` more tokens after the prompt.

        transformers' ``DynamicLayer`` appends with ``torch.cat``, re-copying the whole cache at
        every decode step; with ~700-token prompts that copy is a large share of a step on the
        CPU (measured ~15% of generation time at 600-token prompts). Here a step writes one
        column in place and the layer exposes views of the filled part.
        """

        def __init__(self, reserve: int) -> None:
            super().__init__()
            self.reserve = reserve
            self.length = 0

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                b, h, t, d = key_states.shape
                self._k = key_states.new_empty((b, h, t + self.reserve, d))
                self._v = value_states.new_empty((b, h, t + self.reserve, d))
            end = self.length + key_states.shape[-2]
            if end > self._k.shape[-2]:  # more tokens than reserved: grow by doubling
                grow = max(end, 2 * self._k.shape[-2]) - self._k.shape[-2]
                pad = self._k.new_empty((*self._k.shape[:2], grow, self._k.shape[-1]))
                self._k = torch.cat([self._k, pad], dim=-2)
                self._v = torch.cat([self._v, pad.clone()], dim=-2)
            self._k[:, :, self.length : end] = key_states
            self._v[:, :, self.length : end] = value_states
            self.length = end
            self.keys, self.values = self._k[:, :, :end], self._v[:, :, :end]
            return self.keys, self.values

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            if self.is_initialized:
                self._k, self._v = self._k[indices], self._v[indices]
                self.keys = self._k[:, :, : self.length]
                self.values = self._v[:, :, : self.length]

    return ReservedLayer


def _sample(
    logits: torch.Tensor, params: SamplingParams, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the next token of each row and its log-prob under the sampling distribution.

    Args:
        logits: ``(a, V)`` raw logits of the last position.
        params: Sampling settings.
        gen: Generator on the logits' device.

    Returns:
        ``(tokens (a,), logprobs (a,))``.
    """
    logits = logits.float()
    if params.is_greedy:
        tok = logits.argmax(dim=-1)  # (a,)
        logp = logits.log_softmax(dim=-1)  # (a, V) at temperature 1
    else:
        scaled = top_p_filter(logits / params.temperature, params.top_p)  # (a, V)
        logp = scaled.log_softmax(dim=-1)
        tok = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(-1)  # (a,)
    return tok, logp.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
