"""Models and tokenizers: tiny Qwen3 models built in code, and loading from a path or hub id.

The dev and CI machines reach no model hub, so the project builds its own tiny models: a Qwen3
config (``Qwen3ForCausalLM``) with random weights and tied embeddings, and a byte-level tokenizer
(256 byte tokens plus the Qwen specials ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``) with a
Qwen-style chat template. Both are ordinary Hugging Face objects: ``save_pretrained`` writes a
folder that ``AutoTokenizer`` / ``AutoModelForCausalLM.from_pretrained`` (and vLLM) load back.

Presets (``build_tiny_model(preset)`` or ``load_model("tiny:<preset>")``):

- ``"tiny"``: ~0.5M parameters (hidden 128, 2 layers); learns Plan-Path's answer format on a CPU in
  minutes.
- ``"tiny-bpe"``: ``"tiny"``'s shape on the ``planpath-bpe`` tokenizer (687 tokens, trained in
  code on Plan-Path's texts: :func:`build_corpus_tokenizer`); the default run's model.
- ``"small"``: ~10M parameters (hidden 256, 10 layers).
- ``"qwen3-1.7b-shape"``: Qwen3-1.7B's exact shape (hidden 2048, 28 layers, vocab 151936) with
  random weights, to measure GPU speed without a download. Its vocabulary is larger than the byte
  tokenizer's 259 tokens (as with real Qwen checkpoints); ids past 258 decode to nothing.

The chat template has no ``<think>`` block (Qwen3 with thinking off writes an empty one; a byte
model would pay 17 prompt tokens per call for it). Runs encode prompts with
:func:`mas_trainer.rollout.encode_prompt` (which passes the thinking switch);
:func:`chat_prompt_ids` encodes a plain message list.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mas_envs.optional import require

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, PreTrainedTokenizerFast

#: Special tokens, in id order after the 256 byte tokens (ids 256, 257, 258).
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

#: Qwen-style ChatML template: one ``<|im_start|>role\n...<|im_end|>\n`` block per message.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@dataclass(frozen=True)
class TinyPreset:
    """Shape of a Qwen3 model built in code (see the module docstring for the named presets)."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int | None = None  # None: exactly the tokenizer's vocabulary
    max_position_embeddings: int = 4096
    tokenizer: str = "byte"
    """``"byte"`` (:func:`build_byte_tokenizer`) or a name of :data:`CORPUS_TOKENIZERS`
    (:func:`build_corpus_tokenizer`)."""


