"""Design L on 7x7 `mas/PlanPathCode-v2`, seed by seed, as a picture, from the shipped results.

One group of bars per seed, then the seeds pooled: the test levels (200 a seed, played once)
solved by the tool alone, by the single agent without code with the team's planner budget, and
by the team, each at the stage its validation levels chose (``v2_chain.comparisons``), with 95%
Wilson intervals. The counts are the paired comparisons' own (``v2_chain.comparison``).

    python experiments/plot_v2_seeds.py [--results experiments/results/v2-7x7/seed-*.json]
        [--out docs/img/v2_7x7_seeds.png]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from v2_chain import comparison, comparisons  # a script beside this one

from mas_trainer.eval.play import wilson_interval

HERE = Path(__file__).resolve().parent
PLAYERS = ("tool alone", "single agent", "team")


def seed_counts(result: dict[str, Any], episodes: int = 200) -> tuple[int, dict[str, int]]:
    """``(levels, {player: test levels solved})`` of one seed's results file: the team against
    each control on the test split, each at its validation-chosen stage."""
    got: dict[str, int] = {}
    levels = 0
    for first, first_mode, second, second_mode in comparisons(result["runs"]):
        line = comparison(
            result["test_split_once"], first, second, (first_mode, second_mode), "test", episodes
        )
        if line is None:
            raise ValueError(
                f"seed {result.get('seed', 0)}: no test line for {first} against {second}; "
                "run experiments/v2_chain.py for that seed to its end"
            )
        levels, team, control = line[0], line[1], line[2]
        got["team"] = team
        got["tool alone" if second_mode == "tool" else "single agent"] = control
    return levels, got


def groups(results: list[dict[str, Any]]) -> list[tuple[str, int, dict[str, int]]]:
    """``(label, levels, {player: solved})``: each seed, then the seeds pooled."""
    out = []
    for result in sorted(results, key=lambda r: r.get("seed", 0)):
        levels, got = seed_counts(result)
        out.append((f"seed {result.get('seed', 0)}", levels, got))
    pooled = {p: sum(g[2][p] for g in out) for p in PLAYERS}
    out.append((f"pooled ({len(out)} seeds)", sum(g[1] for g in out), pooled))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--results",
        nargs="+",
        default=sorted(str(p) for p in HERE.glob("results/v2-7x7/seed-*.json")),
    )
    parser.add_argument("--out", default="docs/img/v2_7x7_seeds.png")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = groups([json.loads(Path(p).read_text()) for p in args.results])
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.27
    for j, player in enumerate(PLAYERS):
        xs = [i + (j - 1) * width for i in range(len(bars))]
        rates = [100 * got[player] / n for _, n, got in bars]
        low_high = [wilson_interval(got[player], n) for _, n, got in bars]
        errors = [
            [r - 100 * lo for r, (lo, _) in zip(rates, low_high, strict=True)],
            [100 * hi - r for r, (_, hi) in zip(rates, low_high, strict=True)],
        ]
        ax.bar(xs, rates, width, yerr=errors, capsize=2, label=player)
        for x, r in zip(xs, rates, strict=True):
            ax.text(x, 2, f"{r:.1f}", ha="center", fontsize=6, color="white")
    ax.axvline(len(bars) - 1.5, color="lightgrey", lw=1)
    ax.set_xticks(range(len(bars)), [label for label, *_ in bars])
    ax.set_ylim(0, 110)
    ax.set_ylabel("test success (%), 95% Wilson interval")
    ax.set_title(
        "mas/PlanPathCode-v2 7x7, design L: test levels solved (200 per seed, played once)"
    )
    ax.legend(loc="upper left", fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
