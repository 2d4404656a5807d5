"""Mixed precision: which AdamW updates a dtype can hold, the learner's refusal, fp32 masters with
bf16 compute, bf16 copies for the engine, and exact resume from the masters."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from mas_trainer.learner import Learner, update_resolution  # noqa: E402
from mas_trainer.models import build_tiny_model, chat_prompt_ids  # noqa: E402
from mas_trainer.samples import TrainSample  # noqa: E402


def _samples(tok, n=8):
    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        prompt = chat_prompt_ids(tok, [{"role": "user", "content": f"go {i}"}])
        completion = torch.randint(0, 256, (4,), generator=gen).tolist()
        out.append(TrainSample(prompt, completion, [-5.5] * 4, 0.0, (-1.0) ** i))
    return out


def _moved_share(before: dict, model) -> float:
    moved = sum(int((p != before[n]).sum()) for n, p in model.named_parameters())
    return moved / sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("lr", [1e-6, 1e-4, 1e-3])
def test_predicted_share_is_what_one_adamw_step_moves_in_bf16(lr):
    # The prediction is made from the weights alone; the measurement is a real AdamW step on
    # bf16 parameters with a gradient on every entry (AdamW's first step is lr * sign(grad)).
    model, _ = build_tiny_model("tiny", seed=0, dtype=torch.bfloat16)
    params = [p for p in model.parameters()]
    predicted, _ = update_resolution(params, lr)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    gen = torch.Generator().manual_seed(1)
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen).to(p.dtype)
    torch.optim.AdamW(params, lr=lr, weight_decay=0.01).step()
    measured = _moved_share(before, model)
    assert measured == pytest.approx(predicted, abs=0.01)


def test_bf16_parameters_at_a_paper_lr_are_refused_with_what_to_set():
    model, tok = build_tiny_model("tiny", seed=0, dtype=torch.bfloat16)
    share, needed = update_resolution(list(model.parameters()), 1e-6)
    assert share < 0.05 and 1e-5 < needed < 1e-2  # bf16 spacing ~ 2^-8 |w|
    with pytest.raises(ValueError) as err:
        Learner(model, lr=1e-6, pad_token_id=tok.pad_token_id)
    text = str(err.value)
    assert "--model.dtype float32 --model.autocast bfloat16" in text and "bfloat16" in text
    Learner(model, lr=10 * needed, pad_token_id=tok.pad_token_id)  # a resolvable rate is fine


def test_fp32_masters_with_bf16_compute_move_where_bf16_weights_would_not():
    model, tok = build_tiny_model("tiny", seed=0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    learner = Learner(model, lr=1e-6, dtype=torch.bfloat16, mini_batch_size=8,
                      pad_token_id=tok.pad_token_id)  # fmt: skip
    learner.update(_samples(tok))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert _moved_share(before, model) > 0.95  # the fp32 masters took the step...
    bf16_moved = sum(
        int((p.to(torch.bfloat16) != before[n].to(torch.bfloat16)).sum())
        for n, p in model.named_parameters()
    )
    # ...which bf16 weights could not have held: their bf16 roundings barely differ (measured:
    # 100% of the fp32 masters moved, 4.2% of their bf16 roundings; a bf16 learner: 1.9%).
    assert bf16_moved / sum(p.numel() for p in model.parameters()) < 0.1


def test_engine_gets_bf16_copies_at_sync_and_samples_at_the_learners_precision():
    from mas_trainer.engines import SamplingParams
    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.policy import Policy, sync_engines

    model, tok = build_tiny_model("tiny", seed=0)

    class OwnWeights:
        model = None

        def load_weights(self, state_dict):
            self.dtypes = {v.dtype for v in state_dict.values()}
            self.names = set(state_dict)

    engine = OwnWeights()
    policy = Policy("shared", model, engine, Learner(model, pad_token_id=tok.pad_token_id), tok)
    sync_engines({"shared": policy}, "bfloat16")
    assert engine.dtypes == {torch.bfloat16} and "lm_head.weight" in engine.names
    # A transformers engine sharing the fp32 model samples under bf16 autocast, as the learner
    # scores: its log-probs sit closer to the bf16 learner's than an fp32 engine's do.
    prompts = [s.prompt_ids for s in _samples(tok, 4)]
    params = SamplingParams(temperature=0.7, max_tokens=6)
    learner = Learner(model, lr=1e-6, dtype=torch.bfloat16, temperature=0.7,
                      pad_token_id=tok.pad_token_id)  # fmt: skip
    gaps = {}
    for name, autocast in (("fp32", None), ("bf16", torch.bfloat16)):
        comps = TransformersEngine(model, tok, autocast=autocast).generate(prompts, params, seed=3)
        rows = [
            TrainSample(p, c.token_ids, c.logprobs, 0.0)
            for p, c in zip(prompts, comps, strict=True)
        ]
        ours = learner.logprobs(rows)
        gaps[name] = max(
            abs(a - b)
            for s, lp in zip(rows, ours, strict=True)
            for a, b in zip(s.logprobs, lp, strict=True)
        )
    assert gaps["bf16"] < gaps["fp32"]


def test_a_per_policy_rate_too_small_for_bf16_is_refused_naming_its_policy():
    from mas_trainer.config import build_config
    from mas_trainer.policy import build_policies

    bf16 = ["--model.name", "tiny:tiny", "--model.dtype", "bfloat16", "--optim.lr", "1e-2"]
    ok = build_config("plan-path-tiny", overrides=[*bf16, "--algo.policy_map", "per_role"])
    assert set(build_policies(ok, ["planner", "tool"], None)) == {"planner", "tool"}
    slow = ["--optim.lr_by_policy", '{"planner": 1e-6}']
    cfg = build_config("plan-path-tiny", overrides=[*bf16, "--algo.policy_map", "per_role", *slow])
    with pytest.raises(ValueError, match=r"lr 1e-06 .*\(optim.lr_by_policy\['planner'\]\)"):
        build_policies(cfg, ["planner", "tool"], None)
