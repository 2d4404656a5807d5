"""The pictures of a run folder: success by phase, the warm start's loss, rewards per role.

`plot_run(run_dir)` reads ``metrics.jsonl`` and ``config.json`` and writes ``plots/*.png``:

- ``success.png``: held-out success (greedy decoding on the test split: before training, after
  the supervised warm start, at every intermediate evaluation, after AT-GRPO), a dot with its
  95% Wilson interval per evaluation, labelled as the terminal prints it, with the stored
  baselines of the config as lines; below it, on its own panel since it is a training-time
  number, rollout success (best of K tree branches on training tasks, one point per RL step);
  the left part of the axis is the warm start (its steps per policy), the right the RL steps;
- ``warmstart_loss.png``: the warm start's SFT loss per step;
- ``reward_per_role.png``, ``return_per_role.png``: rollout curves per RL step;
- ``turns.png`` (from 0 to the turn limit, which is drawn) and ``format_errors.png`` (the
  share of actions that did not parse), per RL step.

Every figure is titled with the run name and the env, and its step axis has integer ticks.
`scripts/docs_figures.py` draws the docs' learning curves with the same functions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mas_trainer.baselines import CONTROLS
from mas_trainer.eval.play import wilson_interval as wilson

__all__ = ["plot_run", "success_figure", "warmstart_loss_figure"]


def _read(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from mas_trainer.outputs import read_metrics

    records = read_metrics(run_dir / "metrics.jsonl")
    config_path = run_dir / "config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    return records, config


def _title(run_dir: Path, config: dict[str, Any], what: str, name: str | None = None) -> str:
    env = config.get("env", {})
    env_id = env.get("id", "")
    options = env.get("options") or {}
    board = f" {options['rows']}x{options['cols']}" if {"rows", "cols"} <= set(options) else ""
    model = config.get("model", {}).get("name", "")
    detail = ", ".join(x for x in (f"{env_id}{board}".strip(), model) if x)
    return f"{name or run_dir.name}: {what}" + (f"\n{detail}" if detail else "")


def _held_out(
    records: Sequence[dict[str, Any]], rl_steps: int, start: float
) -> list[tuple[float, float, Any]]:
    """(x, success, (low, high)) of every held-out evaluation, on the success figure's x axis
    (``start``: where the evaluation before training is drawn)."""
    points = []
    for r in records:
        at = {"init": start, "final": float(rl_steps)}.get(r["phase"], float(r["step"]))
        for prefix, x in (
            ("eval/", at),
            ("eval_warmstart/", 0.0),
        ):
            if isinstance(r.get(prefix + "success"), (int, float)):
                p, n = r[prefix + "success"], r.get(prefix + "episodes", 0)
                # ci95_*: since issue 10; success_ci_*: runs made before it
                low = r.get(prefix + "ci95_low", r.get(prefix + "success_ci_low"))
                high = r.get(prefix + "ci95_high", r.get(prefix + "success_ci_high"))
                band = (low, high) if low is not None and high is not None else wilson(p * n, n)
                points.append((x, p, band))
    points.sort(key=lambda t: t[0])
    merged: dict[float, tuple[float, float, Any]] = {}
    for point in points:  # the final eval and a last periodic eval can share a step
        merged[point[0]] = point
    return list(merged.values())


def _pct(x: float) -> str:
    """A rate as the terminal prints it: 25.5%, never a rounded 26%."""
    return f"{100 * x:.1f}%"


def _baselines(run_dir: Path) -> list[tuple[str, float]]:
    """(label, mean success) of the stored baselines the run's summary prints (single agent +
    GRPO and tool alone + GRPO at the same budget, ``mas_trainer/baselines.json``), when the
    config was measured."""
    path = run_dir / "summary.json"
    if not path.is_file():
        return []
    rows = json.loads(path.read_text()).get("baselines", {}).get("rows", {})
    return [
        (f"{rows[key]['label']}, mean of {len(rows[key]['seeds'])} seeds", float(rows[key]["mean"]))
        for key in CONTROLS
        if key in rows
    ]


def _sft_steps(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Warm-start steps per policy (``""``: the one policy)."""
    steps: dict[str, int] = {}
    for r in records:
        for policy in _sft_losses(r):
            steps[policy] = max(steps.get(policy, 0), int(r["step"]))
    return steps


