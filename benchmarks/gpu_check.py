"""GPU check for a lent machine: the paper presets' GPU path, measured beside ``--plan``.

Fits one H100 (80 GB) in at most 8 minutes with only torch and transformers installed (and
pettingzoo + gymnasium, which ``mas_trainer`` imports, brought as wheels), no network: every model
is Qwen3's shape with random weights, built on the GPU (nothing is downloaded). Sections:

1. **learner**: ``Learner.update`` on Qwen3-1.7B's shape at the paper's lengths (prompt 5120 +
   response 4096 tokens, the per-role 1.7B presets' micro-batch of 2, fp32 masters, bf16 autocast,
   gradient checkpointing): tokens/s, FLOPs per update counted by
   ``torch.utils.flop_counter.FlopCounterMode``, MFU against the card's dense bf16 peak, and the
   measured peak memory (``torch.cuda.max_memory_allocated``) beside ``--plan``'s prediction for
   one learner (:func:`mas_trainer.plan.learner_memory`);
2. **fsdp**: the same on ``FSDPLearner`` (FSDP2 ``fully_shard``, NCCL, world size 1) with Qwen3-8B's
   shape cut to a few layers (``--fsdp-layers``), beside ``--plan``'s FSDP track of that model;
3. **checkpoint**: the 1.7B learner's ``state_dict`` saved with ``torch.save`` and loaded back
   (``load_state_dict``): seconds, bytes on disk, peak memory while saving;
4. **engine**: the transformers engine generating on the 1.7B learner's model (bf16 autocast):
   tokens/s, MFU, and decode weight reads against HBM bandwidth;
5. **vllm** (only when ``import vllm`` works): ``vllm.LLM`` on a bf16 copy of the model: tokens/s.

``--dry-run`` runs every step on the CPU at tiny shapes (gloo instead of NCCL), end to end:
``tests/experiments/test_gpu_check.py`` does, so this script cannot rot.
``benchmarks/gpu_check.sh`` is the one command for the GPU machine. A section that would pass the
time budget (``--budget-s``, 480) is skipped and says so; the learner section always runs.
``--dry-run --budget-s 0`` shows the skipping on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

H100_BF16_TFLOPS = 989.0  # dense, SXM
H100_HBM_TBPS = 3.35
GIB = 2**30


class Sizes(NamedTuple):
    """The shapes and lengths one run of the check uses."""

    learner: str  # a key of mas_trainer.plan.QWEN3_SHAPES, or "tiny"
    fsdp: str
    fsdp_layers: int
    prompt: int
    response: int
    micro: int
    samples: int
    gen_batch: int
    gen_prompt: int
    gen_tokens: int


GPU = Sizes("Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B", 4, 5120, 4096, 2, 4, 64, 512, 256)
DRY = Sizes("tiny", "tiny", 2, 48, 32, 2, 4, 4, 16, 8)


def _shape(name: str, layers: int | None = None) -> Any:
    from dataclasses import replace

    from mas_trainer.plan import QWEN3_SHAPES, ModelShape

    shape = QWEN3_SHAPES.get(name) or ModelShape(64, 2, 4, 2, 16, 128, 512, False)
    return replace(shape, layers=layers) if layers else shape


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _peak_reset(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _peak(device: str) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / GIB if device.startswith("cuda") else None


def _timed(fn: Callable[[], Any], device: str) -> tuple[float, Any]:
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - t0, out


def _model(shape: Any, device: str) -> Any:
    """A random-init Qwen3 model of ``shape``, fp32 (the masters), built on ``device``."""
    import torch
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(0)
    with torch.device(device):
        return Qwen3ForCausalLM(shape.hf_config())


def _samples(sizes: Sizes, vocab: int) -> list[Any]:
    import torch

    from mas_trainer.samples import TrainSample

    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(sizes.samples):
        prompt = torch.randint(0, vocab, (sizes.prompt,), generator=gen).tolist()
        completion = torch.randint(0, vocab, (sizes.response,), generator=gen).tolist()
        logprobs = [-1.0] * sizes.response
        advantage = 1.0 if i % 2 else -1.0
        out.append(TrainSample(prompt, completion, logprobs, 0.0, advantage, (str(i), 0, "a")))
    return out


def _learner_kwargs(sizes: Sizes) -> dict[str, Any]:
    return dict(
        lr=1e-6,
        mini_batch_size=sizes.samples,
        micro_batch_size=sizes.micro,
        temperature=0.6,
        pad_token_id=0,
        gradient_checkpointing=True,
    )


def _measure_update(learner: Any, samples: list[Any], device: str, args: Any) -> dict[str, Any]:
    """Warm-up update (FLOPs counted on it), then ``repeats`` timed ones; peak memory of those."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        learner.update(samples)
    flops = counter.get_total_flops()
    _peak_reset(device)
    times = [_timed(lambda: learner.update(samples), device)[0] for _ in range(args.repeats)]
    seconds = statistics.median(times)
    tokens = sum(s.num_tokens for s in samples)
    return {
        "tokens_per_s": tokens / seconds,
        "seconds": seconds,
        "flops_per_update": flops,
        "mfu": flops / seconds / (args.peak_tflops * 1e12),
        "peak_gib": _peak(device),
    }


