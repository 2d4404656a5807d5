"""The paper's reasoner-count scaling: a math board's accuracy against the number of reasoners.

    mas-eval --reasoner-scaling aime24 --policy P --data data --reasoners 1 2 3 4 --output runs/s

The paper reports that more reasoners in the math team raised AIME24 accuracy steadily. This
plays the board (default ``aime24``) once per team size, the tool agent and ``n`` reasoners
(``mas/Math-v*``'s ``n_reasoners``; the team's answer is the largest group of agreeing
reasoners), with one policy loaded once: a model plays every reasoner, and a run trained with one
``reasoner`` lends that policy to ``reasoner_0`` ... ``reasoner_{n-1}``. It writes, under
``--output``:

* ``reasoners-<n>.json.gz``: the result file of each team size (``env_kwargs`` records
  ``n_reasoners``, so these are experiments, not leaderboard entries);
* ``scaling.json``: per team size the accuracy, its 95% Wilson interval and the file;
* ``scaling.png``: the figure (accuracy with its interval against the number of reasoners).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mas_envs.optional import require
from mas_trainer.eval.actors import resolve_policy
from mas_trainer.eval.suite import BOARDS, play_board, result_file, save_result
from mas_trainer.outputs import find_run

__all__ = ["plot_scaling", "reasoner_scaling"]


def reasoner_scaling(
    board_name: str,
    policy: str,
    reasoners: Sequence[int],
    out_dir: str | Path,
    *,
    data_dir: str | Path | None = None,
    episodes: int | None = None,
    prompts: str = "hash",
    command: Sequence[str] | None = None,
    **policy_options: Any,
) -> dict[str, Any]:
    """Play ``board_name`` with teams of each size in ``reasoners``; write results and figure.

    Args:
        board_name: A math board of :data:`~mas_trainer.eval.suite.BOARDS`.
        policy: The policy string (:func:`~mas_trainer.eval.actors.resolve_policy`).
        reasoners: Team sizes.
        out_dir: The folder to write to.
        data_dir: Where the data boards' prepared files are.
        episodes: Play only the first N tasks.
        prompts: ``"hash"`` or ``"full"`` prompt logs.
        command: The command line to record.
        **policy_options: More :func:`~mas_trainer.eval.actors.resolve_policy` arguments
            (``max_new_tokens`` is needed by model policies).

    Returns:
        The ``scaling.json`` summary.

    Raises:
        ValueError: The board is not a math board, or a team size is below 1.
    """
    if board_name not in BOARDS:
        raise KeyError(f"no board {board_name!r}; boards: {sorted(BOARDS)}")
    board = BOARDS[board_name].resolve(data_dir)
    if not board.env_id.startswith("mas/Math-"):
        raise ValueError(f"reasoner scaling needs a math board, not {board_name!r}")
    if not reasoners or min(reasoners) < 1:
        raise ValueError(f"team sizes must be >= 1, got {list(reasoners)}")
    sizes = sorted(set(reasoners))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    widest = list(board.make_env("mas", n_reasoners=max(sizes)).possible_agents)
    # A run trained with one reasoner lends that policy to every reasoner of a larger team.
    run = find_run(policy)
    role_map = (
        {a: "reasoner" for a in widest if a.startswith("reasoner_")}
        if run is not None and run.policy is None
        else None
    )
    setup = resolve_policy(policy, widest, role_map=role_map, **policy_options)
    points = []
    for n in sizes:
        res = play_board(
            board,
            setup.act,
            mode="mas",
            episodes=episodes,
            prompts=prompts,
            env_kwargs={"n_reasoners": n},
        )
        path = save_result(
            result_file(f"{policy} x{n}", setup, [res], prompts=prompts, command=command),
            out / f"reasoners-{n}.json.gz",
        )
        a = res["aggregate"]
        points.append(
            {
                "reasoners": n,
                "success": a["success"],
                "ci95": a["ci95"],
                "successes": a["successes"],
                "episodes": a["episodes"],
                "turns_mean": a["turns_mean"],
                "file": path.name,
            }
        )
    summary: dict[str, Any] = {
        "board": board_name,
        "env_id": board.env_id,
        "policy": policy,
        "points": points,
    }
    if board.data:
        summary["data"] = board.data_record()
    (out / "scaling.json").write_text(json.dumps(summary, indent=1) + "\n")
    plot_scaling(summary, out / "scaling.png")
    return summary


def plot_scaling(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Accuracy (%) with its 95% interval against the number of reasoners, as a PNG."""
    matplotlib = require("matplotlib", purpose="the reasoner-scaling figure")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = summary["points"]
    xs = [p["reasoners"] for p in pts]
    ys = [100 * p["success"] for p in pts]
    lo = [100 * (p["success"] - p["ci95"][0]) for p in pts]
    hi = [100 * (p["ci95"][1] - p["success"]) for p in pts]
    fig, ax = plt.subplots(figsize=(5.2, 3.6), dpi=120)
    ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=4, color="#4c78a8")
    for x, y in zip(xs, ys, strict=True):
        ax.annotate(f"{y:.1f}%", (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
    ax.set_xticks(xs)
    ax.set_xlabel("reasoners in the team")
    ax.set_ylabel(f"{summary['board']} accuracy (%)")
    ax.set_ylim(0, 100)
    n = pts[0]["episodes"] if pts else 0
    ax.set_title(
        f"{summary['board']}: accuracy vs. reasoners\n{summary['policy']} "
        f"(n={n}, greedy; bars: 95% Wilson interval)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)
