"""TransformersEngine: exact log-probs, greedy, stops, padding, seeds (engines/transformers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from mas_trainer.engines import SamplingParams  # noqa: E402
from mas_trainer.engines.transformers import TransformersEngine  # noqa: E402
from mas_trainer.learner import Learner  # noqa: E402
from mas_trainer.models import build_tiny_model, chat_prompt_ids  # noqa: E402
from mas_trainer.samples import TrainSample  # noqa: E402

IM_END = 258


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    # Tiny models on a shared 2-core machine run several times faster on one thread.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _prompts(tok, n: int) -> list[list[int]]:
    # Mixed lengths, so batches need left padding.
    return [chat_prompt_ids(tok, [{"role": "user", "content": "go " * (i % 7)}]) for i in range(n)]


@pytest.fixture(scope="module")
def stopper():
    """A tiny model taught (SFT) to answer ``n=k`` with ``ab`` * k then ``<|im_end|>``."""
    torch.set_num_threads(1)
    model, tok = build_tiny_model("tiny", seed=0)
    learner = Learner(model, lr=1e-2, mini_batch_size=8, pad_token_id=tok.pad_token_id)
    data = [
        TrainSample(
            chat_prompt_ids(tok, [{"role": "user", "content": f"n={k}"}]),
            [*b"ab" * k, IM_END],
            [],
            0.0,
        )
        for k in range(1, 5)
    ]

    def memorised() -> bool:  # teacher-forced argmax = every target token (no engine involved)
        with torch.no_grad():
            for d in data:
                ids = torch.tensor([d.prompt_ids + d.completion_ids])
                picked = model(ids).logits[0, len(d.prompt_ids) - 1 : -1].argmax(-1)
                if picked.tolist() != d.completion_ids:
                    return False
        return True

    # Train until the model has learnt the four answers (80 steps on some CPUs, more on others:
    # float rounding differs between CPU models), then the engine must reproduce them.
    for _ in range(20):
        for _ in range(20):
            learner.sft_update(data * 2)
        if memorised():
            return model, tok, data
    pytest.fail("the tiny model did not learn the four answers in 400 SFT steps")


def _learner_logprobs(model, tok, prompts, completions, params: SamplingParams):
    learner = Learner(
        model, temperature=params.temperature, top_p=params.top_p, pad_token_id=tok.pad_token_id
    )
    samples = [
        TrainSample(p, c.token_ids, c.logprobs, 0.0)
        for p, c in zip(prompts, completions, strict=True)
    ]
    return learner.logprobs(samples)


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=1.0, max_tokens=24),
        SamplingParams(temperature=0.7, top_p=0.9, max_tokens=24),
        SamplingParams(temperature=1.3, top_p=0.5, max_tokens=24),
    ],
    ids=["t1", "t0.7-p0.9", "t1.3-p0.5"],
)
def test_engine_logprobs_match_learner_recomputation(params: SamplingParams) -> None:
    model, tok = build_tiny_model("tiny", seed=1)
    prompts = _prompts(tok, 12)
    completions = TransformersEngine(model, tok, batch_size=5).generate(prompts, params, seed=0)
    recomputed = _learner_logprobs(model, tok, prompts, completions, params)
    for c, lp in zip(completions, recomputed, strict=True):
        assert len(c.logprobs) == len(c.token_ids) == len(lp)
        assert c.logprobs == pytest.approx(lp, abs=1e-4)
        assert all(x <= 0.0 for x in c.logprobs)


def test_greedy_is_deterministic_and_is_the_argmax() -> None:
    model, tok = build_tiny_model("tiny", seed=2)
    engine = TransformersEngine(model, tok)
    prompts = _prompts(tok, 4)
    params = SamplingParams(greedy=True, max_tokens=10)
    a = engine.generate(prompts, params)
    assert a == engine.generate(prompts, params)
    # Step-by-step argmax over full forward passes (no cache) gives the same tokens.
    ids = list(prompts[3])
    with torch.no_grad():
        for tok_id, lp in zip(a[3].token_ids, a[3].logprobs, strict=True):
            logits = model(torch.tensor([ids])).logits[0, -1]
            assert int(logits.argmax()) == tok_id
            assert logits.log_softmax(-1)[tok_id].item() == pytest.approx(lp, abs=1e-5)
            ids.append(tok_id)
    assert SamplingParams(temperature=0.0).is_greedy


def test_sampling_is_reproducible_per_seed() -> None:
    model, tok = build_tiny_model("tiny", seed=3)
    engine = TransformersEngine(model, tok)
    prompts = _prompts(tok, 6)
    params = SamplingParams(max_tokens=16)
    assert engine.generate(prompts, params, seed=7) == engine.generate(prompts, params, seed=7)
    assert engine.generate(prompts, params, seed=7) != engine.generate(prompts, params, seed=8)
    # Without a seed, the engine's own generator advances: two calls differ.
    assert engine.generate(prompts, params) != engine.generate(prompts, params)


def test_stops_at_im_end_and_respects_max_tokens(stopper) -> None:
    model, tok, data = stopper
    engine = TransformersEngine(model, tok)
    prompts = [d.prompt_ids for d in data]
    out = engine.generate(prompts, SamplingParams(greedy=True, max_tokens=12))
    # Rows stop after different lengths inside one batch.
    assert [c.token_ids for c in out] == [d.completion_ids for d in data]
    assert [c.finish_reason for c in out] == ["stop"] * 4
    short = engine.generate(prompts, SamplingParams(greedy=True, max_tokens=5))
    assert [len(c.token_ids) for c in short] == [3, 5, 5, 5]
    assert [c.finish_reason for c in short] == ["stop", "stop", "length", "length"]
    assert short[3].token_ids == data[3].completion_ids[:5]


def test_batch_with_left_padding_equals_one_by_one(stopper) -> None:
    model, tok, data = stopper
    prompts = [d.prompt_ids for d in data] + _prompts(tok, 5)
    params = SamplingParams(greedy=True, max_tokens=12)
    batched = TransformersEngine(model, tok, batch_size=64).generate(prompts, params)
    chunked = TransformersEngine(model, tok, batch_size=3).generate(prompts, params)
    single = [TransformersEngine(model, tok).generate([p], params)[0] for p in prompts]
    for b, c, s in zip(batched, chunked, single, strict=True):
        assert b.token_ids == c.token_ids == s.token_ids
        assert b.finish_reason == s.finish_reason
        assert b.logprobs == pytest.approx(s.logprobs, abs=1e-5)
        assert c.logprobs == pytest.approx(s.logprobs, abs=1e-5)


def test_load_weights_copies_and_rejects_unknown_names() -> None:
    model, tok = build_tiny_model("tiny", seed=4)
    other, _ = build_tiny_model("tiny", seed=5)
    engine = TransformersEngine(model, tok)
    prompts = _prompts(tok, 3)
    params = SamplingParams(greedy=True, max_tokens=8)
    expected = TransformersEngine(other, tok).generate(prompts, params)
    assert engine.generate(prompts, params) != expected
    engine.load_weights(other.state_dict())
    assert engine.generate(prompts, params) == expected
    engine.load_weights(model.state_dict())  # its own tensors: a no-op
    with pytest.raises(KeyError, match="no tensor 'nope'"):
        engine.load_weights({"nope": torch.zeros(1)})


def test_sampling_params_validation() -> None:
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1.0)
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    model, tok = build_tiny_model("tiny")
    with pytest.raises(ValueError, match="at least one token"):
        TransformersEngine(model, tok).generate([[]], SamplingParams())


def test_duplicate_prompts_are_prefilled_once_and_sampled_independently() -> None:
    model, tok = build_tiny_model("tiny", seed=6)
    p, q = _prompts(tok, 7)[5:7]
    prompts = [p] * 4 + [q] * 4
    shapes: list[tuple[int, ...]] = []
    hook = model.model.register_forward_pre_hook(
        lambda _m, _a, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    params = SamplingParams(max_tokens=16)
    try:
        out = TransformersEngine(model, tok).generate(prompts, params, seed=0)
    finally:
        hook.remove()
    assert shapes[0] == (2, max(len(p), len(q)))  # one prefill row per distinct prompt
    assert shapes[1][0] == 8  # then every copy decodes on its own
    assert len({tuple(c.token_ids) for c in out[:4]}) > 1
    recomputed = _learner_logprobs(model, tok, prompts, out, params)
    for c, lp in zip(out, recomputed, strict=True):
        assert c.logprobs == pytest.approx(lp, abs=1e-4)


def test_reserved_kv_layer_matches_transformers_dynamic_layer() -> None:
    from transformers.cache_utils import DynamicLayer

    from mas_trainer.engines.transformers import _reserved_layer_class

    ours, ref = _reserved_layer_class()(1), DynamicLayer()
    g = torch.Generator().manual_seed(0)

    def step(t: int) -> None:
        k, v = torch.randn(3, 2, t, 4, generator=g), torch.randn(3, 2, t, 4, generator=g)
        (ka, va), (kb, vb) = ours.update(k, v), ref.update(k, v)
        assert torch.equal(ka, kb) and torch.equal(va, vb)

    for t in (5, 1, 1, 2):  # prefill, two decode steps, then past the reserved room
        step(t)
    rows = torch.tensor([2, 0, 0])  # finished rows dropped / a prompt's cache shared
    ours.batch_select_indices(rows)
    ref.batch_select_indices(rows)
    assert ours.get_seq_length() == ref.get_seq_length() == 9
    step(1)
    step(3)


def test_generation_with_reserved_cache_equals_transformers_cache(monkeypatch) -> None:
    from transformers import DynamicCache

    import mas_trainer.engines.transformers as engines

    model, tok = build_tiny_model("tiny", seed=7)
    prompts = [p for p in _prompts(tok, 5) for _ in range(2)]
    params = SamplingParams(max_tokens=20)
    ours = TransformersEngine(model, tok).generate(prompts, params, seed=3)
    monkeypatch.setattr(
        engines, "_decode_cache", lambda config, reserve: DynamicCache(config=config)
    )
    assert TransformersEngine(model, tok).generate(prompts, params, seed=3) == ours
