"""The paper's comparison (Stronger-MAS, table rows) at tiny scale on the CPU.

Rows, all from the same tiny model, seed, held-out tasks and budget:

=================  =====================================================================
row key            row
=================  =====================================================================
``single``         single agent: one role does the whole task (``env.mode=single``), no RL
``single-grpo``    single agent + GRPO: the same, then RL (tree groups, one role)
``mas``            MAS prompting: the two-role team, no RL
``mas-shared``     MAS + AT-GRPO, one policy shared by the roles
``mas-per-role``   MAS + AT-GRPO, one policy per role
=================  =====================================================================

At tiny scale the "base model" of every row is the supervised warm start on oracle transcripts of
its mode (a randomly initialised model cannot write a move list), so rows ``single`` and ``mas``
are the warm-started models. The warm start runs once per mode (a ``mas-train`` run with 0 RL
steps, at the preset's warm-start settings) and every RL row of that mode *continues* it: its run
folder starts from a checkpoint holding the warm-started weights (copied to each role's folder for
``per_role``) and the trainer state after the warm start (its RNG), and is run with
``--run.resume``. So ``mas-shared`` is exactly the run ``mas-train <preset>`` does (same warm
start, same RL task draws), and all RL rows of a mode draw the same training tasks. Every row is
evaluated on the same held-out tasks (the first ``eval.episodes`` of the test split, greedy).

Budgets are the preset's unless ``--steps``, ``--warmstart-steps`` or ``--episodes`` (or any
``--section.field value`` override) say otherwise; the table header names them.

    python benchmarks/compare_baselines.py [--envs plan-path-tiny] [--rows ROW ...] [--seed 0 ...]
        [--steps N] [--warmstart-steps N] [--episodes N] [--out-dir runs/compare]
        [--out runs/compare/results.md] [--table-only] [--section.field value ...]

``--rows`` runs a subset (e.g. the single-agent rows in one process and the MAS rows in another); a
row whose result file exists is not run again, and a mode's warm start is reused once
``<mode>-warmstart.json`` (written when it completes) exists (so give one mode's rows to one
process, or start the second process of a mode after that file exists). ``--table-only`` just
assembles the table from the result files. Several ``--seed`` values run the rows once per seed
(each seed its own warm starts) and add a table of every row's success per seed, their mean and the
mean change from the warm start. Each row's result (success with its 95% Wilson interval, wall
times, the resolved budget) is written to ``<out-dir>/<preset>/seed-<seed>/rows/<row>.json``; the
Markdown table goes to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

ROWS: dict[str, tuple[str, str, str | None]] = {
    # row key: (label, env mode, policy map of the RL phase; None = the warm start, no RL)
    "single": ("single agent", "single", None),
    "single-grpo": ("single agent + GRPO", "single", "shared"),
    "mas": ("MAS prompting", "mas", None),
    "mas-shared": ("MAS + AT-GRPO (shared)", "mas", "shared"),
    "mas-per-role": ("MAS + AT-GRPO (per-role)", "mas", "per_role"),
}


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "mas_trainer", "mas_envs"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _budget_overrides(args: argparse.Namespace, seed: int) -> list[str]:
    """The command-line overrides shared by every row (only what the user asked to change)."""
    out = [*args.overrides, "--run.seed", str(seed), "--run.progress", "false"]
    if args.steps is not None:
        out += ["--optim.steps", str(args.steps)]
    if args.warmstart_steps is not None:
        out += ["--optim.warmstart_steps", str(args.warmstart_steps)]
    if args.episodes is not None:
        out += ["--eval.episodes", str(args.episodes)]
    return out


def _warm_start(preset: str, root: Path, mode: str, common: list[str]) -> dict[str, Any]:
    """Run (or reuse) the warm start of ``mode``: the preset's run with 0 RL steps."""
    from mas_trainer.config import build_config
    from mas_trainer.train import train

    folder = root / f"{mode}-warmstart"
    done = root / f"{mode}-warmstart.json"  # written last, atomically: the warm start is complete
    if done.is_file():
        summary = json.loads(done.read_text())
        print(f"[{preset} {mode}] reusing the warm start in {folder}", flush=True)
        return summary
    if folder.exists():  # an interrupted earlier attempt: start clean, resume is not meant here
        shutil.rmtree(folder)
    cfg = build_config(
        preset,
        overrides=[*common, "--env.mode", mode, "--optim.steps", "0"],
    )
    if cfg.optim.warmstart_steps == 0:
        raise SystemExit(
            f"{preset} has no warm start (optim.warmstart_steps=0); pass --warmstart-steps N"
        )
    t0 = time.perf_counter()
    summary = train(cfg, run_path=folder)
    summary["row_wall_s"] = time.perf_counter() - t0
    summary["config"] = _resolved(cfg)
    tmp = done.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    tmp.replace(done)  # atomic: another process (--rows split) may be waiting for it
    return summary


