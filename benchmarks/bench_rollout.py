"""Share of tree-rollout time spent outside generation (env steps, clones, prompt encoding).

The target (issue 4): at most 5% with the tiny model. Runs the real ``TreeRollout`` on Plan-Path
(the default task) with the tiny byte-level model, and prints per repeat the generation time,
the rest, and the rest's share; then the median share.

    python benchmarks/bench_rollout.py [--env mas/PlanPath-v0] [--tasks 16] [--k 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="mas/PlanPath-v0")
    parser.add_argument("--env-options", default='{"rows": 5, "cols": 5, "wall_prob": 0.1}')
    parser.add_argument("--tasks", type=int, default=16, help="root envs per rollout")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import json

    import torch

    from mas_trainer.engines import SamplingParams
    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.models import build_tiny_model
    from mas_trainer.rollout import TreeRollout, env_factory

    torch.set_num_threads(args.threads)
    make_env = env_factory(args.env, **json.loads(args.env_options))
    roles = make_env().possible_agents
    model, tok = build_tiny_model("tiny", seed=0)
    rollout = TreeRollout(
        make_env,
        {"shared": TransformersEngine(model, tok, batch_size=256)},
        tok,
        dict.fromkeys(roles, "shared"),
        k=args.k,
        params=SamplingParams(max_tokens=args.max_new_tokens),
        system_message=False,
    )
    # Env-only cost of the same work, for scale: steps and clones with oracle text.
    env = make_env()
    t0 = time.perf_counter()
    n = 0
    for task in range(200):
        env.reset(options={"task_id": task})
        text = env.oracle_action()
        for _ in range(args.k):
            env.clone().step(text)
            n += 1
    per_step_us = (time.perf_counter() - t0) / n * 1e6
    print(f"env only (reset + oracle answer + clone + step, per candidate): {per_step_us:.1f} us")
    shares = []
    for rep in range(args.repeats):
        res = rollout.run(list(range(rep * args.tasks, (rep + 1) * args.tasks)))
        other = res.total_seconds - res.gen_seconds
        shares.append(res.other_share)
        print(
            f"repeat {rep}: {len(res.samples)} samples, generation {res.gen_seconds:.2f} s, "
            f"outside generation {other:.3f} s, share {100 * res.other_share:.2f}%"
        )
    print(
        f"median share of rollout time outside generation: {100 * statistics.median(shares):.2f}%"
        f" (target <= 5%)"
    )


if __name__ == "__main__":
    main()