PRESETS: dict[str, TinyPreset] = {
    "tiny": TinyPreset(128, 2, 4, 2, 512),
    "tiny-bpe": TinyPreset(128, 2, 4, 2, 512, tokenizer="planpath-bpe"),
    "small": TinyPreset(256, 10, 8, 4, 1024),
    "qwen3-1.7b-shape": TinyPreset(2048, 28, 16, 8, 6144, 151936, 40960),
}


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map, the alphabet of byte-level BPE tokenizers.

    Using the standard map (rather than raw bytes) keeps the tokenizer loadable by every consumer
    of ``tokenizer.json`` (transformers, tokenizers, vLLM).
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def _chat_tokenizer(backend: Any) -> PreTrainedTokenizerFast:
    """A ``tokenizers.Tokenizer`` with the specials and the chat template, as transformers'."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        padding_side="left",
    )


def build_byte_tokenizer() -> PreTrainedTokenizerBase:
    """Build the byte-level tokenizer with the Qwen-style chat template.

    Token ids 0..255 are the bytes (id == byte value), 256 ``<|endoftext|>`` (pad), 257
    ``<|im_start|>``, 258 ``<|im_end|>`` (eos). Padding is on the left (generation pads prompts).

    Returns:
        A ``PreTrainedTokenizerFast`` that round-trips through ``save_pretrained`` and
        ``AutoTokenizer.from_pretrained``.
    """
    require("transformers", purpose="mas_trainer's models")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {ch: b for b, ch in _bytes_to_unicode().items()}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    # No regex split and no prefix space: the text maps byte for byte onto ids.
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return _chat_tokenizer(backend)


#: The pieces :func:`build_bpe_tokenizer` isolates before BPE: the answer marker ``####``, a
#: lone grid cell ``.`` or ``#``, and a move (``U``, ``D``, ``L``, ``R`` not touching a letter,
#: digit or ``_``) with the ``", "``, ``","`` or ``" "`` before it.
PIECES = r"(?<![.#])####(?![.#])|[.#]|(?:, ?| )?(?<![A-Za-z0-9_])[UDLR](?![A-Za-z0-9_])"


def build_bpe_tokenizer(
    texts: Iterable[str], *, vocab_size: int, max_token_length: int = 16
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on ``texts``, with the byte tokenizer's chat template.

    Every byte stays a token (the 256-symbol alphabet of :func:`build_byte_tokenizer`), so any text
    encodes; merges of at most ``max_token_length`` characters are learnt from ``texts``. The grid
    characters ``.`` and ``#`` never merge (a cell of a game board stays one token), except in
    ``####``, the games' answer marker, when no other grid character touches it. A move of a move
    list (``U``, ``D``, ``L`` or ``R`` standing alone, with the ``", "`` or ``" "`` before it) is a
    piece of its own, so merges never span two moves: ``#### U, R, R`` is ``####``, `` U``,
    ``, R``, ``, R``, a handful of move tokens that every move list shares (copying a printed path
    is one copy over those, not one per move list).
    Deterministic: the same texts give the same tokenizer. The specials are ids 0-2
    (``<|endoftext|>`` pad, ``<|im_start|>``, ``<|im_end|>`` eos).

    Args:
        texts: The training corpus.
        vocab_size: Tokens in all (specials and the 256 bytes included).
        max_token_length: Longest merged token, in characters.
    """
    require("transformers", purpose="mas_trainer's models")
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 259 + 1:
        raise ValueError(f"vocab_size must exceed the 259 bytes and specials, got {vocab_size}")
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            # "####" (the answer marker) is one piece; any other "." or "#" (grid cells) stands
            # alone, so merges never span two cells of a board; and each move of a move list
            # (a lone U/D/L/R with its ", " or " " before it) is a piece, so merges never span
            # two moves.
            pre_tokenizers.Split(Regex(PIECES), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=list(_bytes_to_unicode().values()),
        special_tokens=list(SPECIAL_TOKENS),
        max_token_length=max_token_length,
        show_progress=False,
    )
    backend.train_from_iterator(list(texts), trainer)
    return _chat_tokenizer(backend)


CORPUS_TOKENIZERS: dict[str, tuple[str, int]] = {
    "planpath-bpe": ("mas_envs.planpath.corpus", 1024),
}
"""Tokenizers trained in code on an env family's own texts: name -> (the module whose
``tokenizer_corpus()`` returns the texts, most tokens). The BPE trainer stops earlier, when every
piece of the corpus is one token: ``planpath-bpe`` has 687 (256 bytes, 3 specials, 428 merges)."""


@functools.cache
def _corpus_tokenizer_json(name: str) -> str:
    import importlib

    module, vocab_size = CORPUS_TOKENIZERS[name]
    texts = importlib.import_module(module).tokenizer_corpus()
    return build_bpe_tokenizer(texts, vocab_size=vocab_size).backend_tokenizer.to_str()


def build_corpus_tokenizer(name: str) -> PreTrainedTokenizerFast:
    """A tokenizer of :data:`CORPUS_TOKENIZERS`: :func:`build_bpe_tokenizer` on its env family's
    corpus (built once per process, ~2 s for ``planpath-bpe``; no download).

    ``planpath-bpe`` (:func:`mas_envs.planpath.corpus.tokenizer_corpus`) makes the v1 oracle
    program 40 tokens instead of ~270 bytes and a 5x5 team prompt ~60-70 instead of ~360-590; a
    move list is one token per move (see :data:`PIECES`).

    Raises:
        ValueError: ``name`` is not one of :data:`CORPUS_TOKENIZERS`.
    """
    from tokenizers import Tokenizer

    if name not in CORPUS_TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name!r}; choose one of {sorted(CORPUS_TOKENIZERS)}")
    return _chat_tokenizer(Tokenizer.from_str(_corpus_tokenizer_json(name)))


def chat_prompt_ids(
    tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]]
) -> list[int]:
    """Token ids of a chat prompt ending with the assistant header (the engine's input).

    transformers 5 returns a ``BatchEncoding`` from ``apply_chat_template``; this returns the plain
    id list that engines and :class:`~mas_trainer.samples.TrainSample` use.
    """
    out: Any = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True
    )
    return [int(i) for i in out["input_ids"]]