def success_figure(run_dir: str | Path, name: str | None = None) -> Any:
    """The success figure of a run folder (a matplotlib ``Figure``; see the module docstring);
    ``name`` replaces the run folder's name in the title.

    Top panel: held-out success, one dot with its 95% Wilson interval per evaluation (nothing is
    drawn between evaluations: nothing was measured there), labelled exactly as the terminal
    prints it, and the stored baselines of this config as horizontal lines. Bottom panel, apart
    because it is a training-time number on training tasks: rollout success, the best of K tree
    branches per RL step.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, MaxNLocator

    run_dir = Path(run_dir)
    records, config = _read(run_dir)
    rl = [r for r in records if r["phase"] == "rl" and "rollout/success" in r]
    rl_steps = max((r["step"] for r in rl), default=config.get("optim", {}).get("steps", 0))
    roots = config.get("rollout", {}).get("tasks_per_step", 0)
    k = config.get("rollout", {}).get("k", 0)
    sft = _sft_steps(records)
    sft_label = ", ".join(
        f"{policy} {n}" if policy else str(n) for policy, n in sorted(sft.items())
    )

    end = max(rl_steps, 1)
    start = -max(1.5, 0.22 * end)  # the warm start gets a fifth of the axis, whatever its steps
    fig, (ax, ax_rollout) = plt.subplots(
        2, 1, figsize=(7.5, 6.4), sharex=True, gridspec_kw={"height_ratios": [2.2, 1]}
    )
    for a in (ax, ax_rollout):
        a.axvspan(start, 0, color="#f3e6c8", zorder=0)
        a.axvspan(0, end, color="#dbe8f5", zorder=0)
        a.grid(alpha=0.3)
    ax.text(
        start / 2,
        1.03,
        f"warm start\n({sft_label or 0} SFT steps)",
        ha="center",
        va="bottom",
        fontsize=8,
        color="#7a5a12",
    )
    ax.text(end / 2, 1.03, "AT-GRPO", ha="center", va="bottom", fontsize=8, color="#1f4e79")
    for i, (label, mean) in enumerate(_baselines(run_dir)):
        color = ["#555555", "#8e24aa", "#2e7d32"][i % 3]
        ax.axhline(mean, color=color, linestyle=":", linewidth=1.2)
        ax.annotate(
            f"{label} (stored): {_pct(mean)}",
            (0, mean),  # from the RL phase's start: the held-out dots' labels sit at its end
            textcoords="offset points",
            xytext=(4, 2),
            ha="left",
            fontsize=7,
            color=color,
        )
    held = _held_out(records, rl_steps, start)
    if held:
        n = next((r.get("eval/episodes") for r in records if "eval/episodes" in r), None)
        xs = [p[0] for p in held]
        ys = [p[1] for p in held]
        errors = [[p[1] - p[2][0] for p in held], [p[2][1] - p[1] for p in held]]
        ax.errorbar(
            xs,
            ys,
            yerr=errors,
            color="#c0392b",
            marker="o",
            linestyle="none",
            capsize=3,
            label=f"held-out success: greedy, {n or '?'} test tasks, measured at the dots only",
        )
        for x, y in zip(xs, ys, strict=True):
            ax.annotate(
                _pct(y),
                (x, y),
                textcoords="offset points",
                xytext=(6, 4),
                ha="left",
                fontsize=8,
                color="#c0392b",
            )
    if rl:
        xs = [r["step"] for r in rl]
        ys = [r["rollout/success"] for r in rl]
        ax_rollout.plot(xs, ys, color="#5b85b5", marker=".", linewidth=1)
        if roots:
            bands = [wilson(y * roots, roots) for y in ys]
            ax_rollout.fill_between(
                xs, [b[0] for b in bands], [b[1] for b in bands], color="#7fa7d0", alpha=0.25
            )
    ax_rollout.set_title(
        f"training-time, not held-out: rollout success, best of K={k} tree branches on "
        f"{roots} train tasks per step",
        fontsize=8,
    )
    steps = MaxNLocator(integer=True, nbins=8).tick_values(1, end)
    ticks = [start, *sorted({int(t) for t in steps if 0 <= t <= end} | {0, int(end)})]
    ax_rollout.xaxis.set_major_locator(FixedLocator(ticks))
    ax_rollout.set_xticklabels(["start", *(str(int(t)) for t in ticks[1:])])
    ax_rollout.set_xlim(start - 0.05 * end, end + 0.03 * end)
    for a, top in ((ax, 1.12), (ax_rollout, 1.05)):
        a.set_ylim(0, top)
        a.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
        a.set_yticklabels(["0%", "25%", "50%", "75%", "100%"])
    ax_rollout.set_xlabel("RL step (left of 0: before training, then the supervised warm start)")
    ax.set_ylabel("held-out success (95% Wilson)")
    ax_rollout.set_ylabel("rollout success")
    ax.set_title(_title(run_dir, config, "success by phase", name), fontsize=10)
    if held:
        ax.legend(fontsize=8, loc="lower right", frameon=True)
    fig.tight_layout()
    return fig


def _sft_losses(record: dict[str, Any]) -> dict[str, float]:
    """The warm-start SFT losses of one record, by policy: ``warmstart/loss/sft`` (one policy,
    key ``""``) or ``warmstart/<policy>/loss/sft`` (one learner per policy, e.g. per role)."""
    out = {}
    for key, value in record.items():
        if key.startswith("warmstart/") and key.endswith("/loss/sft"):  # "" for one policy
            out[key[len("warmstart/") : -len("/loss/sft")]] = value
    return out


def warmstart_loss_figure(run_dir: str | Path, name: str | None = None) -> Any | None:
    """The warm start's SFT loss per step (``None`` when the run had no warm start)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    run_dir = Path(run_dir)
    records, config = _read(run_dir)
    curves: dict[str, list[tuple[int, float]]] = {}  # policy ("" for one policy) -> points
    for r in records:
        for policy, loss in _sft_losses(r).items():
            curves.setdefault(policy, []).append((r["step"], loss))
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    colors = ["#7a5a12", "#1f4e79", "#2e7d32", "#8e24aa"]
    for i, (policy, pts) in enumerate(sorted(curves.items())):
        marker = "." if len(pts) < 60 else None
        label = f"policy {policy}" if policy else None
        ax.plot(*zip(*pts, strict=True), color=colors[i % 4], marker=marker, label=label)
    if len(curves) > 1:
        ax.legend(fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("warm-start (SFT) step")
    ax.set_ylabel("SFT loss (token mean)")
    ax.set_title(
        _title(run_dir, config, "supervised warm start on oracle transcripts", name), fontsize=10
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _rollout_figure(
    run_dir: Path,
    prefix: str,
    ylabel: str,
    what: str,
    ylim: tuple[float, float] | None = None,
    hline: tuple[float, str] | None = None,
) -> Any | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    records, config = _read(run_dir)
    rl = [r for r in records if r["phase"] == "rl"]
    keys = sorted({k for r in rl for k in r if k.startswith(prefix)})
    if not keys:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    for key in keys:
        pts = [(r["step"], r[key]) for r in rl if isinstance(r.get(key), (int, float))]
        ax.plot(
            *zip(*pts, strict=True),
            marker="o" if len(pts) < 30 else None,
            label=key.removeprefix(prefix) or key,
        )
    if hline is not None:
        ax.axhline(hline[0], color="#555555", linestyle=":", label=hline[1])
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("RL step")
    ax.set_ylabel(ylabel)
    ax.set_title(_title(run_dir, config, what), fontsize=10)
    ax.grid(alpha=0.3)
    if len(keys) > 1 or hline is not None:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Draw every figure of ``run_dir`` into ``out_dir`` (default ``run_dir/plots``)."""
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir / "plots"
    out.mkdir(parents=True, exist_ok=True)
    _, config = _read(run_dir)
    max_turns = int(config.get("env", {}).get("max_turns", 0)) or None
    figures = {
        "success.png": success_figure(run_dir),
        "warmstart_loss.png": warmstart_loss_figure(run_dir),
        "reward_per_role.png": _rollout_figure(
            run_dir, "rollout/reward/", "mean sample reward", "rollout reward per role"
        ),
        "return_per_role.png": _rollout_figure(
            run_dir, "rollout/return/", "episode return", "return per role (chosen branch)"
        ),
        "turns.png": _rollout_figure(
            run_dir,
            "rollout/turns_mean",
            "turns per episode",
            "rollout turns per episode",
            ylim=(0, max_turns + 0.3) if max_turns else None,
            hline=(max_turns, f"max turns ({max_turns})") if max_turns else None,
        ),
        "format_errors.png": _rollout_figure(
            run_dir,
            "rollout/format_error_rate",
            "share of actions that did not parse",
            "rollout format (parse) errors",
            ylim=(0, 1.02),
        ),
    }
    written = []
    for name, fig in figures.items():
        if fig is None:
            continue
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(out / name)
    return written
