"""FSDP2 learners on the CPU (gloo): two sharded ranks against one unsharded learner.

One ``torch.multiprocessing`` spawn of 2 ranks runs, on the tiny model (tied embeddings, as
Qwen3-1.7B): the Ray learner actor's load (rank 0 loads the weights, rank 1 builds the model on
the meta device and receives its shards), an fp32 update, a save / resume of the sharded state,
and a bf16 mixed-precision update (FSDP2's ``MixedPrecisionPolicy``); rank 0 writes the gathered
results, and the tests compare them with a :class:`~mas_trainer.learner.Learner` in this process
on all the samples.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

LR = 1e-2  # one AdamW step moves every weight by ~LR (m / sqrt(v) = +-1 on the first step)


def _samples(tok, flip: bool = False):
    from mas_trainer.models import chat_prompt_ids
    from mas_trainer.samples import TrainSample

    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(8):
        prompt = chat_prompt_ids(tok, [{"role": "user", "content": f"task {i} " + "x" * (3 * i)}])
        completion = torch.randint(0, 256, (3 + i % 4,), generator=gen).tolist()
        sign = (-1.0) ** (i + flip)
        out.append(TrainSample(prompt, completion, [-5.5] * len(completion), 0.0, sign))
    return out


def _sft_samples(tok):
    """Two roles, unevenly split over 2 contiguous shards (rank 0: 3 planner + 1 tool samples;
    rank 1: 1 + 3), with completions of 3-6 tokens."""
    roles = ["planner", "planner", "planner", "tool", "planner", "tool", "tool", "tool"]
    return [dataclasses.replace(s, role=r) for s, r in zip(_samples(tok), roles, strict=True)]


def _kwargs(tok, dtype=None):
    return dict(lr=LR, mini_batch_size=8, micro_batch_size=2, pad_token_id=tok.pad_token_id,
                dtype=dtype)  # fmt: skip


def _materialised(model) -> int:
    """Bytes of ``model``'s parameters and buffers that hold memory (not on the meta device)."""
    return sum(t.nbytes for t in [*model.parameters(), *model.buffers()] if not t.is_meta)


def _rank(rank: int, world: int, folder: str, master: str) -> None:
    """One rank: the actor's load and an update, an fp32 update + save/resume of a learner
    loaded whole on every rank, then a bf16 update; rank 0 saves what it saw."""
    from unittest import mock

    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from mas_trainer.config import ModelConfig
    from mas_trainer.distributed.actors import LearnerActorBody
    from mas_trainer.distributed.handles import shard_samples
    from mas_trainer.distributed.learners import FSDPLearner
    from mas_trainer.models import build_tiny_model

    torch.set_num_threads(1)
    # The Ray learner actor's load, outside Ray, of a model folder (as an 8B run's, or a resumed
    # checkpoint's): rank 0 loads the whole model, rank 1 builds it from the folder's config on
    # the meta device; init_group joins the group, make_learner shards and sends the weights.
    body = LearnerActorBody(ModelConfig(), 0, f"{folder}/model", 1, rank, world, master, "fsdp")
    loaded = _materialised(body.model)
    body.init_group()
    body.make_learner(_kwargs(body.tokenizer))
    out = {}
    every: list = [None] * world
    sharded_bytes = sum(p.to_local().nbytes for p in body.model.parameters())
    nonpersistent = set(dict(body.model.named_buffers())) - set(body.model.state_dict())
    buffers = {n: t.clone() for n, t in body.model.named_buffers() if n in nonpersistent}
    dist.all_gather_object(every, (loaded, sharded_bytes, buffers))
    out["actor_load"] = every
    out["actor_weights"] = body.learner.full_weights()

    def learner(dtype=None):
        model, tok = build_tiny_model("tiny", seed=0)
        ranked = FSDPLearner(model, **_kwargs(tok, dtype))
        return ranked, tok

    def step(ranked, tok, flip=False):
        # Uneven shards (the prompts differ in length): ranks run different micro-batch counts.
        shards, steps = shard_samples(_samples(tok, flip)[: 7 if flip else 8], world, 8)
        ranked.dp_steps = steps
        return ranked.update(shards[rank])

    out["actor_metrics"] = step(body.learner, body.tokenizer)
    out["actor_stepped"] = body.learner.full_weights()
    a, tok = learner()  # the model whole on every rank before sharding
    out["fp32_metrics"] = step(a, tok)
    out["fp32_weights"] = a.full_weights()
    # Each rank writes its own shards, gathering none (the old checkpoint gathered every weight
    # and moment whole on every rank).
    with mock.patch.object(DTensor, "full_tensor", autospec=True, side_effect=DTensor.full_tensor):
        a.save(f"{folder}/ckpt")
        out["save_gathers"] = DTensor.full_tensor.call_count
    out["local_bytes"] = [
        sum(t.to_local().nbytes if hasattr(t, "to_local") else t.nbytes for t in group)
        for group in (list(a._params.values()), list(_moments(a)))
    ]
    step(a, tok, flip=True)
    out["continued"] = a.full_weights()
    b, _ = learner()  # a fresh sharded learner resumes from the saved shards
    b.load(f"{folder}/ckpt")
    step(b, tok, flip=True)
    out["resumed"] = b.full_weights()
    d, _ = learner()  # a warm-start step: each role's token mean over the whole group's batch
    shards, d.dp_steps = shard_samples(_sft_samples(tok), world, 8)
    out["sft_metrics"] = d.sft_update(shards[rank])
    out["sft_weights"] = d.full_weights()
    c, _ = learner(torch.bfloat16)
    out["bf16_metrics"] = step(c, tok)
    out["bf16_weights"] = c.full_weights()
    out["bf16_engine"] = c.full_weights(torch.bfloat16)
    dist.barrier()
    if rank == 0:
        torch.save(out, f"{folder}/out.pt")
    dist.destroy_process_group()


