"""Draw the docs' learning curves from real run folders (never by hand).

For each run folder given, writes ``docs/img/<name>-success.png`` (held-out and rollout success by
phase, `mas_trainer.plots.success_figure`) and ``docs/img/<name>-warmstart-loss.png``, where
``<name>`` is ``--name`` (default: the folder's name), and prints the run's summary so the text
around the figure can quote it. The trainer guide, the results page and the home page show the
default run's figures; regenerate them after a new default run with::

    mas-train --run.name default-seed0                      # the default preset, seed 0
    python scripts/docs_figures.py runs/default-seed0 --name default-run \\
        --title "mas-train (default preset), seed 0"
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (runs/<name>)")
    parser.add_argument("--name", help="file name stem (one run only; default: the folder name)")
    parser.add_argument("--title", help="the figures' title (default: the file name stem)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args(argv)
    if args.name and len(args.runs) > 1:
        parser.error("--name takes one run folder")
    import matplotlib.pyplot as plt

    from mas_trainer.plots import success_figure, warmstart_loss_figure

    args.out.mkdir(parents=True, exist_ok=True)
    for run in args.runs:
        if not (run / "metrics.jsonl").is_file():
            raise SystemExit(f"{run} is not a run folder (no metrics.jsonl)")
        stem = args.name or run.name
        title = args.title or stem
        figures = {
            f"{stem}-success.png": success_figure(run, title),
            f"{stem}-warmstart-loss.png": warmstart_loss_figure(run, title),
        }
        for file, fig in figures.items():
            if fig is not None:
                fig.savefig(args.out / file, dpi=110)
                plt.close(fig)
                print(f"wrote {args.out / file}")
        summary = run / "summary.json"
        if summary.is_file():
            print(json.dumps(json.loads(summary.read_text()), indent=1))


if __name__ == "__main__":
    main()
