"""What one step of ``mas/Math-v0`` costs, and what its caches save, measured side by side.

Prints, in microseconds per call (median of ``--repeats`` rounds):

* reset: a generated problem from a new seed (problem generation + bookkeeping);
* observe: building a reasoner prompt (problem, tool program and output, format);
* reasoner step with an answer the checker has seen (cache hit), against the same step with a
  new answer each time, with math-verify and with the sympy fallback: an integer and a fraction
  (the exact fast path, no parser) and a surd (a wrong one each time: a real parse and compare);
* tool step with a program the env has run before (cache hit), against a new program each time
  (a sandbox run); and four tree branches with new programs, stepped one by one against after
  ``env.prefetch(texts)`` (one pooled sandbox call);
* clone, against ``copy.deepcopy`` of the same env in mid-episode.

Then the ratios (uncached / cached, deepcopy / clone, math-verify / sympy).

    nice -n 10 python benchmarks/bench_math.py [--repeats 5] [--calls 200]
"""

from __future__ import annotations

import argparse
import copy
import itertools
import statistics
import time
from collections.abc import Callable

from mas_envs.math import MathEnv, verify

_counter = itertools.count()


def _median_us(fn: Callable[[], object], calls: int, repeats: int) -> float:
    fn()  # warm up: imports, first-call parser setup, and the caches of the "cached" rows
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def _reasoner_env(problem_id: str) -> MathEnv:
    env = MathEnv(mode="single")
    env.reset(options={"problem_id": problem_id})
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    r, n = args.repeats, args.calls
    rows: dict[str, float] = {}

    env = MathEnv()
    rows["reset (generated problem)"] = _median_us(lambda: env.reset(seed=next(_counter)), n, r)

    env.reset(options={"problem_id": "arith/4/1"})  # gold \frac{7}{11}
    env.step("```python\nprint(7/11)\n```")
    rows["observe (reasoner prompt)"] = _median_us(lambda: env.observe("reasoner"), n, r)

    def reasoner_step(problem_id: str, answer: Callable[[], str]) -> Callable[[], None]:
        base = _reasoner_env(problem_id)

        def step() -> None:
            base.clone().step(f"So the answer is \\boxed{{{answer()}}}")

        return step

    for backend in verify.BACKENDS:
        # The env asks verify.default_backend() which checker to use: point it at each in turn.
        original = verify.default_backend
        verify.default_backend = lambda b=backend: b  # type: ignore[assignment]
        try:
            rows[f"reasoner step, integer, cached [{backend}]"] = _median_us(
                reasoner_step("arith/1/1", lambda: "23"), n, r
            )
            rows[f"reasoner step, integer, new [{backend}]"] = _median_us(
                reasoner_step("arith/1/1", lambda: str(next(_counter))), n, r
            )
            rows[f"reasoner step, fraction, cached [{backend}]"] = _median_us(
                reasoner_step("arith/4/1", lambda: "\\dfrac{14}{22}"), n, r
            )
            rows[f"reasoner step, fraction, new [{backend}]"] = _median_us(
                reasoner_step("arith/4/1", lambda: f"\\dfrac{{{next(_counter)}}}{{22}}"), n, r
            )
            # algebra/5/3: gold \frac{-3 + \sqrt{233}}{8}; these need a real parse and compare.
            rows[f"reasoner step, surd, cached [{backend}]"] = _median_us(
                reasoner_step("algebra/5/3", lambda: "\\dfrac{\\sqrt{233}-3}{8}"), n, r
            )
            rows[f"reasoner step, surd, new [{backend}]"] = _median_us(
                reasoner_step(
                    "algebra/5/3", lambda: f"\\dfrac{{\\sqrt{{233}}-3}}{{8}} + {next(_counter)}"
                ),
                max(n // 10, 5),
                r,
            )
        finally:
            verify.default_backend = original  # type: ignore[assignment]

    tool_env = MathEnv()
    tool_env.reset(options={"problem_id": "arith/1/1"})
    tool_env.clone().step("```python\nprint(56 - 33)\n```")  # warm the cache
    rows["tool step, program cached"] = _median_us(
        lambda: tool_env.clone().step("```python\nprint(56 - 33)\n```"), n, r
    )
    rows["tool step, new program (sandbox run)"] = _median_us(
        lambda: tool_env.clone().step(f"```python\nprint({next(_counter)})\n```"),
        max(n // 20, 5),
        r,
    )

    def k_branches(prefetch: bool, k: int = 4) -> None:
        texts = [f"```python\nprint({next(_counter)})\n```" for _ in range(k)]
        if prefetch:
            tool_env.prefetch(texts)
        for text in texts:
            tool_env.clone().step(text)

    rows["4 tool branches, new programs, one by one"] = _median_us(
        lambda: k_branches(False), max(n // 50, 3), r
    )
    rows["4 tool branches, new programs, prefetch()"] = _median_us(
        lambda: k_branches(True), max(n // 50, 3), r
    )

    env.reset(options={"problem_id": "arith/4/1"})
    env.step("```python\nprint(7/11)\n```")
    rows["clone (mid-episode)"] = _median_us(env.clone, n, r)
    rows["deepcopy (mid-episode)"] = _median_us(lambda: copy.deepcopy(env), max(n // 10, 5), r)

    width = max(map(len, rows))
    for name, us in rows.items():
        print(f"{name:<{width}}  {us:12.1f} us")
    print()
    ratios = {
        "tool step: sandbox run / cached": (
            rows["tool step, new program (sandbox run)"] / rows["tool step, program cached"]
        ),
        "4 tool branches: one by one / prefetch()": (
            rows["4 tool branches, new programs, one by one"]
            / rows["4 tool branches, new programs, prefetch()"]
        ),
        "deepcopy / clone": rows["deepcopy (mid-episode)"] / rows["clone (mid-episode)"],
    }
    for backend in verify.BACKENDS:
        ratios[f"surd check: new / cached [{backend}]"] = (
            rows[f"reasoner step, surd, new [{backend}]"]
            / rows[f"reasoner step, surd, cached [{backend}]"]
        )
    ratios["surd check, new: math-verify / sympy"] = (
        rows["reasoner step, surd, new [math-verify]"] / rows["reasoner step, surd, new [sympy]"]
    )
    for name, ratio in ratios.items():
        print(f"{name:<{width}}  {ratio:12.1f} x")


if __name__ == "__main__":
    main()
