"""The 7x7 `mas/PlanPathCode-v2` frontier as a picture, from the shipped results file.

One pair of bars per team design (E to M): its held-out success after the warm start and after
its last RL step; beside them the controls, the tool alone + GRPO and the single agent without
code (3,000, 6,000 and 7,500 warm-start steps; E and F are beside the 1,200-step tool), and as lines
the tool alone + GRPO's best and the two-member ceiling (levels either the tool alone or the
single agent solves). One seed, the first 100 validation levels, greedy.

    python experiments/plot_v2_frontier.py [--results experiments/results/v2-7x7/seed-0.json]
        [--out docs/img/v2_7x7_frontier.png]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# (label, warm-start run, the run with its last RL step): the order of the bars. E and F use the
# 1,200-step tool; the others the 3,000-step one.
BARS = (
    ("tool alone\n3,000", "t7b", "t7b_rl"),
    ("single\n3,000", "s7b", "s7b_rl"),
    ("single\n6,000", "s7d", "s7d_rl"),
    ("single\n7,500", "s7e", "s7e"),
    ("E", "e7", "e7"),
    ("F", "f7", "f7_rl"),
    ("G", "g7", "g7"),
    ("H", "h7", "h7_rl2"),  # h7_rl2 goes on from h7_rl's last checkpoint
    ("I", "i7", "i7_rl"),
    ("J", "j7", "j7_rl"),
    ("K", "k7", "k7_rl"),
    ("L", "l7", "l7_rl"),
    ("M", "m7", "m7"),
)
CEILING = 0.89  # tool alone or single agent (3,000 steps each): experiments/v2_overlap.py


def bar_values(runs: dict[str, Any]) -> list[tuple[str, float, float]]:
    """``(label, warm start, after its last RL step)`` for each of :data:`BARS` in ``runs``."""
    out = []
    for label, warm, rl in BARS:
        warm_curve = runs[warm]["validation_success_by_rl_step"]
        rl_curve = runs[rl]["validation_success_by_rl_step"]
        out.append((label, warm_curve["0"], list(rl_curve.values())[-1]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default="experiments/results/v2-7x7/seed-0.json")
    parser.add_argument("--out", default="docs/img/v2_7x7_frontier.png")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = json.loads(Path(args.results).read_text())["runs"]
    values = bar_values(runs)
    x = range(len(values))
    fig, ax = plt.subplots(figsize=(10, 4.2))
    ax.bar([i - 0.2 for i in x], [100 * v[1] for v in values], 0.4, label="warm start")
    ax.bar([i + 0.2 for i in x], [100 * v[2] for v in values], 0.4, label="after its last RL step")
    best_tool = 100 * max(runs["t7b_rl"]["validation_success_by_rl_step"].values())
    ax.axhline(
        best_tool, color="grey", ls="--", lw=1, label=f"tool alone + GRPO, best ({best_tool:.0f}%)"
    )
    ax.axhline(100 * CEILING, color="black", ls=":", lw=1, label="either member solves (89%)")
    ax.axvline(3.5, color="lightgrey", lw=1)
    ax.set_xticks(list(x), [v[0] for v in values])
    ax.set_ylim(0, 115)
    ax.set_ylabel("validation success (%)")
    ax.set_title("mas/PlanPathCode-v2 7x7: controls (left) and teams E-M, one seed, 100 levels")
    ax.legend(loc="upper left", fontsize=8, ncol=4)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
