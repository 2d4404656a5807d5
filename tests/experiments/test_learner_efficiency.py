"""The learner's work per trained token (benchmarks/bench_learner_efficiency.py's measures):
FLOPs against one forward + backward, padding at the paper batch shape."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchmark_scripts import load  # noqa: E402


@pytest.fixture(scope="module")
def bench():
    return load("bench_learner_efficiency")  # it imports its sibling bench_learner


def test_learner_flops_per_token_stay_within_1_2x_of_one_forward_and_backward(bench):
    """K=4 groups, one mini-batch: no separate scoring pass, each prompt once, the LM head in
    vocabulary blocks, every sample re-scored after the update (the old learner: 1.02x here).
    Gradient checkpointing (the paper presets) replays each layer, one more forward: with each
    group packed into one row it stays under 1.2x too (prompts not shared: 1.56x)."""
    from mas_trainer.learner import Learner
    from mas_trainer.models import build_tiny_model

    torch.set_num_threads(1)
    samples = bench.make_samples(16, 64, 48, seed=0, group_size=4)
    tokens = sum(s.num_tokens for s in samples)
    model, tok = build_tiny_model("tiny", seed=0)
    floor = bench.floor_flops(model, samples) / tokens
    ratios = {}
    for checkpointing in (False, True):
        m, _ = build_tiny_model("tiny", seed=0)
        learner = Learner(
            m, lr=1e-6, mini_batch_size=16, micro_batch_size=4, pad_token_id=tok.pad_token_id,
            gradient_checkpointing=checkpointing,
        )  # fmt: skip
        ratios[checkpointing] = bench.count_flops(lambda lr=learner: lr.update(samples)) / tokens
    assert ratios[False] / floor < 1.2
    assert ratios[True] / floor < 1.2


def test_padding_stays_under_a_tenth_at_the_paper_batch_shape(bench):
    """Mini-batch 64 (16 prompts x K 4), micro-batch 4, gradient checkpointing (the paper
    presets), lengths uniform in [max/2, max] up to 1024 prompt and 4096 completion tokens: the
    old order (by prompt, a group's K completions together) padded 14.7% of the slots."""
    from mas_trainer.learner import Learner
    from mas_trainer.models import build_tiny_model

    model, _ = build_tiny_model("tiny", seed=0)
    learner = Learner(
        model, lr=1e-6, mini_batch_size=64, micro_batch_size=4, pad_token_id=0,
        gradient_checkpointing=True,
    )  # fmt: skip
    for seed in range(3):
        batch = bench.make_samples(64, 1024, 4096, seed=seed, group_size=4)
        assert bench.padding_share(learner, batch) < 0.10


def test_fake_tensor_flops_extrapolate_per_layer_and_fall_with_fewer_checkpointed_layers(bench):
    """Part 5 counts the paper shape on fake tensors at 1 and 2 layers and extrapolates: exact
    against a whole count; fewer checkpointed layers, fewer FLOPs in the PPO pass only."""
    from mas_trainer.plan import ModelShape

    shape = ModelShape(hidden=64, layers=3, heads=4, kv_heads=2, head_dim=16, intermediate=128,
                       vocab=512, tied=True)  # fmt: skip
    batch = bench.make_samples(8, 24, 16, seed=0, group_size=4)
    whole = bench.shape_flops(shape, batch, 4, 2, 1)
    assert bench.extrapolated_flops(shape, batch, 4, 2) == pytest.approx(whole, rel=1e-9)
    everything = bench.extrapolated_flops(shape, batch, 4, 3)
    assert whole["train"] < everything["train"]
    assert whole["score"] == everything["score"] and whole["floor"] == everything["floor"]
    assert whole["score"] > 0 and whole["floor"] > 0