def _predicted(shape: Any, sizes: Sizes, *, fsdp: bool) -> float:
    """``--plan``'s peak for one learner of ``shape`` at these sizes, in GiB."""
    from mas_trainer.plan import learner_memory

    mem = learner_memory(shape, micro_batch=sizes.micro, prompt=sizes.prompt,
                         response=sizes.response, fsdp=fsdp,
                         layers=shape.layers if fsdp else None)  # fmt: skip
    return mem.peak / GIB


def section_learner(sizes: Sizes, args: Any) -> tuple[dict[str, Any], Any]:
    import torch

    from mas_trainer.learner import Learner

    shape = _shape(sizes.learner)
    model = _model(shape, args.device)
    learner = Learner(model, dtype=torch.bfloat16, **_learner_kwargs(sizes))
    figures = _measure_update(learner, _samples(sizes, shape.vocab), args.device, args)
    figures["params"] = shape.params
    figures["plan_peak_gib"] = _predicted(shape, sizes, fsdp=False)
    return figures, learner


def section_fsdp(sizes: Sizes, args: Any) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from mas_trainer.distributed.learners import FSDPLearner

    shape = _shape(sizes.fsdp, sizes.fsdp_layers)
    backend = "nccl" if args.device.startswith("cuda") else "gloo"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        model = _model(shape, args.device)
        learner = FSDPLearner(model, dtype=torch.bfloat16, **_learner_kwargs(sizes))
        figures = _measure_update(learner, _samples(sizes, shape.vocab), args.device, args)
        del learner, model
    finally:
        dist.destroy_process_group()
    figures.update(backend=backend, layers=shape.layers, params=shape.params,
                   plan_peak_gib=_predicted(shape, sizes, fsdp=True))  # fmt: skip
    return figures


def section_checkpoint(learner: Any, args: Any, folder: Path) -> dict[str, Any]:
    import torch

    path = folder / "learner.pt"
    static = sum(p.numel() * p.element_size() for p in learner.model.parameters())
    static += sum(
        t.numel() * t.element_size()
        for st in learner.optimizer.state.values()
        for t in st.values()
        if torch.is_tensor(t)
    )
    _peak_reset(args.device)
    save_s, _ = _timed(lambda: torch.save(learner.state_dict(), path), args.device)
    save_peak = _peak(args.device)
    load_s, _ = _timed(
        lambda: learner.load_state_dict(torch.load(path, map_location=args.device)), args.device
    )
    size = path.stat().st_size
    path.unlink()
    return {
        "save_s": save_s,
        "load_s": load_s,
        "disk_gb": size / 1e9,
        "plan_disk_gb": learner_params(learner) * 12 / 1e9,  # fp32 weights + 2 AdamW moments
        "held_gib": static / GIB,
        "save_peak_gib": save_peak,
    }


def learner_params(learner: Any) -> int:
    return sum(p.numel() for p in learner.model.parameters())


