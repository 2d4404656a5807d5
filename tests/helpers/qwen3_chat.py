"""A stand-in for Qwen3's tokenizer and model, built in code (no hub): the byte tokenizer with
Qwen3's ``<think>``/``</think>`` tokens and a chat template that honours ``enable_thinking`` the
way Qwen3's does, and a tiny Qwen3 model over that vocabulary, saved as a model folder.

The template keeps the parts of Qwen3's own (``tokenizer_config.json`` of Qwen/Qwen3-1.7B) that
decide a single-turn prompt: a first system message, user messages, assistant messages without
their reasoning, and the generation prompt, which with ``enable_thinking=false`` writes an empty
thinking block (the model then answers directly) and otherwise leaves the model to open one.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

QWEN3_CHAT_TEMPLATE = (
    "{%- if messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)

THINKING_OFF_SUFFIX = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
"""How a Qwen3 prompt ends with thinking off."""


BPE_VOCAB = 2048
"""Tokens of the BPE that :func:`qwen3_style_tokenizer` trains when given a corpus."""


def qwen3_style_tokenizer(
    extra_tokens: tuple[str, ...] = (), corpus: Iterable[str] | None = None
) -> Any:
    """The byte tokenizer with ``<think>``, ``</think>`` (and ``extra_tokens``) added and the
    Qwen3-style template; given ``corpus``, a byte-level BPE of :data:`BPE_VOCAB` tokens trained
    on it instead of the bare bytes (prompts like the corpus' texts are then several times fewer
    tokens, as with a real Qwen3 tokenizer)."""
    from mas_trainer.models import build_bpe_tokenizer, build_byte_tokenizer

    if corpus is None:
        tok = build_byte_tokenizer()
    else:
        tok = build_bpe_tokenizer(corpus, vocab_size=BPE_VOCAB)
    tok.add_tokens(["<think>", "</think>", *extra_tokens])
    tok.chat_template = QWEN3_CHAT_TEMPLATE
    return tok


def save_qwen3_style_model(
    folder: Path,
    seed: int = 0,
    extra_tokens: tuple[str, ...] = (),
    preset: str = "tiny",
    corpus: Iterable[str] | None = None,
) -> Path:
    """A tiny Qwen3 (random weights, tied embeddings) over :func:`qwen3_style_tokenizer`'s
    vocabulary (``extra_tokens``, ``corpus``), saved with its tokenizer: ``model.name`` for a run,
    as a Qwen3 folder would be."""
    import torch
    from transformers import Qwen3ForCausalLM

    from mas_trainer.models import stop_token_ids, tiny_config

    tok = qwen3_style_tokenizer(extra_tokens, corpus)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(tiny_config(preset, tok))
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = stop_token_ids(tok)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
