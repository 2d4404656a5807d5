"""Learner throughput vs a bare torch forward/backward/AdamW loop on the same model and batch.

Both sides train on the same samples (prompt + completion token ids), cut into the same
mini-batches, one AdamW step per mini-batch. The bare loop gets its padded tensors pre-built and
does nothing but ``model(ids).logits`` -> masked cross-entropy on completion tokens -> backward ->
AdamW step. ``Learner.update`` additionally shuffles, collates, computes the PPO-clip loss and
metrics, clips gradients and, by default, recomputes old log-probs with one extra no-grad forward
pass (the algorithm needs it); the ratio is reported with and without that pass, and against a bare
loop that also does one no-grad forward (the fair floor for PPO with recomputed log-probs).

Ratios are tokens/s of ours over tokens/s of the bare loop (higher is better; goal >= 0.8), medians
of ``--repeats`` alternating runs. Tokens = real (unpadded) prompt + completion tokens.

Usage:
    python benchmarks/bench_learner.py                      # tiny model, 64 samples, mini-batch 16
    python benchmarks/bench_learner.py --group-size 4            # K=4 candidates share a prompt
    python benchmarks/bench_learner.py --preset small --samples 32 --threads 2
    python benchmarks/bench_learner.py --preset qwen3-1.7b-shape --device cuda --dtype bfloat16 \
        --samples 64 --prompt-len 700 --completion-len 256        # GPU check
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mas_trainer.learner import Learner
from mas_trainer.models import build_tiny_model
from mas_trainer.samples import TrainSample


def make_samples(
    n: int, prompt_len: int, completion_len: int, seed: int, group_size: int = 1
) -> list[TrainSample]:
    """Random byte prompts/completions of varying length (lengths in [len/2, len]).

    With ``group_size`` K > 1, every K consecutive samples share one prompt (a tree-rollout group).
    """
    g = torch.Generator().manual_seed(seed)

    def length(hi: int) -> int:
        return int(torch.randint(max(1, hi // 2), hi + 1, (1,), generator=g))

    out = []
    p: list[int] = []
    for i in range(n):
        if i % group_size == 0:
            p = torch.randint(0, 256, (length(prompt_len),), generator=g).tolist()
        c = torch.randint(0, 256, (length(completion_len),), generator=g).tolist()
        lp = (-torch.rand(len(c), generator=g) * 5).tolist()
        out.append(TrainSample(p, c, lp, reward=0.0, advantage=1.0 if i % 2 else -1.0))
    return out


def bare_batches(
    samples: list[TrainSample], mini: int, pad: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Pre-padded ``(ids (b, L), loss_mask (b, L-1))`` per mini-batch, right padding."""
    out = []
    for s in range(0, len(samples), mini):
        rows = samples[s : s + mini]
        width = max(r.num_tokens for r in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width - 1), dtype=torch.bool)
        for i, r in enumerate(rows):
            seq = r.prompt_ids + r.completion_ids
            ids[i, : len(seq)] = torch.tensor(seq)
            mask[i, len(r.prompt_ids) - 1 : len(seq) - 1] = True
        out.append((ids, mask))
    return out


def bare_step(model, opt, batches, extra_forward: bool) -> None:  # type: ignore[no-untyped-def]
    """The hardware floor: forward, masked CE, backward, AdamW; optionally one no-grad forward."""
    if extra_forward:
        with torch.no_grad():
            for ids, _ in batches:
                model(input_ids=ids, use_cache=False)
    for ids, mask in batches:
        logits = model(input_ids=ids, use_cache=False).logits[:, :-1]  # (b, L-1, V)
        loss = torch.nn.functional.cross_entropy(logits[mask], ids[:, 1:][mask])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--mini-batch", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=400, help="max prompt tokens")
    ap.add_argument("--completion-len", type=int, default=48, help="max completion tokens")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--group-size", type=int, default=1, help="samples sharing one prompt (K of AT-GRPO)"
    )
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16"], help="parameter dtype"
    )
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    samples = make_samples(
        args.samples, args.prompt_len, args.completion_len, seed=0, group_size=args.group_size
    )
    tokens = sum(s.num_tokens for s in samples)
    model, tok = build_tiny_model(args.preset, device=args.device, dtype=getattr(torch, args.dtype))
    pad = tok.pad_token_id
    batches = [
        (i.to(args.device), m.to(args.device))
        for i, m in bare_batches(samples, args.mini_batch, pad)
    ]
    model.train()
    bare_opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01)
    common = dict(lr=1e-6, mini_batch_size=args.mini_batch, pad_token_id=pad)
    ours = Learner(model, **common)  # type: ignore[arg-type]
    ours_no_recompute = Learner(model, recompute_logprobs=False, **common)  # type: ignore[arg-type]

    def sync() -> None:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    runs = {
        "bare fwd/bwd/AdamW": lambda: bare_step(model, bare_opt, batches, extra_forward=False),
        "bare + no-grad fwd": lambda: bare_step(model, bare_opt, batches, extra_forward=True),
        "Learner.update": lambda: ours.update(samples),
        "Learner.update (no recompute)": lambda: ours_no_recompute.update(samples),
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    for fn in runs.values():  # warm-up (allocator, kernels)
        fn()
    for _ in range(args.repeats):
        for name, fn in runs.items():  # alternate, so load changes hit every variant alike
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - t0)

    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"preset={args.preset} samples={args.samples} mini_batch={args.mini_batch} "
        f"tokens/update={tokens} threads={torch.get_num_threads()} device={args.device} "
        f"dtype={args.dtype} group_size={args.group_size} "
        f"repeats={args.repeats}"
    )
    for name, t in med.items():
        print(f"  {name:32s} {t * 1000:9.1f} ms   {tokens / t:10.0f} tok/s")
    bare, bare_fwd = med["bare fwd/bwd/AdamW"], med["bare + no-grad fwd"]
    for label, num, den in [
        ("Learner.update / bare", bare, med["Learner.update"]),
        ("Learner.update (no recompute) / bare", bare, med["Learner.update (no recompute)"]),
        ("Learner.update / (bare + no-grad fwd)", bare_fwd, med["Learner.update"]),
    ]:
        print(f"ratio {label:40s} = {num / den:.2f}")


if __name__ == "__main__":
    main()