def _moments(learner):
    return [v for entry in learner.optimizer.state.values() for v in entry.values() if v.dim()]


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    import torch.multiprocessing as mp

    from mas_trainer.distributed.build import free_port
    from mas_trainer.models import build_tiny_model

    folder = str(tmp_path_factory.mktemp("fsdp"))
    for part in build_tiny_model("tiny", seed=0):  # the model and its tokenizer
        part.save_pretrained(f"{folder}/model")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_rank, args=(2, folder, f"127.0.0.1:{free_port()}"), nprocs=2)
    out = torch.load(f"{folder}/out.pt", weights_only=False)
    out["checkpoint"] = f"{folder}/ckpt"
    return out


def _unsharded(dtype=None, samples_flip=None):
    from mas_trainer.learner import Learner
    from mas_trainer.models import build_tiny_model

    model, tok = build_tiny_model("tiny", seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    learner = Learner(model, **_kwargs(tok, dtype))
    metrics = learner.update(_samples(tok))
    return learner, model, tok, before, metrics


def _compare(sharded_weights, model, before):
    """(max |sharded - unsharded|, share of elements whose steps differ) over all tensors."""
    worst, flipped, total, moved = 0.0, 0, 0, 0
    for name, p in model.state_dict().items():
        moved += int(((p - before[name]).abs() > 0.5 * LR).sum())
        off = (sharded_weights[name] - p).abs()
        worst = max(worst, float(off.max()))
        flipped += int((off > 0.5 * LR).sum())
        total += off.numel()
    assert moved > 0.9 * total  # the step moved (almost) every weight by ~LR: a real comparison
    return worst, flipped / total


def test_fp32_sharded_update_equals_the_unsharded_one(sharded):
    _, model, _, before, metrics = _unsharded()
    got = sharded["fp32_metrics"]
    assert got["optim/grad_norm"] == pytest.approx(metrics["optim/grad_norm"], rel=1e-5)
    worst, flipped = _compare(sharded["fp32_weights"], model, before)
    # AdamW's first step is LR * sign(grad): only a gradient entry within rounding of 0 can
    # take the other sign under another summation order (measured here: none of 525,440; max
    # |diff| 4.7e-5, grad norms equal to 6e-7).
    assert flipped < 1e-3 and worst <= 2.0 * LR + 1e-6
    same = sum(
        int(((sharded["fp32_weights"][n] - p).abs() < 1e-6).sum())
        for n, p in model.named_parameters()
    )
    assert same > 0.999 * sum(p.numel() for p in model.parameters())


def test_only_rank_0_loads_the_model_and_the_others_receive_their_shards(sharded):
    """The learner actor of an FSDP rank other than 0 holds no weight before sharding (its model
    is on the meta device) and its shards after; the shards, the non-persistent buffers (RoPE's
    ``inv_freq``, in no state dict) and the first update are bit for bit those of ranks that each
    loaded the whole model (the old load, which held the whole fp32 model in every rank's host
    memory: rank 1 had 2.1 MB materialised here)."""
    from mas_trainer.models import build_tiny_model

    model, _ = build_tiny_model("tiny", seed=0)
    whole = _materialised(model)
    (loaded0, shards0, buffers0), (loaded1, shards1, buffers1) = sharded["actor_load"]
    assert loaded0 == whole and loaded1 == 0
    params = sum(p.nbytes for p in model.parameters())
    assert shards0 + shards1 == params and max(shards0, shards1) < 0.6 * params
    reference = dict(model.named_buffers())
    names = {"model.rotary_emb.inv_freq", "model.rotary_emb.original_inv_freq"}
    assert set(buffers0) == set(buffers1) == names
    for name in names:
        assert torch.equal(buffers0[name], reference[name]), name
        assert torch.equal(buffers1[name], reference[name]), name
    for name, t in model.state_dict().items():
        assert torch.equal(sharded["actor_weights"][name], t), name

    # The first update, against the learner whose ranks each loaded the whole model.
    def steps(metrics):  # all but the timings
        return {k: v for k, v in metrics.items() if not k.startswith("perf/")}

    assert steps(sharded["actor_metrics"]) == steps(sharded["fp32_metrics"])
    for name, t in sharded["fp32_weights"].items():
        assert torch.equal(sharded["actor_stepped"][name], t), name


def test_sharded_supervised_step_weighs_roles_over_the_whole_group(sharded):
    """The warm start on 2 ranks is the single learner's step: each role's token mean over all
    ranks' samples (ranks that normalised by their own roles' tokens stepped on another gradient:
    grad norm 5.700 vs the single learner's 5.318)."""
    from mas_trainer.learner import Learner
    from mas_trainer.models import build_tiny_model

    model, tok = build_tiny_model("tiny", seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    metrics = Learner(model, **_kwargs(tok)).sft_update(_sft_samples(tok))
    got = sharded["sft_metrics"]
    assert got["optim/grad_norm"] == pytest.approx(metrics["optim/grad_norm"], rel=1e-5)
    for key in ("loss/sft", "loss/sft/planner", "loss/sft/tool"):
        assert got[key] == pytest.approx(metrics[key], rel=1e-6), key
    worst, flipped = _compare(sharded["sft_weights"], model, before)
    assert flipped < 1e-3 and worst <= 2.0 * LR + 1e-6


def test_bf16_mixed_precision_update_matches_autocast_within_bf16_noise(sharded):
    # FSDP2's MixedPrecisionPolicy computes the whole forward in bf16 (norms included); the
    # unsharded learner autocasts fp32 masters (norms in fp32). Both keep fp32 masters.
    _, model, _, before, metrics = _unsharded(torch.bfloat16)
    got = sharded["bf16_metrics"]
    assert got["optim/grad_norm"] == pytest.approx(metrics["optim/grad_norm"], rel=2e-2)
    assert all(v.dtype == torch.float32 for v in sharded["bf16_weights"].values())
    assert all(v.dtype == torch.bfloat16 for v in sharded["bf16_engine"].values())
    worst, flipped = _compare(sharded["bf16_weights"], model, before)
    # Sign flips of gradient entries below bf16's noise (measured: 0.43% of the entries); every
    # other step is the same.
    assert flipped < 0.03 and worst <= 2.0 * LR + 1e-6


def test_sharded_resume_continues_bit_for_bit(sharded):
    resumed, continued = sharded["resumed"], sharded["continued"]
    assert set(resumed) == set(continued)
    for name in continued:
        assert torch.equal(resumed[name], continued[name]), name


def test_sharded_checkpoint_loads_into_an_unsharded_learner(sharded):
    from mas_trainer.learner import Learner
    from mas_trainer.models import build_tiny_model

    model, tok = build_tiny_model("tiny", seed=0)
    learner = Learner(model, **_kwargs(tok))
    learner.load(sharded["checkpoint"])  # resharded: the two ranks' shards into whole tensors
    for name, p in model.named_parameters():
        assert torch.equal(p, sharded["fp32_weights"][name]), name
    learner.update(_samples(tok, flip=True)[:7])
    worst, _ = max(
        ((sharded["continued"][n] - p).abs().max().item(), n) for n, p in model.named_parameters()
    )
    # The same second step up to rounding, which AdamW amplifies where m / sqrt(v) is near 0/0
    # (measured max |diff| 1.4e-3 = 0.14 LR).
    assert worst < 0.3 * LR


def test_each_rank_writes_only_its_own_shard(sharded):
    """The checkpoint is written by the ranks, each its own shards (the old format gathered every
    weight and moment whole on every rank, and the driver wrote them)."""
    from pathlib import Path

    files = {p.name: p.stat().st_size for p in Path(sharded["checkpoint"]).glob("*.distcp")}
    assert sorted(files) == ["__0_0.distcp", "__1_0.distcp"]
    whole = {id(t): t for t in sharded["fp32_weights"].values()}  # tied embeddings: once
    total = sum(t.nbytes for t in whole.values())  # the whole model, fp32
    # weights + 2 AdamW moments on this rank: about a half of the whole state
    local_params, local_moments = sharded["local_bytes"]
    assert local_moments == 2 * local_params and local_params < 0.6 * total
    for size in files.values():  # each file holds about one rank's shards, not the whole state
        assert 0.3 * (3 * total) < size < 0.7 * (3 * total)
    assert sharded["save_gathers"] == 0  # no whole tensor was gathered to write them