def section_engine(learner: Any, sizes: Sizes, args: Any) -> dict[str, Any]:
    import torch

    from mas_trainer.engines.base import SamplingParams
    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.models import build_byte_tokenizer

    tok = build_byte_tokenizer()
    engine = TransformersEngine(learner.model, tok, batch_size=sizes.gen_batch,
                                autocast=torch.bfloat16)  # fmt: skip
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 256, (sizes.gen_prompt,), generator=gen).tolist()
               for _ in range(sizes.gen_batch)]  # fmt: skip
    params = SamplingParams(temperature=0.6, max_tokens=sizes.gen_tokens)
    engine.generate(prompts[:2], params, seed=0)  # warm-up
    seconds, out = _timed(lambda: engine.generate(prompts, params, seed=0), args.device)
    tokens = sum(len(c.token_ids) for c in out)
    n = learner_params(learner)
    tok_s = tokens / seconds
    steps_s = tok_s / sizes.gen_batch
    return {
        "tokens_per_s": tok_s,
        "mfu": 2 * n * tok_s / (args.peak_tflops * 1e12),
        "weight_read_share": 2 * n * steps_s / (args.hbm_tbps * 1e12),
    }


def section_vllm(learner: Any, sizes: Sizes, args: Any, folder: Path) -> dict[str, Any]:
    import torch
    import vllm

    from mas_trainer.models import build_byte_tokenizer

    path = folder / "model"
    learner.model.to(torch.bfloat16).save_pretrained(path)
    build_byte_tokenizer().save_pretrained(path)
    learner.optimizer.state.clear()
    learner.model = None
    torch.cuda.empty_cache()
    llm = vllm.LLM(model=str(path), dtype="bfloat16", gpu_memory_utilization=0.4,
                   max_model_len=sizes.gen_prompt + sizes.gen_tokens + 16)  # fmt: skip
    gen = torch.Generator().manual_seed(1)
    prompts = [{"prompt_token_ids": torch.randint(0, 256, (sizes.gen_prompt,), generator=gen)
                .tolist()} for _ in range(sizes.gen_batch)]  # fmt: skip
    sp = vllm.SamplingParams(temperature=0.6, max_tokens=sizes.gen_tokens, ignore_eos=True)
    llm.generate(prompts[:2], sp)
    seconds, out = _timed(lambda: llm.generate(prompts, sp), args.device)
    tokens = sum(len(o.outputs[0].token_ids) for o in out)
    return {"version": vllm.__version__, "tokens_per_s": tokens / seconds}


def _vllm_importable() -> bool:
    try:
        import vllm  # noqa: F401
    except Exception:  # an ImportError, or a broken CUDA build of its dependencies
        return False
    return True


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse arguments, run the sections within the budget, print the report; the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dry-run", action="store_true",
                   help="every step on the CPU at tiny shapes (gloo), end to end")  # fmt: skip
    p.add_argument("--fsdp-layers", type=int, default=0, help="8B layers kept (default 4)")
    p.add_argument("--repeats", type=int, default=2, help="timed updates after the warm-up")
    p.add_argument("--budget-s", type=float, default=480.0, help="skip sections past this")
    p.add_argument("--peak-tflops", type=float, default=H100_BF16_TFLOPS)
    p.add_argument("--hbm-tbps", type=float, default=H100_HBM_TBPS)
    p.add_argument("--json", default="", help="also write the figures to this file")
    args = p.parse_args(argv)
    sizes = DRY if args.dry_run else GPU
    if args.dry_run:
        args.device = "cpu"
    if args.fsdp_layers:
        sizes = sizes._replace(fsdp_layers=args.fsdp_layers)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_check: torch sees no CUDA device; --dry-run runs it on the CPU")
    start = time.perf_counter()
    figures: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "dry_run": args.dry_run,
        "skipped": [],
    }
    # Rough seconds each section takes on an H100 (the engine's decode dominates its own). A dry
    # run's sections take seconds: it counts only the time spent, so `--dry-run --budget-s 0`
    # takes the skipping path that a slow GPU run would.
    cost = {"fsdp": 60, "checkpoint": 90, "engine": 60, "vllm": 150}
    if args.dry_run:
        cost = dict.fromkeys(cost, 0)

    def room(name: str) -> bool:
        ok = time.perf_counter() - start + cost[name] < args.budget_s
        if not ok:
            figures["skipped"].append(name)
        return ok

    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        figures["learner"], learner = section_learner(sizes, args)
        if room("checkpoint"):
            figures["checkpoint"] = section_checkpoint(learner, args, Path(tmp))
        if room("engine"):
            figures["engine"] = section_engine(learner, sizes, args)
        if _vllm_importable() and not args.dry_run and room("vllm"):
            try:
                figures["vllm"] = section_vllm(learner, sizes, args, Path(tmp))
            except Exception as err:  # report, and still run the FSDP section
                figures["vllm"] = {"error": f"{type(err).__name__}: {err}"}
        learner = None
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        if room("fsdp"):
            figures["fsdp"] = section_fsdp(sizes, args)
    figures["vllm_importable"] = _vllm_importable()
    figures["total_s"] = time.perf_counter() - start
    _report(figures, sizes, args)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return figures


