"""Two rows of ``compare_baselines.py`` compared episode by episode, with an exact McNemar test.

Every row of a seed is evaluated on the same held-out tasks (the first N of the test split,
greedy), so the two rows' episodes pair up by task: both solved it, neither did, or only one. A
row's success rate alone is noisy (a 95% interval of +-3-7 points at 200 episodes), and so is the
difference of two rates taken apart; the pairs remove the tasks' own difficulty from the
comparison. The exact McNemar test counts only the discordant pairs: with no difference between
the rows, a task solved by one row only is equally likely to be either row's, so the count of
row A's wins among the discordant pairs is Binomial(discordant, 1/2).

This script replays each row's final checkpoint with ``mas-eval --env``, checks that
the replay reproduces the success the row's result file recorded, and prints one line per seed
and the pooled test over all seeds' pairs.

    python experiments/paired_episodes.py --out-dir runs/compare5 --seed 0 1 2 3 4 \
        --rows mas-per-role mas-parallel-prompt
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from mas_trainer.eval.cli import main as eval_main


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: P(a count at least this lopsided | Binomial(n, 1/2))."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(a_only, b_only) + 1)) / 2**n
    return min(1.0, 2 * tail)


def replay(result_file: Path) -> list[int]:
    """Per-task success (0/1) of a row's final checkpoint on the row's own held-out tasks, played
    as ``mas-eval`` plays a run (its token limit, system message and env settings)."""
    res: dict[str, Any] = json.loads(result_file.read_text())
    cfg = res["config"]
    if not res.get("checkpoint"):
        raise SystemExit(f"{result_file} has no checkpoint to replay (the swapped row?)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        with contextlib.redirect_stdout(io.StringIO()):  # its summary line: the table says it
            eval_main([
                "--env", cfg["env"]["id"], "--mode", cfg["env"]["mode"],
                "--env-options", json.dumps(cfg["env"]["options"]),
                "--policy", res["checkpoint"],
                "--episodes", str(cfg["eval_episodes"]), "--split", cfg["eval_split"],
                "--output", str(out),
            ])  # fmt: skip
        wins: list[int] = json.loads(out.read_text())["episode_success"]
    if sum(wins) / len(wins) != res["success_final"]:
        raise SystemExit(
            f"{result_file}: the replay solved {sum(wins)} of {len(wins)}, the run recorded "
            f"{res['success_final']:.1%}; compare on the machine and commit that ran it"
        )
    return wins


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", default="runs/compare", help="compare_baselines' --out-dir")
    parser.add_argument("--preset", default="plan-path-tiny")
    parser.add_argument("--seed", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--rows", nargs=2, default=["mas-per-role", "mas-parallel-prompt"], metavar=("A", "B")
    )
    args = parser.parse_args(argv)
    a, b = args.rows
    print(f"| seed | {a} only | {b} only | both | neither | {a} - {b}, points | exact McNemar p |")
    print("|---|---|---|---|---|---|---|")
    total = [0, 0, 0, 0]
    for seed in args.seed:
        rows = Path(args.out_dir) / args.preset / f"seed-{seed}" / "rows"
        wa, wb = replay(rows / f"{a}.json"), replay(rows / f"{b}.json")
        pairs = Counter(zip(wa, wb, strict=True))
        counts = [pairs[1, 0], pairs[0, 1], pairs[1, 1], pairs[0, 0]]  # a only, b only, both, none
        total = [t + c for t, c in zip(total, counts, strict=True)]
        diff = 100 * (counts[0] - counts[1]) / len(wa)
        p = mcnemar_exact(counts[0], counts[1])
        print(f"| {seed} | {' | '.join(map(str, counts))} | {diff:+.1f} | {p:.3g} |", flush=True)
    diff = 100 * (total[0] - total[1]) / sum(total)
    p = mcnemar_exact(total[0], total[1])
    print(f"| all ({sum(total)} pairs) | {' | '.join(map(str, total))} | {diff:+.1f} | {p:.3g} |")


if __name__ == "__main__":
    main()
