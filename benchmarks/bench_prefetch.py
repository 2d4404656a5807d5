"""Tree-rollout step on a code env with and without ``prefetch``, measured side by side.

One tree step = a root's K clones, each stepped with one candidate tool reply (a program run in
the sandbox). With prefetch the rollout first hands the K replies to ``env.prefetch``, which runs
their programs in one pooled sandbox call; without it each clone's step runs its own program, one
after the other. The candidates are K copies of the env's oracle program that differ by a
comment: distinct programs never run before (cold cache), as sampled ones are, each doing the
solver's work. Every root is a fresh env. The two arms are interleaved (their order alternates per
repeat); the script prints each repeat's time per step and the median ratio.

    python benchmarks/bench_prefetch.py [--env mas/PlanPathCode-v0] [--k 4] [--roots 6]
        [--repeats 5]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

_drawn = itertools.count()


def candidates(oracle: str, k: int) -> list[str]:
    """K variants of the oracle reply whose programs differ only by a trailing comment.

    The comment is new on every call: some envs (Code-v0) keep a process-wide result cache, and
    a program run before (in another arm or repeat) would be a cache hit.
    """
    head, fence, tail = oracle.rpartition("\n```")
    if not fence:
        raise SystemExit("the oracle reply has no closing ``` fence; is this a code env?")
    return [f"{head}\n# candidate {next(_drawn)}{fence}{tail}" for _ in range(k)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="mas/PlanPathCode-v0", help="a code-running env id")
    parser.add_argument(
        "--agent", help="the role whose replies are programs (default: tool, or coder in Code-v0)"
    )
    parser.add_argument("--k", type=int, default=4, help="candidates per tree step")
    parser.add_argument("--roots", type=int, default=6, help="tree steps (fresh roots) per arm")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import mas_envs
    from mas_envs.sandbox import isolation
    from mas_trainer.rollout import TreeRollout

    def make_env():
        return mas_envs.make(args.env)

    probe = make_env()
    agent = args.agent or ("tool" if "tool" in probe.possible_agents else "coder")
    task_ids = list(probe.task_ids("train")[: args.roots])
    arms = {
        name: TreeRollout(make_env, {}, None, {}, k=args.k, params=None, prefetch=flag)
        for name, flag in (("prefetch", True), ("no prefetch", False))
    }

    def roots() -> list[tuple[object, list[str]]]:
        out = []
        for task in task_ids:
            env = make_env()
            env.reset(options={"task_id": task})
            while env.agent_selection != agent:  # another role speaks first
                env.step(env.oracle_action())
            out.append((env, candidates(env.oracle_action(agent), args.k)))
        return out

    print(f"{args.env} ({agent}), K={args.k}, {args.roots} steps per arm, sandbox: {isolation()}")
    rewards = {}
    for name, rollout in arms.items():  # warm up (imports, the sandbox's first start)
        env, texts = roots()[0]
        rewards[name] = [b.rewards[agent] for b in rollout.step_branches(env, texts)]
    if rewards["prefetch"] != rewards["no prefetch"]:
        raise SystemExit(f"prefetch changed the rewards: {rewards}")
    ratios = []
    for rep in range(args.repeats):
        order = list(arms) if rep % 2 == 0 else list(arms)[::-1]
        per_step = {}
        for name in order:
            work = roots()
            t0 = time.perf_counter()
            for env, texts in work:
                arms[name].step_branches(env, texts)
            per_step[name] = (time.perf_counter() - t0) / len(work)
        ratios.append(per_step["no prefetch"] / per_step["prefetch"])
        print(
            f"repeat {rep}: per tree step {1e3 * per_step['no prefetch']:.0f} ms without prefetch, "
            f"{1e3 * per_step['prefetch']:.0f} ms with; ratio {ratios[-1]:.2f}x"
        )
    print(f"median speedup of a tree step with prefetch: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