def _gib(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f} GiB"


def _report(f: dict[str, Any], sizes: Sizes, args: Any) -> None:
    dry = "; DRY RUN: tiny shapes on the CPU" if f["dry_run"] else ""
    print(
        f"\n== gpu_check ({f['device']}, torch {f['torch']}; peak {args.peak_tflops:g} TFLOP/s "
        f"bf16 dense, {args.hbm_tbps:g} TB/s{dry}) =="
    )
    lr = f["learner"]
    print(
        f"learner {sizes.learner} ({lr['params'] / 1e9:.2f} B), {sizes.samples} x "
        f"({sizes.prompt} + {sizes.response}) tokens, micro-batch {sizes.micro}: "
        f"{lr['tokens_per_s']:.0f} tok/s, MFU {lr['mfu']:.3f}, "
        f"{lr['flops_per_update'] / 1e12:.1f} TFLOP per update; peak {_gib(lr['peak_gib'])} "
        f"measured vs {lr['plan_peak_gib']:.1f} GiB --plan"
    )
    if "checkpoint" in f:
        c = f["checkpoint"]
        print(
            f"checkpoint: save {c['save_s']:.1f} s, load {c['load_s']:.1f} s, "
            f"{c['disk_gb']:.2f} GB on disk (--plan: {c['plan_disk_gb']:.2f} GB per policy); "
            f"peak while saving {_gib(c['save_peak_gib'])} with {c['held_gib']:.1f} GiB held"
        )
    if "engine" in f:
        e = f["engine"]
        print(
            f"transformers engine: {e['tokens_per_s']:.0f} tok/s at batch {sizes.gen_batch}, "
            f"MFU {e['mfu']:.4f}, weight reads {e['weight_read_share']:.3f} of bandwidth"
        )
    if "vllm" in f:
        v = f["vllm"]
        if "tokens_per_s" in v:
            print(f"vLLM {v['version']}: {v['tokens_per_s']:.0f} tok/s at batch {sizes.gen_batch}")
        else:
            print(f"vLLM: failed: {v['error']}")
    elif not f["vllm_importable"]:
        print("vLLM: not installed (section skipped)")
    if "fsdp" in f:
        d = f["fsdp"]
        print(
            f"FSDP2 ({d['backend']}, world 1) {sizes.fsdp} cut to {d['layers']} layers "
            f"({d['params'] / 1e9:.2f} B): {d['tokens_per_s']:.0f} tok/s, MFU {d['mfu']:.3f}; "
            f"peak {_gib(d['peak_gib'])} measured vs {d['plan_peak_gib']:.1f} GiB --plan"
        )
    if f["skipped"]:
        print(f"skipped (time budget {args.budget_s:g} s): {', '.join(f['skipped'])}")
    print(f"total {f['total_s']:.0f} s")


def main() -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run(sys.argv[1:])
    return 0


if __name__ == "__main__":  # vLLM starts its engine core with spawn: keep this guard
    sys.exit(main())
