"""GPU readiness check: one paper preset, shrunk, end to end; figures as ratios to the card's peak.

Runs ``mas-train``'s own loop (:func:`mas_trainer.train.train`) on a paper preset (default
``plan-path-qwen3-1.7b``: fp32 master weights with bf16 compute, vLLM engine with bf16 copies,
Qwen3 chat template flags, the code-tool env, per-role policies, K=4, 64 samples per optimizer
step) with the model replaced by random weights of Qwen3-1.7B's shape built in memory
(``tiny:qwen3-1.7b-shape``, no download) and the run shrunk to a few steps of a few tasks. Then:

1. **learner**: tokens/s of ``Learner.update`` (old log-prob recompute + PPO-clip fwd/bwd +
   AdamW) in the preset's precision on synthetic samples of a fixed shape (the steady state), and
   its model FLOP utilisation (MFU: 6 N FLOPs per trained token for forward and backward plus 2 N
   for the recompute, against the dense bf16 peak);
2. **generation**: tokens/s of the run's rollouts (vLLM when it is installed, else the
   transformers engine), its MFU (2 N per token) and its decode weight-read bandwidth use (the
   weights, in the engine's dtype, are read once per decode step of the batch; KV reads not
   counted: a lower bound) against HBM bandwidth;
3. **step time**: the median RL step (rollout + update + sync) and its MFU (all the step's model
   FLOPs over peak x step time).

Defaults are an H200's: 989 TFLOP/s dense bf16, 4.8 TB/s HBM3e. ``benchmarks/gpu_check.sh`` runs
it with the GPU defaults (< 5 minutes on one H200); ``--shape tiny --device cpu`` runs the same
code on a CPU in seconds (``tests/test_gpu_check.py`` does, so this script cannot rot).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

H200_BF16_TFLOPS = 989.0
H200_HBM_TBPS = 4.8


def _sync_device(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _median_time(fn: Callable[[], Any], repeats: int, device: str) -> tuple[float, Any]:
    """Run ``fn`` once (warm-up), then ``repeats`` times; the median seconds and the last result."""
    out = fn()
    times = []
    for _ in range(repeats):
        _sync_device(device)
        t0 = time.perf_counter()
        out = fn()
        _sync_device(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except Exception:  # an ImportError, or a broken CUDA build of vllm's dependencies
        return False
    return True


def shrunk_config(args: argparse.Namespace, out_dir: str) -> Any:
    """The paper preset with the model, device, engine and sizes replaced (nothing else)."""
    from mas_trainer.config import build_config

    engine = args.engine
    if engine == "auto":
        engine = "vllm" if _vllm_available() else "transformers"
    overrides = [
        "--model.name", f"tiny:{args.shape}", "--model.device", args.device,
        "--model.engine", engine, "--run.backend", "local", "--run.ray_sharding", "replicate",
        "--model.engine_memory", str(args.engine_memory),
        "--rollout.tasks_per_step", str(args.tasks),
        "--rollout.max_new_tokens", str(args.new_tokens),
        "--optim.steps", str(args.steps), "--optim.warmstart_steps", "0",
        "--eval.episodes", str(args.eval_episodes), "--eval.select_every", "0",
        "--run.save_every", "0", "--run.log_transcripts", "0", "--run.progress", "false",
        "--run.out_dir", out_dir, "--run.name", "gpu-check",
    ]  # fmt: skip
    return build_config(args.preset, overrides=overrides)


def measure_learner(cfg: Any, args: argparse.Namespace) -> dict[str, float]:
    """Steady-state tokens/s and MFU of ``Learner.update`` in the preset's precision."""
    import torch

    from mas_trainer.learner import Learner
    from mas_trainer.models import build_tiny_model, count_parameters
    from mas_trainer.samples import TrainSample

    model, tok = build_tiny_model(args.shape, seed=0, dtype=getattr(torch, cfg.model.dtype),
                                  device=args.device)  # fmt: skip
    n_params = count_parameters(model)
    gen = torch.Generator().manual_seed(0)
    vocab = min(len(tok), model.config.vocab_size)
    samples = []
    for i in range(args.learner_batch):
        prompt = torch.randint(0, vocab, (args.prompt_len,), generator=gen).tolist()
        completion = torch.randint(0, vocab, (args.gen_len,), generator=gen).tolist()
        samples.append(
            TrainSample(prompt, completion, [-1.0] * args.gen_len, reward=0.0,
                        advantage=1.0 if i % 2 else -1.0, group=(str(i // 4), 0, "a"))
        )  # fmt: skip
    autocast = None if cfg.model.autocast == "none" else getattr(torch, cfg.model.autocast)
    learner = Learner(
        model,
        lr=cfg.optim.lr,
        mini_batch_size=cfg.optim.mini_batch_size,
        micro_batch_size=cfg.optim.micro_batch_size or None,
        temperature=cfg.rollout.temperature,
        dtype=autocast,
        pad_token_id=tok.pad_token_id,
        gradient_checkpointing=cfg.model.gradient_checkpointing,
    )
    seconds, _ = _median_time(lambda: learner.update(samples), args.repeats, args.device)
    tok_s = args.learner_batch * (args.prompt_len + args.gen_len) / seconds
    learner = model = None  # free the GPU memory before the run
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {
        "params": n_params,
        "learner_tokens_per_s": tok_s,
        "learner_seconds": seconds,
        # fwd+bwd (6N) + the no-grad recompute of old log-probs (2N) per token.
        "learner_mfu": 8 * n_params * tok_s / (args.peak_tflops * 1e12),
    }


def measure_run(cfg: Any, args: argparse.Namespace, n_params: int) -> dict[str, Any]:
    """Run the shrunk preset end to end; generation and step figures from its metrics."""
    from mas_trainer.outputs import read_metrics
    from mas_trainer.train import train

    summary = train(cfg)
    rl = [r for r in read_metrics(f"{summary['run_dir']}/metrics.jsonl") if r["phase"] == "rl"]
    steady = rl[1:] or rl  # the first step pays for warm-up (kernels, allocator, CUDA graphs)

    def median(key: str) -> float:
        return statistics.median(float(r[key]) for r in steady)

    gen_tok_s = sum(r["perf/gen_tokens"] for r in steady) / sum(r["perf/gen_s"] for r in steady)
    batch = cfg.rollout.tasks_per_step * cfg.rollout.k
    weight_bytes = {"float32": 4, "bfloat16": 2, "float16": 2}[cfg.model.engine_weights_dtype]
    learner_tok = [
        sum(v * r[k.replace("learner_tokens_per_s", "update_s")] for k, v in r.items()
            if k.startswith("perf/learner_tokens_per_s"))
        for r in steady
    ]  # fmt: skip
    step_flops = [
        8 * n_params * lt + 2 * n_params * r["perf/gen_tokens"]
        for lt, r in zip(learner_tok, steady, strict=True)
    ]
    step_s = [r["perf/step_s"] for r in steady]
    return {
        "engine": cfg.model.engine,
        "run_steps": len(rl),
        "gen_tokens_per_s": gen_tok_s,
        "gen_mfu": 2 * n_params * gen_tok_s / (args.peak_tflops * 1e12),
        # Each decode step of the batch reads the weights once: steps/s = tokens/s / batch.
        "gen_bandwidth_use": weight_bytes * n_params * gen_tok_s / batch / (args.hbm_tbps * 1e12),
        "step_seconds": median("perf/step_s"),
        "step_rollout_seconds": median("perf/rollout_s"),
        "step_update_seconds": median("perf/update_s"),
        "step_mfu": statistics.median(
            f / (args.peak_tflops * 1e12 * s) for f, s in zip(step_flops, step_s, strict=True)
        ),
        "step_samples": median("rollout/samples"),
        "step_gen_tokens": median("perf/gen_tokens"),
        "eval_success": summary.get("success_final"),
    }


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse arguments, measure, print the report; return the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="plan-path-qwen3-1.7b", help="a paper preset")
    p.add_argument("--shape", default="qwen3-1.7b-shape", help="mas_trainer.models preset")
    p.add_argument("--device", default="cuda")
    p.add_argument("--engine", default="auto", choices=["auto", "transformers", "vllm"])
    p.add_argument("--tasks", type=int, default=16, help="root tasks per RL step")
    p.add_argument("--new-tokens", type=int, default=256, help="response tokens per turn")
    p.add_argument("--steps", type=int, default=3, help="RL steps (the first is warm-up)")
    p.add_argument("--eval-episodes", type=int, default=4)
    p.add_argument("--prompt-len", type=int, default=512, help="learner benchmark")
    p.add_argument("--gen-len", type=int, default=256, help="learner benchmark")
    p.add_argument("--learner-batch", type=int, default=32, help="learner benchmark")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--engine-memory", type=float, default=0.4, help="vLLM's share of the GPU")
    p.add_argument("--peak-tflops", type=float, default=H200_BF16_TFLOPS)
    p.add_argument("--hbm-tbps", type=float, default=H200_HBM_TBPS)
    p.add_argument("--json", default="", help="also write the figures to this file")
    args = p.parse_args(argv)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device; run with --device cpu --shape tiny")
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as out_dir:
        cfg = shrunk_config(args, out_dir)
        print(f"{args.preset} shrunk: {args.shape}, {cfg.model.dtype} masters, "
              f"{cfg.model.autocast} compute, {cfg.model.engine} engine in "
              f"{cfg.model.engine_weights_dtype}, {args.device}")  # fmt: skip
        figures: dict[str, Any] = {
            "preset": args.preset,
            "shape": args.shape,
            "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
            "vllm": "installed" if _vllm_available() else "not installed",
        }
        figures.update(measure_learner(cfg, args))
        figures.update(measure_run(cfg, args, figures["params"]))
    figures["total_seconds"] = time.perf_counter() - t_start
    if args.device.startswith("cuda"):
        figures["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    _report(figures, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return figures


def _report(f: dict[str, Any], args: argparse.Namespace) -> None:
    peak = f"{args.peak_tflops:g} TFLOP/s bf16 dense"
    bw = f"{args.hbm_tbps:g} TB/s"
    print(f"\n== gpu_check ({f['device']}; peak {peak}, memory {bw}) ==")
    print(f"model {f['shape']}: {f['params'] / 1e9:.3f} B parameters; vLLM {f['vllm']}")
    print(
        f"learner            {f['learner_tokens_per_s']:>10.0f} tok/s   "
        f"MFU {f['learner_mfu']:.3f} of peak"
    )
    print(
        f"generation ({f['engine']}) {f['gen_tokens_per_s']:>8.0f} tok/s   MFU "
        f"{f['gen_mfu']:.4f} of peak, weight reads {f['gen_bandwidth_use']:.3f} of memory bandwidth"
    )
    print(
        f"AT-GRPO step        {f['step_seconds']:>8.1f} s      MFU {f['step_mfu']:.4f} of peak "
        f"(rollout {f['step_rollout_seconds']:.1f} s + update {f['step_update_seconds']:.1f} s; "
        f"{int(f['step_samples'])} samples, {int(f['step_gen_tokens'])} generated tokens; "
        f"median of {max(1, f['run_steps'] - 1)} steps)"
    )
    if "peak_memory_gib" in f:
        print(f"peak torch memory {f['peak_memory_gib']:.1f} GiB")
    print(f"total {f['total_seconds']:.0f} s")


def main() -> int:
    run(sys.argv[1:])
    return 0


if __name__ == "__main__":  # vLLM starts its engine core with spawn: keep this guard
    sys.exit(main())
