"""GPU readiness check: learner and generation throughput, and one full AT-GRPO step.

Builds a random-weight model of Qwen3-1.7B's shape in memory (no download), then measures, each as
the median of a few repeats after a warm-up:

1. learner tokens/s: ``Learner.update`` (old log-prob recompute + PPO-clip fwd/bwd + AdamW) on
   synthetic samples;
2. generation tokens/s: vLLM when it is installed, else the transformers engine (both when
   ``--engine both``);
3. one full AT-GRPO step on Plan-Path: tree rollout (K candidates per turn and agent), group
   advantages, update, weight sync.

Figures are printed as ratios against the card's peak: model FLOP utilisation (MFU; 6 N FLOPs per
trained token plus 2 N for the log-prob recompute, 2 N per generated token) against the dense
bf16 peak, and decode memory-bandwidth use (the weights are read once per decode step of the whole
batch; KV-cache reads are not counted, so this is a lower bound) against HBM bandwidth. Defaults are
an H200's: 989 TFLOP/s dense bf16, 4.8 TB/s HBM3e.

``benchmarks/gpu_check.sh`` runs it with the GPU defaults; ``--preset tiny --device cpu`` runs the
same code on a CPU in seconds (``tests/test_gpu_check.py`` does, so this script cannot rot).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
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


def measure_learner(
    model: Any, tok: Any, args: argparse.Namespace, n_params: int
) -> dict[str, float]:
    """Tokens/s and MFU of ``Learner.update`` on random prompt + completion tokens."""
    import torch

    from mas_trainer.learner import Learner
    from mas_trainer.samples import TrainSample

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
    learner = Learner(
        model,
        lr=1e-7,
        mini_batch_size=args.learner_batch,
        micro_batch_size=args.micro_batch,
        pad_token_id=tok.pad_token_id,
        gradient_checkpointing=args.device.startswith("cuda"),
    )
    seconds, _ = _median_time(lambda: learner.update(samples), args.repeats, args.device)
    tokens = args.learner_batch * (args.prompt_len + args.gen_len)
    tok_s = tokens / seconds
    # fwd+bwd (6N) + the no-grad recompute of old log-probs (2N) per token.
    flops = 8 * n_params * tok_s
    return {
        "learner_tokens_per_s": tok_s,
        "learner_seconds": seconds,
        "learner_mfu": flops / (args.peak_tflops * 1e12),
    }


def measure_generation(
    engine: Any, tok: Any, args: argparse.Namespace, n_params: int, name: str, vocab: int
) -> dict[str, float]:
    """Generated tokens/s, MFU and decode bandwidth use of ``engine`` (all rows run to the end)."""
    import torch

    from mas_trainer.engines import SamplingParams

    gen = torch.Generator().manual_seed(1)
    prompts = [
        torch.randint(0, vocab, (args.prompt_len,), generator=gen).tolist()
        for _ in range(args.gen_batch)
    ]
    params = SamplingParams(temperature=1.0, max_tokens=args.gen_len)
    seconds, outs = _median_time(
        lambda: engine.generate(prompts, params, seed=0), args.repeats, args.device
    )
    n_tokens = sum(len(c.token_ids) for c in outs)
    tok_s = n_tokens / seconds
    steps_s = tok_s / args.gen_batch  # decode steps of the whole batch per second
    weight_bytes = 2 * n_params if args.dtype in ("bfloat16", "float16") else 4 * n_params
    return {
        f"gen_{name}_tokens_per_s": tok_s,
        f"gen_{name}_seconds": seconds,
        f"gen_{name}_mfu": 2 * n_params * tok_s / (args.peak_tflops * 1e12),
        f"gen_{name}_bandwidth_use": weight_bytes * steps_s / (args.hbm_tbps * 1e12),
    }


def full_step(policy: Any, tok: Any, args: argparse.Namespace) -> dict[str, float]:
    """One AT-GRPO step on Plan-Path: rollout, advantages, update, sync (as train.py phase 3)."""
    import mas_envs
    from mas_trainer import at_grpo
    from mas_trainer.engines import SamplingParams
    from mas_trainer.policy import sync_engines
    from mas_trainer.rollout import TreeRollout

    # Keeps zero-variance groups (no drop_zero_var): a random model's rewards are all equal.

    def make_env() -> Any:
        return mas_envs.make("mas/PlanPath-v0", split="train", max_turns=args.turns)

    roles = list(make_env().possible_agents)
    rollout = TreeRollout(
        make_env,
        {"shared": policy.engine},
        tok,
        dict.fromkeys(roles, "shared"),
        k=args.k,
        params=SamplingParams(temperature=1.0, max_tokens=args.step_new_tokens),
        seed=0,
    )
    task_ids = make_env().task_ids("train")[: args.tasks]
    _sync_device(args.device)
    t0 = time.perf_counter()
    result = rollout.run(task_ids, uid_prefix="check/")
    t1 = time.perf_counter()
    batch, _ = at_grpo.advantages(result.samples)
    policy.learner.update(batch)
    _sync_device(args.device)
    t2 = time.perf_counter()
    sync_engines({"shared": policy})
    _sync_device(args.device)
    t3 = time.perf_counter()
    return {
        "step_seconds": t3 - t0,
        "step_rollout_seconds": t1 - t0,
        "step_update_seconds": t2 - t1,
        "step_sync_seconds": t3 - t2,
        "step_samples": float(len(result.samples)),
        "step_gen_tokens": float(result.gen_tokens),
    }


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse arguments, measure, print the report; return the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="qwen3-1.7b-shape", help="mas_trainer.models preset")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--engine", default="auto", choices=["auto", "transformers", "vllm", "both"])
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--gen-len", type=int, default=256)
    p.add_argument("--learner-batch", type=int, default=32)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--gen-batch", type=int, default=128)
    p.add_argument("--tasks", type=int, default=16, help="root envs of the AT-GRPO step")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--turns", type=int, default=2)
    p.add_argument("--step-new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--engine-memory", type=float, default=0.4, help="vLLM's share of the GPU")
    p.add_argument("--peak-tflops", type=float, default=H200_BF16_TFLOPS)
    p.add_argument("--hbm-tbps", type=float, default=H200_HBM_TBPS)
    p.add_argument("--json", default="", help="also write the figures to this file")
    args = p.parse_args(argv)

    import torch

    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.learner import Learner
    from mas_trainer.models import build_tiny_model, count_parameters
    from mas_trainer.policy import Policy

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device; run with --device cpu --preset tiny")
    t_start = time.perf_counter()
    dtype = getattr(torch, args.dtype)
    model, tok = build_tiny_model(args.preset, seed=0, dtype=dtype, device=args.device)
    n_params = count_parameters(model)
    vocab = min(len(tok), model.config.vocab_size)
    figures: dict[str, Any] = {
        "preset": args.preset,
        "params": n_params,
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
    }
    print(f"model {args.preset}: {n_params / 1e9:.3f} B parameters, {args.dtype}, {args.device}")

    figures.update(measure_learner(model, tok, args, n_params))
    engines = []
    if args.engine in ("transformers", "both") or args.engine == "auto":
        engines.append("transformers")
    has_vllm = _vllm_available()
    if args.engine in ("vllm", "both") or (args.engine == "auto" and has_vllm):
        if not has_vllm:
            raise SystemExit("gpu_check: --engine vllm but vllm does not import")
        engines.append("vllm")
    figures["vllm"] = "measured" if "vllm" in engines else "skipped (vllm not installed)"
    step_engine: Any = TransformersEngine(model, tok, batch_size=args.gen_batch)
    for name in engines:
        if name == "transformers":
            engine: Any = step_engine
        else:
            import tempfile

            from mas_trainer.engines.vllm import VLLMEngine, build_llm, save_for_vllm

            folder = tempfile.mkdtemp(prefix="gpu-check-")
            t0 = time.perf_counter()
            llm = build_llm(
                save_for_vllm(model, tok, folder),
                dtype=args.dtype,
                gpu_memory_utilization=args.engine_memory,
                max_model_len=args.prompt_len + args.gen_len + 1024,
                max_num_seqs=args.gen_batch,
            )
            figures["vllm_start_seconds"] = time.perf_counter() - t0
            engine = step_engine = VLLMEngine(llm, tok)
        figures.update(measure_generation(engine, tok, args, n_params, name, vocab))
    learner = Learner(model, lr=1e-7, mini_batch_size=64, micro_batch_size=args.micro_batch,
                      pad_token_id=tok.pad_token_id,
                      gradient_checkpointing=args.device.startswith("cuda"))  # fmt: skip
    figures["step_engine"] = "vllm" if "vllm" in engines else "transformers"
    figures.update(full_step(Policy("shared", model, step_engine, learner), tok, args))
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
    print(
        f"learner            {f['learner_tokens_per_s']:>10.0f} tok/s   "
        f"MFU {f['learner_mfu']:.3f} of peak"
    )
    for name in ("transformers", "vllm"):
        key = f"gen_{name}_tokens_per_s"
        if key in f:
            print(
                f"generation {name:<12}{f[key]:>7.0f} tok/s   MFU {f[f'gen_{name}_mfu']:.4f} of "
                f"peak, weight reads {f[f'gen_{name}_bandwidth_use']:.3f} of memory bandwidth"
            )
    if "gen_vllm_tokens_per_s" in f and "gen_transformers_tokens_per_s" in f:
        ratio = f["gen_vllm_tokens_per_s"] / f["gen_transformers_tokens_per_s"]
        print(f"vLLM / transformers generation: {ratio:.2f}x")
    print(f"vLLM: {f['vllm']}")
    print(
        f"AT-GRPO step ({f['step_engine']}): {f['step_seconds']:.1f} s = rollout "
        f"{f['step_rollout_seconds']:.1f} s + update {f['step_update_seconds']:.1f} s + sync "
        f"{f['step_sync_seconds']:.2f} s; {int(f['step_samples'])} samples, "
        f"{int(f['step_gen_tokens'])} generated tokens"
    )
    if "peak_memory_gib" in f:
        print(f"peak torch memory {f['peak_memory_gib']:.1f} GiB")
    print(f"total {f['total_seconds']:.0f} s")


def main() -> int:
    run(sys.argv[1:])
    return 0


if __name__ == "__main__":  # vLLM starts its engine core with spawn: keep this guard
    sys.exit(main())
