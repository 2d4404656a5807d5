"""Tiny models and the byte tokenizer built in code (mas_trainer/models.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from mas_trainer.models import (  # noqa: E402
    add_lora_adapters,
    build_bpe_tokenizer,
    build_byte_tokenizer,
    build_corpus_tokenizer,
    build_tiny_model,
    chat_prompt_ids,
    count_parameters,
    load_model,
    load_tokenizer,
    stop_token_ids,
    tiny_config,
)

MESSAGES = [{"role": "system", "content": "You plan."}, {"role": "user", "content": "Go ☃ now"}]


def test_byte_tokenizer_maps_text_to_utf8_bytes_and_back() -> None:
    tok = build_byte_tokenizer()
    text = "héllo ☃\n\t {x}  <b>"
    ids = tok.encode(text)
    assert ids == list(text.encode("utf-8"))
    assert tok.decode(ids) == text
    assert len(tok) == 259
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [
        256,
        257,
        258,
    ]
    assert (tok.pad_token_id, tok.eos_token_id) == (256, 258)
    assert stop_token_ids(tok) == [256, 258]


def test_planpath_bpe_tokenizer_is_short_deterministic_and_loses_nothing(tmp_path: Path) -> None:
    import mas_envs
    from mas_envs.planpath import prompts
    from mas_trainer import models

    tok = build_corpus_tokenizer("planpath-bpe")
    assert len(tok) <= models.CORPUS_TOKENIZERS["planpath-bpe"][1]
    assert (tok.pad_token_id, tok.eos_token_id) == (0, 2)
    assert stop_token_ids(tok) == [0, 2]
    models._corpus_tokenizer_json.cache_clear()  # built again from scratch: the same tokenizer
    assert build_corpus_tokenizer("planpath-bpe").get_vocab() == tok.get_vocab()
    # Programs and prompts are tens of tokens, not hundreds.
    program = prompts.oracle_program_v1()
    assert len(tok.encode(program)) < len(program) / 5
    env = mas_envs.make("mas/PlanPathCode-v1", rows=5, cols=5, split="test")
    env.reset(options={"task_id": env.task_ids("test")[0]})
    assert len(tok.encode(env.observe("tool")["prompt"])) < 100
    # A grid cell is one token; the answer marker too.
    assert [tok.decode([i]) for i in tok.encode("#.#\n##.#")] == list("#.#\n##.#")
    assert tok.convert_ids_to_tokens(tok.encode("#### U")[:1]) == ["####"]
    # Any text round-trips (every byte is a token), and so does the saved tokenizer.
    text = "héllo ☃\n\t {x}  <b> ####"
    assert tok.decode(tok.encode(text)) == text
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again.encode(program) == tok.encode(program)
    assert again.apply_chat_template(MESSAGES, tokenize=False) == tok.apply_chat_template(
        MESSAGES, tokenize=False
    )
    with pytest.raises(ValueError, match="vocab_size must exceed"):
        build_bpe_tokenizer(["ab"], vocab_size=100)


def test_planpath_bpe_tokenizer_gives_each_move_of_a_move_list_its_own_token() -> None:
    """The planner copies the path the tool's program printed: ``#### D, R, R`` on its prompt's
    last line, the same text as its answer. With one token per move (a set of 8 seen thousands of
    times) that is one copy rule; when BPE merged whole move lists (``' D, D, R, R'`` one token)
    it was one rule per move list, ~100 of them rare in the warm start's data."""
    from mas_envs.planpath.corpus import tokenizer_corpus

    tok = build_corpus_tokenizer("planpath-bpe")
    move_tokens = {f"{sep}{m}" for sep in (" ", ", ") for m in "UDLR"}
    # Texts the tokenizer was not trained on: other levels, the oracle's and random answers.
    texts = tokenizer_corpus(episodes=40, seed=7)
    lists = 0
    for text in texts:
        assert tok.decode(tok.encode(text)) == text
        last = text.rsplit("\n", 1)[-1]
        if not last.startswith("#### "):
            continue
        moves = last.removeprefix("#### ").split(", ")
        pieces = [tok.decode([i]) for i in tok.encode(last)]
        assert pieces == ["####", *(("" if i == 0 else ",") + " " + m for i, m in enumerate(moves))]
        assert set(pieces[1:]) <= move_tokens
        assert pieces == [tok.decode([i]) for i in tok.encode(text)][-len(pieces) :]  # in context
        lists += 1
    assert lists > 100  # planner prompts and answers
    # Code that prints a list, and moves touching other text, still round-trip.
    for text in ['print("#### L, D, U")', "####R,D", "#### UP", "U, R')", "Moves: L, R\n"]:
        assert tok.decode(tok.encode(text)) == text
    pieces = [tok.decode([i]) for i in tok.encode('print("#### L, D")')]
    assert pieces[pieces.index("####") + 1 :][:2] == [" L", ", D"]


def test_tiny_bpe_preset_uses_the_planpath_tokenizer() -> None:
    model, tok = build_tiny_model("tiny-bpe")
    assert len(tok) == model.config.vocab_size == 687
    assert 550_000 <= count_parameters(model) <= 700_000