def stop_token_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Ids that end a completion: ``<|im_end|>`` and ``<|endoftext|>`` (those the vocab has)."""
    ids = {tokenizer.eos_token_id}
    for tok in ("<|im_end|>", "<|endoftext|>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            ids.add(tid)
    return sorted(i for i in ids if i is not None)


def tiny_tokenizer(preset: str) -> PreTrainedTokenizerBase:
    """The tokenizer of a named preset (``TinyPreset.tokenizer``): the one
    :func:`build_tiny_model` pairs with the model, and what ``load_tokenizer("tiny:<preset>")``
    returns.

    Raises:
        ValueError: ``preset`` is not one of ``PRESETS``.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown tiny model preset {preset!r}; choose one of {sorted(PRESETS)}")
    if PRESETS[preset].tokenizer in CORPUS_TOKENIZERS:
        return build_corpus_tokenizer(PRESETS[preset].tokenizer)
    return build_byte_tokenizer()


def tiny_config(preset: str, tokenizer: PreTrainedTokenizerBase) -> Any:
    """The ``Qwen3Config`` of a named preset (tied embeddings, RoPE theta 1e6 as in Qwen3).

    Args:
        preset: One of ``PRESETS``.
        tokenizer: The preset's tokenizer (pad and eos ids; the vocabulary size unless the
            preset fixes one).
    """
    require("transformers", purpose="mas_trainer's models")
    from transformers import Qwen3Config

    if preset not in PRESETS:
        raise ValueError(f"unknown tiny model preset {preset!r}; choose one of {sorted(PRESETS)}")
    p = PRESETS[preset]
    return Qwen3Config(
        vocab_size=p.vocab_size or len(tokenizer),
        hidden_size=p.hidden_size,
        intermediate_size=p.intermediate_size,
        num_hidden_layers=p.num_hidden_layers,
        num_attention_heads=p.num_attention_heads,
        num_key_value_heads=p.num_key_value_heads,
        head_dim=p.hidden_size // p.num_attention_heads,
        max_position_embeddings=p.max_position_embeddings,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )


def build_tiny_model(
    preset: str = "tiny", seed: int = 0, dtype: torch.dtype | None = None, device: str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Build a randomly initialised Qwen3 causal LM and its preset's tokenizer, without a download.

    Args:
        preset: One of ``PRESETS`` (``"tiny"``, ``"small"``, ``"qwen3-1.7b-shape"``).
        seed: Seed of the weight initialisation; a private ``torch.Generator`` state is used, the
            global RNG state is restored afterwards.
        dtype: Parameter dtype (default float32).
        device: Where to build the weights (large presets initialise much faster on a GPU; the
            same seed gives different weights on different device types).

    Returns:
        ``(model, tokenizer)``; the model is in eval mode on ``device``.
    """
    require("transformers", purpose="mas_trainer's models")
    import torch
    from transformers import Qwen3ForCausalLM

    tokenizer = tiny_tokenizer(preset)
    config = tiny_config(preset, tokenizer)
    dev = torch.device(device)
    # Weight init draws from the global torch RNG; fork it so the caller's stream is untouched.
    fork = [dev.index or 0] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=fork), dev:
        torch.manual_seed(seed)
        model: Any = Qwen3ForCausalLM(config)
    if dtype is not None:
        model = model.to(dtype)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = stop_token_ids(tokenizer)
    model.eval()
    return model, tokenizer


def load_model(
    name_or_path: str, *, device: str = "cpu", dtype: torch.dtype | None = None, seed: int = 0
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer.

    Args:
        name_or_path: ``"tiny:<preset>"`` builds a model in code (see ``PRESETS``); an existing
            local folder is loaded with ``from_pretrained``; anything else is tried as a hub id
            (needs network access, which the dev machines lack).
        device: torch device string, e.g. ``"cpu"`` or ``"cuda"``; ``"meta"`` builds the model
            from its config with no weights at all (no memory, nothing read but the config): an
            FSDP rank that receives its shards from rank 0
            (:func:`~mas_trainer.distributed.learners.shard_model`).
        dtype: Parameter dtype (default float32).
        seed: Weight seed for ``tiny:`` models.

    Returns:
        ``(model, tokenizer)`` with the model in eval mode on ``device``.

    Raises:
        FileNotFoundError: ``name_or_path`` looks like a path but does not exist, or the hub is
            unreachable; the message names the ``tiny:`` alternative.
    """
    require("transformers", purpose="mas_trainer's models")
    import torch

    dtype = dtype or torch.float32
    if name_or_path.startswith("tiny:"):
        preset = name_or_path.removeprefix("tiny:")
        return build_tiny_model(preset, seed=seed, dtype=dtype, device=device)

    from transformers import AutoModelForCausalLM

    path = Path(name_or_path).expanduser()
    looks_local = (
        path.exists() or name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") > 1
    )
    hint = (
        f"use a folder written by save_pretrained, a hub id reachable from this machine, "
        f"or a model built in code: 'tiny:<preset>' with preset in {sorted(PRESETS)}"
    )
    if looks_local and not path.is_dir():
        raise FileNotFoundError(
            f"model path {str(path)!r} does not exist or is not a folder; {hint}"
        )
    source = str(path) if looks_local else name_or_path
    try:
        tokenizer = load_tokenizer(source)
        if device == "meta":
            from transformers import AutoConfig

            with torch.device("meta"):
                model: Any = AutoModelForCausalLM.from_config(
                    AutoConfig.from_pretrained(source), dtype=dtype
                )
        else:
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except OSError as e:
        raise FileNotFoundError(f"could not load model {name_or_path!r} ({e}); {hint}") from e
    model.to(device)
    model.eval()
    return model, tokenizer


def load_tokenizer(name_or_path: str) -> PreTrainedTokenizerBase:
    """The tokenizer of a model folder or hub id (``tiny:<preset>``: that preset's,
    :func:`tiny_tokenizer`), with a pad token (left-padded batched generation needs one; its
    positions are masked out anyway). It is the tokenizer :func:`load_model` returns with the
    model of the same name (the Ray driver builds its policies' tokenizers with it)."""
    if name_or_path.startswith("tiny:"):
        return tiny_tokenizer(name_or_path.removeprefix("tiny:"))
    require("transformers", purpose="mas_trainer's models")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def cache_argument(model: Any) -> str:
    """A model's KV-cache argument name: ``cache`` (transformers >= 5.24) or ``past_key_values``."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wraps
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def count_parameters(model: Any) -> int:
    """Number of distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())


#: Projection modules of Qwen-style decoders that LoRA adapts (attention and MLP).
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def add_lora_adapters(
    model: PreTrainedModel,
    names: list[str],
    *,
    r: int = 16,
    alpha: int = 32,
    dropout: float = 0.0,
    target_modules: tuple[str, ...] = LORA_TARGETS,
) -> Any:
    """Wrap ``model`` into a ``peft`` model with one LoRA adapter per name (``per_role_lora``).

    The base weights are frozen and shared; each adapter starts as a no-op (LoRA's B = 0), so every
    role starts from the base policy. Activate one with ``peft_model.set_adapter(name)``; pass
    ``adapter=name`` to :class:`~mas_trainer.learner.Learner` and
    :class:`~mas_trainer.engines.TransformersEngine`, which do that before each forward pass.

    Args:
        model: The base causal LM.
        names: Adapter names, usually the role names (at least one, no duplicates).
        r: LoRA rank (the reference system used 16).
        alpha: LoRA scaling numerator (the reference system used 32).
        dropout: LoRA dropout (0 keeps sampling and training numerically identical).
        target_modules: Module names to adapt.

    Returns:
        The ``peft.PeftModel``.
    """
    if not names or len(set(names)) != len(names):
        raise ValueError(f"add_lora_adapters needs distinct adapter names, got {names}")
    peft = require("peft", purpose="per_role_lora")
    LoraConfig, get_peft_model = peft.LoraConfig, peft.get_peft_model

    def config() -> Any:
        return LoraConfig(
            r=r,
            lora_alpha=alpha,
            lora_dropout=dropout,
            target_modules=list(target_modules),
            task_type="CAUSAL_LM",
        )

    peft_model = get_peft_model(model, config(), adapter_name=names[0])
    for name in names[1:]:
        peft_model.add_adapter(name, config())
    peft_model.set_adapter(names[0])
    return peft_model