def _resolved(cfg: Any) -> dict[str, Any]:
    """The budget fields a reader of the table needs."""
    return {
        "env": {"id": cfg.env.id, "mode": cfg.env.mode, "options": cfg.env.options},
        "warmstart_steps": cfg.optim.warmstart_steps,
        "warmstart_lr": cfg.optim.warmstart_lr,
        "warmstart_min_lr_ratio": cfg.optim.warmstart_min_lr_ratio,
        "rl_steps": cfg.optim.steps,
        "rl_lr": cfg.optim.lr,
        "tasks_per_step": cfg.rollout.tasks_per_step,
        "k": cfg.rollout.k,
        "temperature": cfg.rollout.temperature,
        "policy_map": cfg.algo.policy_map,
        "eval_episodes": cfg.eval.episodes,
        "seed": cfg.run.seed,
        "threads": cfg.run.threads,
    }


def _rl_run(
    preset: str, root: Path, mode: str, policy_map: str, ws: dict[str, Any], common: list[str]
) -> dict[str, Any]:
    """Continue the warm start of ``mode`` with the preset's RL phase under ``policy_map``."""
    from mas_trainer.config import build_config
    from mas_trainer.outputs import RunDir
    from mas_trainer.train import train

    folder = root / f"{mode}-{policy_map}"
    if folder.exists():  # a partial earlier attempt: start again from the warm start
        shutil.rmtree(folder)
    cfg = build_config(
        preset,
        overrides=[
            *common,
            "--env.mode",
            mode,
            "--algo.policy_map",
            policy_map,
            "--run.resume",
            str(folder),
        ],
    )
    if cfg.optim.steps == 0:
        raise SystemExit("an RL row with optim.steps=0 is the warm-start row; pass --steps N")
    src = Path(ws["checkpoint"])
    state = json.loads((src / "trainer_state.json").read_text())
    if state.get("step") != 0 or not state.get("warmstart_done"):
        raise SystemExit(f"{src} is not a finished warm start with 0 RL steps; delete {src.parent}")
    # The warm start trained one shared model; every policy of this row starts from it.
    roles = list(state["policy_of"])
    names = ["shared"] if policy_map == "shared" else roles
    state["policy_of"] = {r: ("shared" if policy_map == "shared" else r) for r in roles}

    def write(tmp: Path) -> None:
        for name in names:
            shutil.copytree(src / "shared", tmp / name)
        # No learner-*.pt: each RL learner starts fresh, as in one mas-train run (the warm start
        # and RL have their own optimiser state).
        (tmp / "trainer_state.json").write_text(json.dumps(state, indent=2) + "\n")

    run = RunDir(folder, tensorboard=False)
    run.save_checkpoint(0, write)
    run.close()
    t0 = time.perf_counter()
    summary = train(cfg)
    summary["row_wall_s"] = time.perf_counter() - t0
    if summary.get("interrupted") or summary.get("steps") != cfg.optim.steps:
        raise SystemExit(f"{folder}: the RL phase did not finish ({summary.get('steps')} steps)")
    summary["config"] = _resolved(cfg)
    return summary


def run_rows(args: argparse.Namespace, preset: str, seed: int) -> None:
    """Run the requested rows of ``preset``; write each row's result file when it finishes."""
    root = Path(args.out_dir) / preset / f"seed-{seed}"
    (root / "rows").mkdir(parents=True, exist_ok=True)
    common = _budget_overrides(args, seed)
    for key in args.rows:
        out = root / "rows" / f"{key}.json"
        if out.is_file():
            print(f"[{preset} {key}] result exists ({out}); skipped", flush=True)
            continue
        label, mode, policy_map = ROWS[key]
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        t0 = time.perf_counter()
        ws = _warm_start(preset, root, mode, common)
        if policy_map is None:
            res = {**ws, "rl_steps": 0, "success_after_ws": ws["success_warmstart"]}
        else:
            res = _rl_run(preset, root, mode, policy_map, ws, common)
            res["rl_steps"] = res["steps"]
            res["success_after_ws"] = ws["success_warmstart"]
        res.update(
            row=label,
            key=key,
            mode=mode,
            started_utc=started,
            finished_utc=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            process_wall_s=time.perf_counter() - t0,
            commit=_commit(),
            warmstart_wall_s=ws["row_wall_s"],
        )
        out.with_suffix(".tmp").write_text(json.dumps(res, indent=2) + "\n")
        out.with_suffix(".tmp").replace(out)
        print(
            f"[{preset} {key}] success {res['success_final']:.3f} "
            f"(after warm start {res['success_after_ws']:.3f}), "
            f"{res['process_wall_s']:.0f} s",
            flush=True,
        )


def _results(args: argparse.Namespace, preset: str, seed: int) -> list[dict[str, Any]]:
    root = Path(args.out_dir) / preset / f"seed-{seed}" / "rows"
    return [
        json.loads((root / f"{k}.json").read_text()) for k in ROWS if (root / f"{k}.json").is_file()
    ]


