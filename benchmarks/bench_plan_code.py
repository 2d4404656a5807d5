"""What a plan-code tool step costs (``tool_mode="code"``), and what the cache and prefetch save.

For each game's code id (``mas/SokobanCode-v0``, ``mas/SudokuCode-v0``, ``mas/PlanPathCode-v0``),
measured side by side in one run, medians of ``--repeats`` rounds:

* plan-mode tool step (the v0 id: parse + simulate), the reference;
* code-mode tool step with a program the env has run on this state before (a cache hit: extract
  + look up + parse + simulate) and the ratio to the plan-mode step;
* code-mode tool step with a new program each time (the oracle program plus a unique comment: one
  sandbox run) and the ratio to the cache hit;
* four tree branches with new programs (K = 4, the paper's), stepped one by one, against
  ``env.prefetch(texts)`` (one pooled sandbox call) then the four steps: the speed-up.

    nice -n 10 python benchmarks/bench_plan_code.py [--repeats 5] [--ids mas/SokobanCode-v0]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
from collections.abc import Callable

import mas_envs

_counter = itertools.count()
IDS = ["mas/SokobanCode-v0", "mas/SudokuCode-v0", "mas/PlanPathCode-v0"]


def _median_s(fn: Callable[[], object], calls: int, repeats: int) -> float:
    fn()  # warm up (and fill the cache for the cached rows)
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls)
    return statistics.median(rounds)


def _fresh(text: str) -> str:
    """The same program with a unique comment: a new cache key, the same work."""
    return text.replace("```python\n", f"```python\n# variant {next(_counter)}\n", 1)


def bench(env_id: str, repeats: int) -> None:
    plan = mas_envs.make(env_id.replace("Code", ""), split="test")
    plan.reset(seed=0)
    plan_text = plan.oracle_action("tool")
    env = mas_envs.make(env_id, split="test")
    env.reset(seed=0)
    code_text = env.oracle_action("tool")

    plan_step = _median_s(lambda: plan.clone().step(plan_text), 500, repeats)
    hit = _median_s(lambda: env.clone().step(code_text), 500, repeats)
    miss = _median_s(lambda: env.clone().step(_fresh(code_text)), 4, repeats)

    def one_by_one() -> None:
        for text in [_fresh(code_text) for _ in range(4)]:
            env.clone().step(text)

    def prefetched() -> None:
        texts = [_fresh(code_text) for _ in range(4)]
        env.prefetch(texts)
        for text in texts:
            env.clone().step(text)

    k_seq = _median_s(one_by_one, 2, repeats)
    k_pre = _median_s(prefetched, 2, repeats)
    print(f"\n{env_id}")
    print(f"  plan-mode tool step (v0)            {plan_step * 1e6:10.1f} us")
    print(
        f"  code tool step, cached program      {hit * 1e6:10.1f} us   "
        f"x{hit / plan_step:.1f} the plan-mode step"
    )
    print(
        f"  code tool step, new program         {miss * 1e3:10.1f} ms   "
        f"x{miss / hit:,.0f} the cached step"
    )
    print(f"  K=4 new programs, one by one        {k_seq * 1e3:10.1f} ms")
    print(
        f"  K=4 new programs, prefetch + steps  {k_pre * 1e3:10.1f} ms   "
        f"x{k_seq / k_pre:.2f} faster"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ids", nargs="*", default=[i for i in IDS if i in mas_envs.list_envs()])
    args = ap.parse_args()
    from mas_envs.sandbox import isolation

    print(f"sandbox isolation: {isolation()}; CPUs: {len(os.sched_getaffinity(0))}")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    for env_id in args.ids:
        bench(env_id, args.repeats)
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