@pytest.mark.parametrize("preset", ["tiny", "tiny-bpe"])
def test_load_tokenizer_is_the_tokenizer_load_model_pairs_with_the_model(preset: str) -> None:
    """The Ray driver tokenizes with ``load_tokenizer`` while its actors build the model with
    ``load_model``: for ``tiny-bpe`` it once returned the 259-token byte tokenizer next to a
    1024-token model."""
    model, tok = load_model(f"tiny:{preset}")
    alone = load_tokenizer(f"tiny:{preset}")
    assert alone.get_vocab() == tok.get_vocab()
    assert len(alone) == model.config.vocab_size
    assert chat_prompt_ids(alone, MESSAGES) == chat_prompt_ids(tok, MESSAGES)
    with pytest.raises(ValueError, match="unknown tiny model preset 'huge'"):
        load_tokenizer("tiny:huge")


def test_chat_template_is_qwen_style() -> None:
    tok = build_byte_tokenizer()
    text = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert text == (
        "<|im_start|>system\nYou plan.<|im_end|>\n"
        "<|im_start|>user\nGo ☃ now<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = chat_prompt_ids(tok, MESSAGES)
    assert ids[0] == 257 and ids[-len(b"assistant\n") - 1] == 257
    assert tok.decode(ids) == text


def test_tiny_presets_have_documented_sizes_and_tied_embeddings() -> None:
    model, tok = build_tiny_model("tiny")
    assert 400_000 <= count_parameters(model) <= 600_000
    assert model.config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert model.config.vocab_size == len(tok)
    assert type(model).__name__ == "Qwen3ForCausalLM"


@pytest.mark.parametrize(
    ("preset", "low", "high"), [("small", 9e6, 11e6), ("qwen3-1.7b-shape", 1.6e9, 2.1e9)]
)
def test_larger_presets_shapes(preset: str, low: float, high: float) -> None:
    from transformers import Qwen3ForCausalLM

    config = tiny_config(preset, build_byte_tokenizer())
    with torch.device("meta"):  # shapes only, no memory
        model = Qwen3ForCausalLM(config)
    assert low <= count_parameters(model) <= high


def test_seed_controls_weights_and_global_rng_is_untouched() -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    a, _ = build_tiny_model("tiny", seed=1)
    assert torch.equal(torch.rand(3), expected_next)
    b, _ = build_tiny_model("tiny", seed=1)
    c, _ = build_tiny_model("tiny", seed=2)
    w = "model.layers.0.mlp.up_proj.weight"
    assert torch.equal(a.state_dict()[w], b.state_dict()[w])
    assert not torch.equal(a.state_dict()[w], c.state_dict()[w])


def test_save_pretrained_round_trip_with_auto_classes(tmp_path: Path) -> None:
    model, tok = build_tiny_model("tiny", seed=3)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    tok2 = AutoTokenizer.from_pretrained(tmp_path)
    model2 = AutoModelForCausalLM.from_pretrained(tmp_path)
    ids = chat_prompt_ids(tok, MESSAGES)
    assert chat_prompt_ids(tok2, MESSAGES) == ids
    assert tok2.encode("a☃") == tok.encode("a☃")
    assert (tok2.pad_token_id, tok2.eos_token_id) == (256, 258)
    x = torch.tensor([ids])
    with torch.no_grad():
        assert torch.allclose(model(x).logits, model2(x).logits, atol=1e-6)
    # load_model goes through the same path and returns an eval-mode model.
    model3, tok3 = load_model(str(tmp_path))
    assert not model3.training and len(tok3) == 259
    # On the meta device: the same model (class, names, shapes, dtypes, tied embeddings), no
    # weight memory (an FSDP rank that receives its shards from rank 0).
    empty, _ = load_model(str(tmp_path), device="meta")
    assert type(empty) is type(model3) and not empty.training
    assert all(t.is_meta for t in [*empty.parameters(), *empty.buffers()])

    def shapes(model):
        tensors = [*model.state_dict().items(), *model.named_buffers()]
        return {n: (t.shape, t.dtype) for n, t in tensors}

    assert shapes(empty) == shapes(model3)
    assert empty.get_output_embeddings().weight is empty.get_input_embeddings().weight


def test_load_model_tiny_prefix_and_clear_errors(tmp_path: Path) -> None:
    model, tok = load_model("tiny:tiny", dtype=torch.bfloat16)
    assert next(model.parameters()).dtype == torch.bfloat16 and len(tok) == 259
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError, match="no-such-model") as err:
        load_model(str(missing))
    assert "tiny:" in str(err.value)
    with pytest.raises(ValueError, match="unknown tiny model preset 'huge'"):
        load_model("tiny:huge")


def test_lora_adapters_start_as_the_base_policy() -> None:
    model, tok = build_tiny_model("tiny")
    x = torch.tensor([chat_prompt_ids(tok, MESSAGES)])
    with torch.no_grad():
        base_logits = model(x).logits.clone()
    peft_model = add_lora_adapters(model, ["planner", "executor"], r=4, alpha=8)
    for name in ("planner", "executor"):
        peft_model.set_adapter(name)
        with torch.no_grad():
            assert torch.allclose(peft_model(x).logits, base_logits, atol=1e-6)
    trainable = {n for n, p in peft_model.named_parameters() if p.requires_grad}
    assert trainable and all(".executor." in n for n in trainable)
    with pytest.raises(ValueError, match="distinct"):
        add_lora_adapters(build_tiny_model("tiny")[0], ["a", "a"])


def test_an_unknown_corpus_tokenizer_is_refused_with_the_names() -> None:
    with pytest.raises(ValueError, match=r"unknown tokenizer 'planpath'.*planpath-bpe"):
        build_corpus_tokenizer("planpath")
