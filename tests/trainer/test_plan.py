"""``mas-train PRESET --plan``: the memory plan from torch's accounting on fake tensors, its refusal
of a run that does not fit, every paper preset fitting the GPUs it declares, and Ray's resources
checked before a placement group waits forever."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from mas_trainer.cli import train_main
from mas_trainer.config import PRESETS, build_config
from mas_trainer.plan import (
    GIB,
    ModelShape,
    check_cluster,
    checkpoint_bytes,
    learner_memory,
    plan_run,
    ray_request,
)

SMALL = ModelShape(hidden=128, layers=5, heads=4, kv_heads=2, head_dim=32, intermediate=512,
                   vocab=2048, tied=True)  # fmt: skip


def _close(a: int, b: int, rel: float = 0.02) -> bool:
    return abs(a - b) <= rel * max(a, b)


@pytest.mark.slow
def test_extrapolated_learner_peak_matches_a_full_track():
    """The plan tracks 1 and 2 layers and extrapolates; a whole 5-layer track agrees."""
    kw = dict(micro_batch=2, prompt=96, response=64, autocast="bfloat16", checkpointing=True)
    full = learner_memory(SMALL, layers=SMALL.layers, **kw)
    fast = learner_memory(SMALL, **kw)
    assert _close(fast.peak, full.peak), (fast, full)
    assert _close(fast.weights, full.weights) and _close(fast.optimizer, full.optimizer)
    # fp32 masters and two fp32 AdamW moments: torch's accounting of the parameters.
    assert _close(full.weights, 4 * SMALL.params, 0.01)
    assert _close(full.optimizer, 8 * SMALL.params, 0.01)
    # The logits grow with the micro-batch.
    bigger = learner_memory(SMALL, **{**kw, "micro_batch": 4})
    assert bigger.activations > fast.activations and bigger.peak > fast.peak


@pytest.mark.slow
def test_fewer_checkpointed_layers_hold_more_activations_and_extrapolate():
    """``checkpoint_layers``: the plan tracks a checkpointed and a plain layer apart; 1, 2 and 4
    of 5 layers checkpointed agree with a whole track, and fewer checkpointed layers hold more."""
    kw = dict(micro_batch=2, prompt=96, response=64, autocast="bfloat16", checkpointing=True)
    for layers in (1, 2, 4):
        full = learner_memory(SMALL, layers=SMALL.layers, checkpoint_layers=layers, **kw)
        fast = learner_memory(SMALL, checkpoint_layers=layers, **kw)
        assert _close(fast.peak, full.peak), (layers, fast, full)
    acts = [learner_memory(SMALL, checkpoint_layers=c, **kw).activations for c in (5, 2, 0)]
    assert acts[0] < acts[1] < acts[2]
    assert learner_memory(SMALL, checkpoint_layers=0, **kw) == learner_memory(
        SMALL, **{**kw, "checkpointing": False}
    )


@pytest.mark.slow
def test_selective_layers_hold_less_than_plain_ones_and_more_than_checkpointed_ones():
    """``checkpoint_mode selective``: the layers past ``checkpoint_layers`` keep their matmul and
    attention outputs only, tracked by torch's memory tracker: fewer bytes than plain layers,
    more than fully checkpointed ones; the extrapolation agrees with a whole track."""
    kw = dict(micro_batch=2, prompt=96, response=64, autocast="bfloat16", checkpointing=True)
    plain = learner_memory(SMALL, checkpoint_layers=0, **kw).activations
    everything = learner_memory(SMALL, **kw).activations
    selective = learner_memory(SMALL, checkpoint_layers=0, checkpoint_mode="selective", **kw)
    assert everything < selective.activations < plain
    whole = learner_memory(
        SMALL, layers=SMALL.layers, checkpoint_layers=2, checkpoint_mode="selective", **kw
    )
    fast = learner_memory(SMALL, checkpoint_layers=2, checkpoint_mode="selective", **kw)
    assert _close(fast.peak, whole.peak), (fast, whole)


@pytest.mark.slow
def test_prompts_run_once_are_tracked_and_extrapolate():
    """``prompts_once``: the step runs the learner's layout (a prompt pass held while the
    completions run on it); the extrapolation agrees with a whole track, and the prompts' pass,
    not run again per completion, changes what is held."""
    kw = dict(micro_batch=2, prompt=96, response=64, autocast="bfloat16", checkpointing=True)
    for layers, mode in ((2, "full"), (2, "selective")):
        extra = dict(checkpoint_layers=layers, checkpoint_mode=mode, prompts_once=True)
        whole = learner_memory(SMALL, layers=SMALL.layers, **kw, **extra)
        fast = learner_memory(SMALL, **kw, **extra)
        assert _close(fast.peak, whole.peak), (layers, mode, fast, whole)
    assert learner_memory(SMALL, prompts_once=True, **kw) != learner_memory(SMALL, **kw)


@pytest.mark.slow
def test_extrapolated_fsdp_peak_matches_a_full_track():
    kw = dict(micro_batch=2, prompt=96, response=64, autocast="bfloat16", checkpointing=True)
    full = learner_memory(SMALL, shards=2, layers=SMALL.layers, **kw)
    fast = learner_memory(SMALL, shards=2, **kw)
    assert _close(fast.peak, full.peak), (fast, full)
    unsharded = learner_memory(SMALL, **kw)
    assert _close(fast.optimizer, unsharded.optimizer / 2, 0.05)
    # Tracked steps are cached for the process, per rank count: 4 ranks after 2 (as the paper
    # presets' check plans them) hold half the moments per rank, not the 2-rank figures.
    four = learner_memory(SMALL, shards=4, **kw)
    assert _close(four.optimizer, fast.optimizer / 2, 0.05), (fast, four)


@pytest.mark.slow
def test_plan_prints_and_exits_zero_when_it_fits(capsys):
    assert train_main(["plan-path-tiny", "--plan", "--model.device", "cuda"]) == 0
    out = capsys.readouterr().out
    for item in ("learner master weights", "AdamW moments", "logits", "checkpoints on disk"):
        assert item in out
    assert "fits" in out


@pytest.mark.slow
def test_plan_refuses_a_run_that_does_not_fit_and_says_what_to_change(capsys):
    code = train_main(["plan-path-tiny", "--plan", "--model.device", "cuda", "--gpu-gib", "3"])
    out = capsys.readouterr().out
    assert code == 1
    assert "DOES NOT FIT" in out and "--optim.micro_batch_size" in out


def test_plan_rejects_a_bad_gpu_size(capsys):
    assert train_main(["plan-path-tiny", "--plan", "--gpu-gib", "-1"]) == 2
    assert "--gpu-gib" in capsys.readouterr().err


def test_cluster_check_names_what_was_asked_and_what_the_cluster_has():
    cfg = PRESETS["plan-path-qwen3-8b"]
    asked = ray_request(cfg, 2)
    assert asked["GPU"] == 8
    with pytest.raises(ValueError, match=r"asks Ray for .*8 GPU.*the cluster has .*0 GPU"):
        check_cluster(asked, {"CPU": 2.0})
    check_cluster(asked, {"CPU": 64.0, "GPU": 8.0})  # enough: no error


@pytest.mark.ray
def test_ray_run_without_the_gpus_it_asks_for_fails_at_once(tmp_path, capsys, monkeypatch):
    pytest.importorskip("ray")
    import importlib

    placement = importlib.import_module("ray.util.placement_group")  # the module, not ray.util's

    def waits_forever(*args, **kwargs):  # what Ray's placement group would do here
        raise AssertionError("a placement group the cluster cannot hold was requested")

    monkeypatch.setattr(placement, "placement_group", waits_forever)
    code = train_main(
        ["plan-path-tiny", "--run.backend", "ray", "--run.ray_gpus_per_policy", "1",
         "--run.out_dir", str(tmp_path), "--run.progress", "false", "--run.threads", "1"]
    )  # fmt: skip
    assert code == 2
    assert "the cluster has" in capsys.readouterr().err
    import ray

    assert not ray.is_initialized()  # the refusal leaves Ray as it found it (not started)


PAPER = [name for name in PRESETS if "-qwen3-" in name]


@pytest.mark.slow
@pytest.mark.parametrize("name", PAPER)
def test_every_paper_preset_fits_the_gpus_it_declares(name):
    plan = plan_run(PRESETS[name])
    assert plan.fits, plan.render()
    if PRESETS[name].optim.steps == 0:  # untrained rows: one engine on one GPU
        assert plan.count == 1, plan.render()


@pytest.mark.slow
def test_per_role_1_7b_fits_an_80gb_card_with_micro_batches_of_4():
    """The learner's log-probs over vocabulary chunks: two 1.7B learners and micro-batches of 4 x
    4096 completion tokens fit one H100 (the whole fp32 logits would be 10 GB, 37 GiB at the peak
    of the first plan), and the logits line stays a chunk's worth. Every layer recomputed whole:
    the preset itself runs micro-batches of 2, every layer checkpointed selectively."""
    over = ["--optim.micro_batch_size", "4", "--model.checkpoint_layers", "all",
            "--model.checkpoint_mode", "full"]  # fmt: skip
    cfg = build_config("plan-path-qwen3-1.7b", overrides=over)
    plan = plan_run(cfg)
    assert plan.fits, plan.render()
    # 74.5 GiB: each block's prompt pass is held while its completions run (prompts run once).
    assert sum(plan.gpus[0].update.values()) < 77 * GIB, plan.render()
    logits = next(v for k, v in plan.gpus[0].update.items() if k.startswith("logits"))
    assert logits < 4 * 4096 * 151936 * 4 / 2, plan.render()  # under half the full fp32 logits


@pytest.mark.parametrize("kl_coef", [0.0, 0.1])
def test_checkpoint_disk_estimate_matches_what_a_real_save_writes(tmp_path, kl_coef):
    """What the plan counts per policy and checkpoint: the HF export (save_checkpoint's
    ``<policy>/``) and Learner.save's distributed checkpoint (``learner-<policy>/``) after an
    optimizer step; within 3% of the bytes on disk (metadata and config files are the rest)."""
    import torch
    from transformers import Qwen3ForCausalLM

    from mas_trainer.learner import Learner

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(SMALL.hf_config())
    learner = Learner(model, lr=1e-4, kl_coef=kl_coef)
    for p in model.parameters():  # AdamW's moments exist from the first step on
        p.grad = torch.zeros_like(p)
    learner.optimizer.step()
    model.save_pretrained(tmp_path / "shared")
    learner.save(tmp_path / "learner-shared")
    written = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file())
    estimate = checkpoint_bytes(SMALL, "float32", reference=kl_coef > 0)
    assert _close(estimate, written, 0.03), (estimate, written)
    assert written > estimate  # what it leaves out is files, never tensors


def test_auto_checkpoints_the_fewest_layers_that_fit():
    """``model.checkpoint_layers auto``: no layer where memory is plentiful; on a GPU where only
    full checkpointing fits, every layer; the plan's note names the choice and its FLOPs."""
    over = ["--model.device", "cuda", "--model.gradient_checkpointing", "true",
            "--model.checkpoint_layers", "auto"]  # fmt: skip
    plenty = plan_run(build_config("plan-path-tiny", overrides=over))
    assert plenty.fits and plenty.checkpoint_layers == 0
    assert any("0 of 2 decoder layers recomputed (auto" in n for n in plenty.notes), plenty.notes
    # Long sequences (activations dominate): a GPU that fits 1 checkpointed layer, not 0.
    longer = [*over, "--rollout.max_new_tokens", "1024"]
    fixed = {
        c: plan_run(
            build_config(
                "plan-path-tiny",
                overrides=[
                    *longer[:4],
                    "--rollout.max_new_tokens",
                    "1024",
                    "--model.checkpoint_layers",
                    str(c),
                ],
            )
        )
        for c in (0, 1)
    }
    peaks = {c: max(sum(g.update.values()) for g in p.gpus) for c, p in fixed.items()}
    assert peaks[1] < peaks[0]
    tight = plan_run(build_config("plan-path-tiny", overrides=longer), (peaks[1] + 2 * GIB) / GIB)
    assert tight.fits and tight.checkpoint_layers == 1
