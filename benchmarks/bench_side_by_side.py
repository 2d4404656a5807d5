"""Two per-role learners' supervised steps side by side (``run.learners_side_by_side``) against one
after another, and against the hardware's limit: one learner alone, on one core.

The default run's team trains two models (tool and planner), each with one torch thread. One after
another, a 2-core machine keeps one core busy; side by side (mas_trainer/lockstep.py: one thread per
policy, torch releases the GIL in its kernels) it can keep two. Each variant runs ``--steps``
supervised steps of each of two learners (``Learner.sft_update``, the warm start's step) on the same
samples; the limit is one learner's steps alone, twice, spread over the cores (``--cores``, default
the machine's, at most 2).

Printed: the wall time of each variant (median of ``--repeats`` alternating runs), the speed-up of
side by side over one after another, and its share of the limit's speed-up (1.0 = as fast as two
idle cores allow).

Usage:
    python benchmarks/bench_side_by_side.py                  # tiny-bpe shape, 20 steps, 3 repeats
    python benchmarks/bench_side_by_side.py --steps 40 --repeats 5 --prompt-len 150
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from bench_learner import make_samples

from mas_trainer.learner import Learner
from mas_trainer.lockstep import lockstep
from mas_trainer.models import build_tiny_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--preset", default="tiny-bpe", help="tiny model shape of both learners")
    ap.add_argument("--steps", type=int, default=20, help="supervised steps of each learner")
    ap.add_argument("--batch", type=int, default=32, help="samples per step (the warm start's)")
    ap.add_argument("--prompt-len", type=int, default=150, help="max prompt tokens")
    ap.add_argument("--completion-len", type=int, default=40, help="max completion tokens")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cores", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args()
    torch.set_num_threads(1)  # the default preset's run.threads

    learners = {}
    for i, name in enumerate(("tool", "planner")):
        model, tok = build_tiny_model(args.preset, seed=i)
        learners[name] = Learner(model, lr=1e-3, mini_batch_size=args.batch, seed=i,
                                 pad_token_id=tok.pad_token_id)  # fmt: skip
    samples = make_samples(args.batch, args.prompt_len, args.completion_len, seed=0)
    steps = {name: args.steps for name in learners}

    def both(side_by_side: bool) -> None:
        for _ in lockstep(
            lambda name, _: learners[name].sft_update(samples), steps, side_by_side=side_by_side
        ):
            pass

    def alone() -> None:
        for _ in range(args.steps):
            learners["tool"].sft_update(samples)

    runs = {
        "one after another": lambda: both(False),
        "side by side": lambda: both(True),
        "one learner alone (half the work)": alone,
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    for fn in runs.values():  # warm-up
        fn()
    for _ in range(args.repeats):
        for name, fn in runs.items():  # alternating, so load changes hit every variant alike
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    tokens = 2 * args.steps * sum(s.num_tokens for s in samples)
    print(f"two learners ({args.preset}), {args.steps} supervised steps of {args.batch} samples "
          f"each, {tokens} tokens in all; medians of {args.repeats}")  # fmt: skip
    for name, t in med.items():
        print(f"  {name:36s} {t:7.2f} s")
    speedup = med["one after another"] / med["side by side"]
    limit = med["one after another"] / max(med["one learner alone (half the work)"], 1e-9)
    limit = min(limit, float(args.cores))
    print(f"side by side over one after another: {speedup:.2f}x")
    print(f"the limit on {args.cores} cores: {limit:.2f}x; side by side reaches "
          f"{speedup / limit:.2f} of it")  # fmt: skip


if __name__ == "__main__":
    main()
