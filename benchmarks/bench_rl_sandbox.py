"""The sandbox's share of an RL step on a code-tool run, cold vs the warm pool, in one run.

Trains ``--preset`` (default ``plan-path-tiny``, the CPU default run) on ``--env`` (default
``mas/PlanPathCode-v1``, the default run's env: the tool agent answers with a program, run in the
sandbox for every candidate) with one warm start, then ``--steps`` RL steps that alternate
between cold runs (``MAS_SANDBOX_POOL=off``) and the warm pool, so that both see the same model,
the same load and the same kind of programs. For every step it records the step's time
(``perf/step_s``), the wall time of the step's sandbox calls (``run_python``/``run_many``, as
the caller waits for them) and how many programs ran; it prints the medians per arm and the
sandbox's share of the step.

    python benchmarks/bench_rl_sandbox.py [--steps 12] [--preset plan-path-tiny]
        [--env mas/PlanPathCode-v1] [-- --optim.warmstart_steps 400 ...]

Extra arguments after ``--`` are ``mas-train`` overrides.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from mas_envs import sandbox
from mas_envs.sandbox import pool


class _Meter:
    """Wall time of the sandbox calls, per RL step (the step index is set by the rollout)."""

    def __init__(self) -> None:
        self.seconds: dict[int, float] = {}
        self.programs: dict[int, int] = {}
        self.step = -1

    def wrap(self, fn, count):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if self.step >= 0:
                    self.seconds[self.step] = self.seconds.get(self.step, 0.0) + (
                        time.perf_counter() - t
                    )
                    self.programs[self.step] = self.programs.get(self.step, 0) + count(args)

        return timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="plan-path-tiny")
    ap.add_argument("--env", default="mas/PlanPathCode-v1")
    ap.add_argument("--steps", type=int, default=12, help="RL steps (half cold, half pooled)")
    ap.add_argument("overrides", nargs="*", help="mas-train overrides, after --")
    args = ap.parse_args()

    from mas_trainer import rollout as rollout_mod
    from mas_trainer.config import build_config
    from mas_trainer.train import train

    meter = _Meter()
    sandbox.run_python = meter.wrap(sandbox.run_python, lambda a: 1)
    sandbox.run_many = meter.wrap(sandbox.run_many, lambda a: len(a[0]))
    arms: dict[int, str] = {}
    real_run = rollout_mod.TreeRollout.run

    def run(self, *a, **k):
        prefix = k.get("uid_prefix", "")
        if prefix.endswith("/") and prefix[:-1].isdigit():  # an RL step ("3/"), not an eval
            step = int(prefix[:-1])
            arm = "cold" if step % 2 == 0 else "pool"
            os.environ[pool.ENV_VAR] = "off" if arm == "cold" else "auto"
            arms[step], meter.step = arm, step
        try:
            return real_run(self, *a, **k)
        finally:
            meter.step = -1
            os.environ.pop(pool.ENV_VAR, None)

    rollout_mod.TreeRollout.run = run
    out = tempfile.mkdtemp(prefix="bench-rl-sandbox-")
    cfg = build_config(
        args.preset,
        overrides=[
            f"--env.id={args.env}",
            f"--optim.steps={args.steps}",
            "--eval.episodes=16",
            f"--run.out_dir={out}",
            "--run.name=bench",
            "--run.progress=false",
            *args.overrides,
        ],
    )
    load0 = os.getloadavg()
    t = time.perf_counter()
    train(cfg)
    total = time.perf_counter() - t
    with open(os.path.join(out, "bench", "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    steps = {r["step"]: r for r in rows if "perf/step_s" in r}
    print(f"{args.preset} on {args.env}: {len(steps)} RL steps; isolation {sandbox.isolation()}")
    print(f"load average before {load0[0]:.1f}, after {os.getloadavg()[0]:.1f}; run {total:.0f} s")
    print(f"{'arm':<6}{'step s':>9}{'sandbox s':>11}{'share':>8}{'programs':>10}{'ms/program':>12}")
    for arm in ("cold", "pool"):
        mine = [s for s in steps if arms.get(s - 1) == arm]  # step n logs the rollout of n - 1
        step_s = statistics.median(steps[s]["perf/step_s"] for s in mine)
        box = statistics.median(meter.seconds.get(s - 1, 0.0) for s in mine)
        n = statistics.median(meter.programs.get(s - 1, 0) for s in mine)
        share = statistics.median(
            meter.seconds.get(s - 1, 0.0) / steps[s]["perf/step_s"] for s in mine
        )
        per = 1e3 * box / n if n else float("nan")
        print(f"{arm:<6}{step_s:>9.2f}{box:>11.2f}{share:>8.1%}{n:>10.0f}{per:>12.1f}")


if __name__ == "__main__":
    main()
