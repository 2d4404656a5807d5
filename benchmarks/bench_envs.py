"""Speed of the game envs beside peers' Sokoban envs from PyPI, measured side by side in one run.

For each of our game envs (``mas/Sokoban-v0``, ``mas/PlanPath-v0``, ``mas/Sudoku-v0``; an env that
is not importable yet is skipped with a note) and each peer (``textarena`` ``Sokoban-v0``,
``gem-llm`` ``game:Sokoban-v0-easy``), in microseconds per call, median over repeats:

* reset: a new level from a new seed;
* step: one action (one move: ``"#### U"`` for ours, ``"[up]"`` for textarena, ``\\boxed{up}``
  for gem) including parsing, applying it, and the next prompt text (``observe`` for ours,
  ``get_observation`` for textarena; gem's ``step`` returns its text). Steps run in episodes of up
  to ``--episode`` moves from fresh levels, the way a rollout uses an env; an episode that ends
  early ends its batch;
* clone: ``env.clone()`` for ours; the peers have no clone, so their figure is ``copy.deepcopy``;
* deepcopy: ``copy.deepcopy`` of the same env in mid-episode.

Run (the numbers in ``docs/benchmarks.md`` come from this)::

    nice -n 10 python benchmarks/bench_envs.py            # ~1 minute
    nice -n 10 python benchmarks/bench_envs.py --quick    # a few seconds, rougher
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Figures from the issue (measured on this machine class; the paper's code is not on PyPI).
PAPER_STEP_US = {"Sokoban": 30.0, "PlanPath": 14.0}
GOALS = "step >= 5x faster than the fastest peer, clone <= 3 us and >= 10x deepcopy, reset < 1 ms"


@dataclass
class Row:
    name: str
    family: str
    reset: float
    step: float
    clone: float
    deepcopy: float
    note: str = ""


def _median_us(batches: list[tuple[float, int]]) -> float:
    return statistics.median(t / n for t, n in batches) * 1e6


def _timed(fn: Callable[[], int]) -> tuple[float, int]:
    """Run ``fn`` (which returns how many calls it made) with the GC off; (seconds, calls)."""
    gc.disable()
    try:
        t0 = time.perf_counter()
        n = fn()
        return time.perf_counter() - t0, n
    finally:
        gc.enable()


def _per_call(fn: Callable[[], Any], calls: int, repeats: int) -> float:
    def batch() -> int:
        for _ in range(calls):
            fn()
        return calls

    return _median_us([_timed(batch) for _ in range(repeats)])


# ---------------------------------------------------------------------------------------- ours


def bench_ours(env_id: str, repeats: int, episode: int, moves_per_action: int = 1) -> Row | str:
    """Our env ``env_id`` in ``mode="single"``; a string says why it was skipped."""
    import mas_envs

    try:
        env = mas_envs.make(env_id, mode="single", max_turns=episode)
    except (ImportError, AttributeError) as e:  # the family is not written yet
        return f"{env_id}: skipped ({type(e).__name__}: {e})"
    agent = env.possible_agents[0]
    env.reset(seed=0)
    if moves_per_action == 1:
        actions = [env.numeric_action_text(agent, a) for a in range(env.numeric_action_count())]
    else:
        letters = "ULDRRDLU"
        actions = [
            "#### " + ", ".join(letters[(i + j) % 8] for j in range(moves_per_action))
            for i in range(8)
        ]
    family = env_id.split("/")[1].split("-")[0]

    seeds = iter(range(10**9))
    reset = _per_call(lambda: env.reset(seed=next(seeds)), 20, repeats)

    starts = []
    for s in range(32):
        e = mas_envs.make(env_id, mode="single", max_turns=episode)
        e.reset(seed=1000 + s)
        starts.append(e)

    def episode_steps(e: Any) -> Callable[[], int]:
        def run() -> int:
            for k in range(episode):
                if e.terminations[agent] or e.truncations[agent]:
                    return k
                e.step(actions[k % len(actions)])
                e.observe(agent)
            return episode

        return run

    step = _median_us(
        [_timed(episode_steps(starts[r % len(starts)].clone())) for r in range(repeats * 10)]
    )

    mid = starts[0].clone()
    mid.step(actions[0])
    clone = _per_call(mid.clone, 500, repeats)
    deep = _per_call(lambda: copy.deepcopy(mid), 20, repeats)
    name = f"{env_id} (ours)"
    if moves_per_action > 1:
        name = f"{env_id} (ours, {moves_per_action}-move answers)"
    return Row(name, family, reset, step, clone, deep)


# --------------------------------------------------------------------------------------- peers


def bench_textarena(repeats: int, episode: int) -> Row | str:
    try:
        import textarena as ta
    except ImportError:
        return "textarena: skipped (pip install textarena, or the 'bench' extra)"
    env = ta.make("Sokoban-v0")
    seeds = iter(range(10**9))
    reset = _per_call(lambda: env.reset(num_players=1, seed=next(seeds)), 10, repeats)
    actions = ["[up]", "[left]", "[down]", "[right]"]
    starts = []
    for s in range(32):
        e = ta.make("Sokoban-v0")
        e.reset(num_players=1, seed=1000 + s)
        starts.append(e)

    def episode_steps(e: Any) -> Callable[[], int]:
        def run() -> int:
            for k in range(episode):
                done, _ = e.step(actions[k % 4])
                e.get_observation()
                if done:
                    return k + 1
            return episode

        return run

    step = _median_us(
        [_timed(episode_steps(copy.deepcopy(starts[r % 32]))) for r in range(repeats * 10)]
    )
    mid = copy.deepcopy(starts[0])
    mid.step("[up]")
    deep = _per_call(lambda: copy.deepcopy(mid), 20, repeats)
    return Row(
        "textarena Sokoban-v0 (6x6, 3 boxes)",
        "Sokoban",
        reset,
        step,
        deep,
        deep,
        "no clone(): clone = deepcopy",
    )


def bench_gem(repeats: int, episode: int) -> Row | str:
    try:
        import gem
    except ImportError:
        return "gem: skipped (pip install gem-llm, or the 'bench' extra)"
    env_id = "game:Sokoban-v0-easy"
    env = gem.make(env_id, max_turns=episode)
    seeds = iter(range(10**9))
    reset = _per_call(lambda: env.reset(seed=next(seeds)), 10, repeats)
    actions = ["\\boxed{up}", "\\boxed{left}", "\\boxed{down}", "\\boxed{right}"]
    starts = []
    for s in range(32):
        e = gem.make(env_id, max_turns=episode)
        e.reset(seed=1000 + s)
        starts.append(e)

    def episode_steps(e: Any) -> Callable[[], int]:
        def run() -> int:
            for k in range(episode):
                _, _, terminated, truncated, _ = e.step(actions[k % 4])
                if terminated or truncated:
                    return k + 1
            return episode

        return run

    step = _median_us(
        [_timed(episode_steps(copy.deepcopy(starts[r % 32]))) for r in range(repeats * 10)]
    )
    mid = copy.deepcopy(starts[0])
    mid.step(actions[0])
    deep = _per_call(lambda: copy.deepcopy(mid), 20, repeats)
    return Row(
        "gem game:Sokoban-v0-easy (6x6, 2 boxes)",
        "Sokoban",
        reset,
        step,
        deep,
        deep,
        "no clone(): clone = deepcopy",
    )


# -------------------------------------------------------------------------------------- report


def report(rows: list[Row], notes: list[str]) -> str:
    head = f"{'env':<46}{'reset us':>10}{'step us':>10}{'clone us':>10}{'deepcopy us':>13}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.name:<46}{r.reset:>10.1f}{r.step:>10.2f}{r.clone:>10.2f}{r.deepcopy:>13.1f}"
            + (f"   ({r.note})" if r.note else "")
        )
    lines += ["", f"Goals: {GOALS}."]
    peers = [r for r in rows if "(ours" not in r.name]
    for r in rows:
        if not r.name.endswith("(ours)"):
            continue
        fam = r.family
        lines.append(f"{r.name}:")
        fam_peers = [p for p in peers if p.family == fam]
        if fam_peers:
            best = min(fam_peers, key=lambda p: p.step)
            lines.append(
                f"  step {best.step / r.step:.1f}x faster than the fastest peer ({best.name}, "
                f"{best.step:.1f} us)"
            )
            best_clone = min(fam_peers, key=lambda p: p.clone)
            lines.append(
                f"  clone {best_clone.clone / r.clone:.1f}x faster than the fastest peer clone "
                f"({best_clone.name}, {best_clone.clone:.1f} us)"
            )
        if fam in PAPER_STEP_US:
            lines.append(
                f"  step {PAPER_STEP_US[fam] / r.step:.1f}x faster than the paper's code "
                f"({PAPER_STEP_US[fam]:.0f} us, the issue's figure, not measured here)"
            )
        lines.append(
            f"  clone {r.deepcopy / r.clone:.0f}x faster than deepcopy of the same env; "
            f"clone <= 3 us: {'yes' if r.clone <= 3 else 'NO'}"
        )
        if fam == "Sokoban":
            lines.append(f"  reset (level generation) < 1 ms: {'yes' if r.reset < 1000 else 'NO'}")
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed batches per figure")
    parser.add_argument("--episode", type=int, default=20, help="steps per episode batch")
    parser.add_argument("--quick", action="store_true", help="3 repeats: a rough figure fast")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else args.repeats
    warnings.filterwarnings("ignore")  # peers warn about their own deprecations
    rows: list[Row] = []
    notes: list[str] = []
    results: list[Row | str] = [
        bench_ours("mas/Sokoban-v0", repeats, args.episode),
        bench_ours("mas/Sokoban-v0", repeats, args.episode, moves_per_action=5),
        bench_textarena(repeats, args.episode),
        bench_gem(repeats, args.episode),
        bench_ours("mas/PlanPath-v0", repeats, args.episode),
        bench_ours("mas/Sudoku-v0", repeats, args.episode),
    ]
    for res in results:
        (rows if isinstance(res, Row) else notes).append(res)  # type: ignore[arg-type]
    print(report(rows, notes))


if __name__ == "__main__":
    main()
