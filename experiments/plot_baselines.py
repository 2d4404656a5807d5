"""Plots of the baseline comparison (``compare_baselines.py``'s result files) for the docs.

Writes two PNGs:

* ``<prefix>_rows.png``: held-out success of every row, the mean over seeds with its 95%
  t-interval, and each seed as a dot;
* ``<prefix>_curves.png``: held-out success (greedy) of the ``--curves`` rows (by default the
  ``mas-per-role`` row, the default ``mas-train`` run, and ``single-grpo``) against the RL step,
  one line per seed, starting at their warm starts (step 0) and, where the runs evaluated every
  ``eval.every`` steps, the points in between.

    python experiments/plot_baselines.py [--out-dir runs/compare] [--preset plan-path-tiny]
        [--seed 0 1 2 3 4] [--prefix docs/img/plan_path_tiny] [--curves ROW ...] [--note TEXT]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from compare_baselines import ROWS, mean_ci


def _rows(out_dir: Path, preset: str, seeds: list[int]) -> dict[str, list[float]]:
    values: dict[str, list[float]] = {}
    for seed in seeds:
        for key in ROWS:
            f = out_dir / preset / f"seed-{seed}" / "rows" / f"{key}.json"
            if f.is_file():
                values.setdefault(key, []).append(json.loads(f.read_text())["success_final"])
    return values


def _curve(run_dir: Path) -> list[tuple[int, float]]:
    pts = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("phase") == "warmstart" and "eval_warmstart/success" in r:
            pts.append((0, r["eval_warmstart/success"]))
        elif r.get("phase") in ("rl", "final") and "eval/success" in r:
            pts.append((r["step"], r["eval/success"]))
    return sorted(set(pts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default="runs/compare")
    parser.add_argument("--preset", default="plan-path-tiny")
    parser.add_argument("--seed", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--prefix", default="docs/img/plan_path_tiny")
    parser.add_argument(
        "--curves",
        nargs="+",
        choices=[k for k in ROWS if ROWS[k].policy_map is not None],  # rows with an RL phase
        default=["mas-per-role", "single-grpo"],
        help="rows whose held-out success is drawn against the RL step",
    )
    parser.add_argument("--note", default="", help="added to both titles (e.g. an override)")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(args.out_dir)
    values = _rows(out_dir, args.preset, args.seed)
    keys = [k for k in ROWS if k in values]
    fig, ax = plt.subplots(figsize=(9.5, 3.8))
    for i, key in enumerate(keys):
        mean, low, high = mean_ci(values[key])
        team = key.startswith("mas")
        ax.bar(i, 100 * mean, color="#4c72b0" if team else "#999999", alpha=0.8)
        err = [[100 * (mean - max(low, 0.0))], [100 * (min(high, 1.0) - mean)]]
        ax.errorbar(i, 100 * mean, yerr=err, color="black", capsize=4)
        ax.scatter([i] * len(values[key]), [100 * v for v in values[key]], color="black", s=10,
                   zorder=3)  # fmt: skip
        # The mean at the bar's foot, where no error bar or seed dot covers it; a bar too short
        # for it gets it above its highest seed and interval.
        inside = mean > 0.08
        y = 2 if inside else 100 * max(min(high, 1.0), *values[key]) + 2
        ax.text(i, y, f"{100 * mean:.1f}%", ha="center", va="bottom", fontsize=8,
                color="white" if inside else "black", fontweight="bold")  # fmt: skip
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([ROWS[k].label.replace(" (", "\n(") for k in keys], fontsize=7)
    ax.set_ylabel("held-out success (%), greedy")
    ax.set_ylim(0, 105)
    n = len(next(iter(values.values()))) if values else 0
    ax.set_title(
        f"{args.preset}{args.note}: mean of {n} seeds, 95% t-interval, dots = seeds", fontsize=9
    )
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    Path(args.prefix).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(f"{args.prefix}_rows.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    palette = {"mas-per-role": "#4c72b0", "single-grpo": "#999999", "mas-parallel": "#dd8452",
               "mas-parallel-prompt": "#55a868", "mas-shared": "#8172b3"}  # fmt: skip
    for key in args.curves:
        color, label = palette[key], ROWS[key].label  # the legend names a row once
        for seed in args.seed:
            run = out_dir / args.preset / f"seed-{seed}" / key
            if (run / "metrics.jsonl").is_file():
                xs, ys = zip(*_curve(run), strict=True)
                ax.plot(xs, [100 * y for y in ys], marker="o", ms=3, color=color, alpha=0.7,
                        label=label)  # fmt: skip
                label = None
    ax.set_xlabel("RL step (0 = after the warm start)")
    ax.set_ylabel("held-out success (%), greedy")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{args.preset}{args.note}: one line per seed", fontsize=9)
    fig.tight_layout()
    fig.savefig(f"{args.prefix}_curves.png", dpi=110)
    plt.close(fig)
    print(f"wrote {args.prefix}_rows.png and {args.prefix}_curves.png")


if __name__ == "__main__":
    main()