def table(args: argparse.Namespace) -> str:
    """Markdown: one table per preset and seed with result files, and a cross-seed summary."""
    lines: list[str] = []
    for preset in args.envs:
        for seed in args.seed:
            lines += _seed_table(_results(args, preset, seed), preset, seed)
        if len(args.seed) > 1:
            lines += _summary_table(args, preset)
    return "\n".join(lines)


def _summary_table(args: argparse.Namespace, preset: str) -> list[str]:
    """Per row: success of each seed, their mean, and the mean change from the warm start."""
    by_seed = {seed: {r["key"]: r for r in _results(args, preset, seed)} for seed in args.seed}
    lines = [
        f"## {preset}, seeds {', '.join(map(str, args.seed))}",
        "",
        "| row | " + " | ".join(f"seed {s}" for s in args.seed) + " | mean | mean change |",
        "|---|" + "---|" * (len(args.seed) + 2),
    ]
    for key, (label, _, policy_map) in ROWS.items():
        found = [by_seed[s].get(key) for s in args.seed]
        if not any(found):
            continue
        cells = ["-" if r is None else f"{100 * r['success_final']:.0f}%" for r in found]
        done = [r for r in found if r is not None]
        mean = sum(r["success_final"] for r in done) / len(done)
        change = sum(r["success_final"] - r["success_after_ws"] for r in done) / len(done)
        partial = "" if len(done) == len(found) else f" ({len(done)} seeds)"
        lines.append(
            f"| {label} | {' | '.join(cells)} | {100 * mean:.1f}%{partial} | "
            f"{'-' if policy_map is None else f'{100 * change:+.1f}'} |"
        )
    return [*lines, ""]


def _seed_table(rows: list[dict[str, Any]], preset: str, seed: int) -> list[str]:
    """The table of one preset and seed (empty when no row has a result yet)."""
    lines: list[str] = []
    if rows:
        cfg = rows[0]["config"]
        lines += [
            f"## {preset}, seed {seed}",
            "",
            f"Budget: warm start {cfg['warmstart_steps']} steps (lr {cfg['warmstart_lr']:g}, "
            f"decay to {cfg['warmstart_min_lr_ratio']:g}x), RL "
            f"{max(r['rl_steps'] for r in rows)} steps x {cfg['tasks_per_step']} tasks x "
            f"K={cfg['k']} at T={cfg['temperature']:g} (lr {cfg['rl_lr']:g}); held-out: first "
            f"{cfg['eval_episodes']} test tasks, greedy; env {cfg['env']['id']} "
            f"{json.dumps(cfg['env']['options'])}; commit "
            f"{', '.join(sorted({r['commit'] for r in rows}))}.",
            "",
            "| row | mode | RL steps | held-out success | 95% CI | after warm start | change "
            "| RL wall s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            ci = r["success_final_ci"]
            delta = 100 * (r["success_final"] - r["success_after_ws"])
            lines.append(
                f"| {r['row']} | {r['mode']} | {r['rl_steps']} | "
                f"{100 * r['success_final']:.1f}% | {100 * ci[0]:.1f}-{100 * ci[1]:.1f}% | "
                f"{100 * r['success_after_ws']:.1f}% | "
                f"{'-' if r['rl_steps'] == 0 else f'{delta:+.1f}'} | "
                f"{r['rl_s'] if r['rl_steps'] else 0:.0f} |"
            )
        lines.append("")
        walls = {r["mode"]: r["warmstart_wall_s"] for r in rows}
        lines.append(
            "Warm-start wall s (incl. its evals): "
            + ", ".join(f"{m} {s:.0f}" for m, s in walls.items())
            + "; rows ran "
            + ", ".join(
                f"{r['key']} {r['started_utc'][11:16]}-{r['finished_utc'][11:16]}" for r in rows
            )
            + " UTC."
        )
        lines.append("")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--envs",
        nargs="+",
        default=["plan-path-tiny"],
        help="presets to compare (e.g. plan-path-tiny sokoban-tiny)",
    )
    parser.add_argument(
        "--rows", nargs="+", choices=list(ROWS), default=list(ROWS), help="rows to run"
    )
    parser.add_argument(
        "--seed",
        type=int,
        nargs="+",
        default=[0],
        help="run.seed of every row; several seeds run one after another, and the table adds a "
        "summary across them",
    )
    parser.add_argument("--steps", type=int, default=None, help="RL steps (default: the preset's)")
    parser.add_argument(
        "--warmstart-steps", type=int, default=None, help="warm-start steps (default: preset's)"
    )
    parser.add_argument(
        "--episodes", type=int, default=None, help="held-out test episodes (default: preset's)"
    )
    parser.add_argument("--out-dir", default="runs/compare", help="where runs and results go")
    parser.add_argument(
        "--out", default="runs/compare/results.md", help="the Markdown table (overwritten)"
    )
    parser.add_argument(
        "--table-only", action="store_true", help="only assemble the table from result files"
    )
    args, args.overrides = parser.parse_known_args()  # the rest: --section.field value overrides
    if not args.table_only:
        for preset in args.envs:
            for seed in args.seed:
                run_rows(args, preset, seed)
    text = table(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
