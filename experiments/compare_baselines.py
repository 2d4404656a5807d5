"""The paper's comparison (Stronger-MAS, table rows) at tiny scale on the CPU.

Rows, all from the same tiny model, seed, held-out tasks and budget:

==================  ====================================================================
row key             row
==================  ====================================================================
``single``          single agent: one role does the whole task (``env.mode=single``), no RL
``single-grpo``     single agent + GRPO: the same, then RL (tree groups, one role)
``tool``            tool alone: the tool role with its code tool, its printed moves made
                    (``env.mode=tool``; code envs), after its warm start, no RL
``tool-grpo``       tool alone + GRPO (the paper's SA-code ablation, its Table 3)
``mas``             MAS prompting: the two-role team after its warm start, no RL
``mas-shared``      MAS + AT-GRPO, one policy shared by the roles (its own warm start)
``mas-per-role``    MAS + AT-GRPO, one policy per role (what ``mas-train`` runs)
``mas-parallel``    MAS + parallel sampling: ``mas-per-role`` with K independent episodes per
                    task instead of the tree (``rollout.mode=parallel``)
``mas-parallel-prompt``  the same episodes, grouped by GRPO's own rule: only identical prompts
                    (``rollout.mode=parallel-prompt``)
``mas-swapped``     ``mas-per-role``'s final policies evaluated with the roles swapped (the
                    tool played by the planner's policy and the planner by the tool's)
==================  ====================================================================

At tiny scale the "base model" of every row is the supervised warm start of its mode (a randomly
initialised model cannot write a move list), so rows ``single`` and ``mas`` are warm-started
models. A warm start runs once per seed and kind (single agent; team with one policy per role;
team with a shared policy): a ``mas-train`` run with 0 RL steps. Every RL row *continues* one: its
run folder starts from a copy of that checkpoint (weights, AdamW state, trainer RNG) and is run with
``--run.resume``. So ``mas-per-role`` is exactly the run ``mas-train <preset>`` does (same warm
start, same RL task draws), and the RL rows of one warm start draw the same training tasks. Every
row is evaluated on the same held-out tasks (the first ``eval.episodes`` of the test split, greedy).

**Same budget.** A team of R roles with one policy per role trains R policies; the rows with one
policy get the same optimisation effort, not the same number of steps per policy: their warm start
runs as many steps as the team's R policies together (R times ``optim.warmstart_steps``, or the
sum of the roles' steps where ``optim.warmstart_steps_factor_by_policy`` scales some: as many
supervised samples and optimizer steps), and the single agent (and the tool alone) plays R times
``rollout.tasks_per_step`` tasks per RL step (as many trained samples, so as many optimizer steps,
and about as many generated tokens per step as the team, whose every task gives a sample per
role). RL steps, K, mini-batch, learning rate and token limits are the preset's for every row.

Budgets are the preset's unless ``--steps``, ``--warmstart-steps`` or ``--episodes`` (or any
``--section.field value`` override) say otherwise; the tables name them.

    python experiments/compare_baselines.py [--envs plan-path-tiny] [--rows ROW ...] [--seed 0 ...]
        [--steps N] [--warmstart-steps N] [--episodes N] [--out-dir runs/compare]
        [--out runs/compare/results.md] [--table-only] [--write-baselines]
        [--keep-rows-from mas_trainer/baselines.json] [--section.field value ...]

``--rows`` runs a subset (e.g. the single-agent rows in one process and the team rows in another);
a row whose result file exists is not run again, and a warm start is reused once
``<kind>-warmstart.json`` (written when it completes) exists (give one kind's rows to one process,
or start a second process once that file exists). ``mas-swapped`` needs ``mas-per-role``'s run.
``--table-only`` assembles the tables from the result files. Several ``--seed`` values run the rows
once per seed and add a table across seeds (mean and its 95% t-interval over seeds, the pooled
Wilson interval over all episodes) and the paired gains. Each row's result (success with its 95%
Wilson interval, wall and CPU seconds, the resolved budget) is written to
``<out-dir>/<preset>/seed-<seed>/rows/<row>.json``; the Markdown goes to ``--out``.
``--write-baselines`` stores the cross-seed figures, with their provenance (command, commits,
date, machine), in ``<out-dir>/baselines.json``. Copying that file to ``mas_trainer/baselines.json``
(a deliberate step, in its own commit) makes ``mas-train`` print the single agent's and the tool
alone's figures next to a run of the same config (docs/reproduce.md). ``--keep-rows-from
mas_trainer/baselines.json`` adds rows measured earlier, whose result files are gone, to the
cross-seed tables, the paired gains and the written file, each row with its own provenance: a new
row (say ``tool-grpo``) joins the stored ones without re-running them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple


class Row(NamedTuple):
    label: str
    warm_start: str  # a key of WARM_STARTS
    policy_map: str | None  # of the RL phase; None: the warm start itself, no RL
    extra: tuple[str, ...] = ()  # overrides of the RL phase
    swapped_of: str | None = None  # evaluate this row's final policies with the roles swapped


WARM_STARTS: dict[str, tuple[str, str]] = {
    # warm-start kind: (env mode, policy map)
    "single": ("single", "shared"),
    "tool": ("tool", "shared"),
    "mas": ("mas", "per_role"),
    "mas-shared": ("mas", "shared"),
}

ROWS: dict[str, Row] = {
    "single": Row("single agent", "single", None),
    "single-grpo": Row("single agent + GRPO", "single", "shared"),
    "tool": Row("tool alone (code)", "tool", None),
    "tool-grpo": Row("tool alone (code) + GRPO", "tool", "shared"),
    "mas": Row("MAS prompting", "mas", None),
    "mas-shared": Row("MAS + AT-GRPO (shared policy)", "mas-shared", "shared"),
    "mas-per-role": Row("MAS + AT-GRPO (per-role policies)", "mas", "per_role"),
    "mas-parallel": Row(
        "MAS + parallel sampling (per-role)", "mas", "per_role", ("--rollout.mode", "parallel")
    ),
    "mas-parallel-prompt": Row(
        "MAS + parallel sampling, prompt groups (per-role)",
        "mas",
        "per_role",
        ("--rollout.mode", "parallel-prompt"),
    ),
    "mas-swapped": Row(
        "MAS + AT-GRPO (per-role), roles swapped", "mas", None, swapped_of="mas-per-role"
    ),
}

GAINS: dict[str, tuple[str, str, str]] = {
    # name: (description, row, minus row), paired by seed
    "rl": ("RL's gain: MAS + AT-GRPO (per-role) over its warm start", "mas-per-role", "mas"),
    "team": (
        "team over single agent: MAS + AT-GRPO (per-role) over single agent + GRPO",
        "mas-per-role",
        "single-grpo",
    ),
    "team-tool": (
        "team over the tool alone: MAS + AT-GRPO (per-role) over tool alone + GRPO",
        "mas-per-role",
        "tool-grpo",
    ),
    "tree": ("tree groups over parallel sampling", "mas-per-role", "mas-parallel"),
    "tree-prompt": (
        "tree groups over parallel sampling with prompt groups",
        "mas-per-role",
        "mas-parallel-prompt",
    ),
    "swap": ("trained roles over swapped roles", "mas-per-role", "mas-swapped"),
}

# Two-sided 95% Student t quantiles by degrees of freedom (seeds - 1).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def code_commit() -> str:
    """The checkout's commit, ``+dirty`` when the packages have uncommitted changes (asked of
    this script's repository, whatever the working folder); ``unknown`` outside git."""
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "mas_trainer", "mas_envs"],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
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


def _config(preset: str, overrides: list[str]) -> Any:
    from mas_trainer.config import build_config

    return build_config(preset, overrides=overrides)


def _roles(cfg: Any) -> list[str]:
    """The roles of ``cfg``'s env in its mode, in turn order."""
    from mas_trainer.rollout import env_factory

    return list(env_factory(cfg.env.id, mode=cfg.env.mode, **cfg.env.options)().possible_agents)


def _team_roles(preset: str, common: list[str]) -> list[str]:
    """The roles of the preset's team (its per-role policies' names)."""
    return _roles(_config(preset, [*common, "--env.mode", "mas"]))


def _kind_overrides(preset: str, kind: str, common: list[str]) -> list[str]:
    """Mode, policy map and equal-budget overrides of a warm-start kind (see the docstring)."""
    mode, policy_map = WARM_STARTS[kind]
    out = [*common, "--env.mode", mode, "--algo.policy_map", policy_map]
    roles = _team_roles(preset, common)
    base = _config(preset, common)
    if policy_map != "per_role" and len(roles) > 1:  # one policy does the work of the team's
        steps = sum(base.optim.warmstart_steps_of(role) for role in roles)
        out += ["--optim.warmstart_steps", str(steps)]
    if mode != "mas" and len(roles) > 1:  # one sample per task instead of one per role
        out += ["--rollout.tasks_per_step", str(base.rollout.tasks_per_step * len(roles))]
    return out


def _warm_start(preset: str, root: Path, kind: str, common: list[str]) -> dict[str, Any]:
    """Run (or reuse) a warm start: the preset's run of this kind with 0 RL steps."""
    from mas_trainer.train import train

    folder = root / f"{kind}-warmstart"
    done = root / f"{kind}-warmstart.json"  # written last, atomically: the warm start is complete
    if done.is_file():
        summary = json.loads(done.read_text())
        print(f"[{preset} {kind}] reusing the warm start in {folder}", flush=True)
        return summary
    if folder.exists():  # an interrupted earlier attempt: start clean, resume is not meant here
        shutil.rmtree(folder)
    cfg = _config(preset, [*_kind_overrides(preset, kind, common), "--optim.steps", "0"])
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
    from mas_trainer.policy import role_policies

    policies = set(role_policies(cfg, _roles(cfg)).values())
    # Only the per-policy rates this row's policies use (a shared policy uses none of them).
    by_policy = {p: r for p, r in cfg.optim.warmstart_lr_by_policy.items() if p in policies}
    rl_by_policy = {p: r for p, r in cfg.optim.lr_by_policy.items() if p in policies}
    steps_by_policy = {
        p: cfg.optim.warmstart_steps_of(p)
        for p in sorted(policies)
        if p in cfg.optim.warmstart_steps_factor_by_policy
    }
    return {
        **({"warmstart_lr_by_policy": by_policy} if by_policy else {}),
        **({"warmstart_steps_by_policy": steps_by_policy} if steps_by_policy else {}),
        **({"lr_by_policy": rl_by_policy} if rl_by_policy else {}),
        "env": {"id": cfg.env.id, "mode": cfg.env.mode, "options": cfg.env.options},
        "model": cfg.model.name,
        "warmstart_steps": cfg.optim.warmstart_steps,
        "warmstart_lr": cfg.optim.warmstart_lr,
        "warmstart_min_lr_ratio": cfg.optim.warmstart_min_lr_ratio,
        "warmstart_oracle_share": cfg.optim.warmstart_oracle_share,
        "rl_steps": cfg.optim.steps,
        "rl_lr": cfg.optim.lr,
        "tasks_per_step": cfg.rollout.tasks_per_step,
        "k": cfg.rollout.k,
        "rollout_mode": cfg.rollout.mode,
        "temperature": cfg.rollout.temperature,
        "policy_map": cfg.algo.policy_map,
        "eval_episodes": cfg.eval.episodes,
        "eval_split": cfg.eval.split,
        "seed": cfg.run.seed,
        "threads": cfg.run.threads,
    }


def _rl_run(
    preset: str, root: Path, key: str, row: Row, ws: dict[str, Any], common: list[str]
) -> dict[str, Any]:
    """Continue the warm start ``ws`` with the preset's RL phase as ``row`` says.

    The row's run folder starts as a copy of the warm start's (its config, logs and checkpoint:
    weights, AdamW state, trainer RNG) and is resumed, so its logs hold the warm start's records
    too and its RL steps are what ``mas-train`` would have run after that warm start.
    """
    from mas_trainer.train import train

    folder = root / key
    if folder.exists():  # a partial earlier attempt: start again from the warm start
        shutil.rmtree(folder)
    overrides = [*_kind_overrides(preset, row.warm_start, common), *row.extra]
    cfg = _config(preset, [*overrides, "--run.resume", str(folder)])
    if cfg.optim.steps == 0:
        raise SystemExit("an RL row with optim.steps=0 is the warm-start row; pass --steps N")
    src = Path(ws["run_dir"])
    state = json.loads((Path(ws["checkpoint"]) / "trainer_state.json").read_text())
    if state.get("step") != 0 or not state.get("warmstart_done"):
        raise SystemExit(f"{src} is not a finished warm start with 0 RL steps; delete it")
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns("events.out.tfevents*", "plots"))
    t0 = time.perf_counter()
    summary = train(cfg)
    summary["row_wall_s"] = time.perf_counter() - t0
    if summary.get("interrupted") or summary.get("steps") != cfg.optim.steps:
        raise SystemExit(f"{folder}: the RL phase did not finish ({summary.get('steps')} steps)")
    summary["config"] = _resolved(cfg)
    return summary


def _swapped_eval(preset: str, root: Path, row: Row, common: list[str]) -> dict[str, Any]:
    """Evaluate ``row.swapped_of``'s final policies with every role played by another's policy."""
    from mas_trainer.eval.play import run_eval

    source = root / "rows" / f"{row.swapped_of}.json"
    if not source.is_file():
        raise SystemExit(f"{row.label} needs the {row.swapped_of} row first (run it before)")
    trained = json.loads(source.read_text())
    cfg = _config(preset, _kind_overrides(preset, row.warm_start, common))
    roles = _roles(cfg)
    swap = dict(zip(roles, roles[1:] + roles[:1], strict=True))  # each role plays the next's
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    res = run_eval(
        cfg.env.id,
        str(Path(trained["checkpoint"])),
        episodes=cfg.eval.episodes,
        split=cfg.eval.split,
        mode=cfg.env.mode,
        max_turns=cfg.env.max_turns,
        env_options={"alpha": cfg.env.alpha, **cfg.env.options},
        role_map=swap,
        max_new_tokens=cfg.rollout.max_new_tokens,
        system_message=cfg.rollout.system_message,
    )
    return {
        "success_final": res["success"],
        "success_final_ci": list(res["ci95"]),
        "success_after_ws": trained["success_final"],  # the same policies, roles as trained
        "role_map": swap,
        "policy_of": res["policy_of"],
        "steps": 0,
        "rl_s": 0.0,
        "row_wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - cpu0,
        "config": _resolved(cfg),
        "checkpoint": trained["checkpoint"],
    }


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
        row = ROWS[key]
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        t0 = time.perf_counter()
        if row.swapped_of is not None:
            res = _swapped_eval(preset, root, row, common)
            ws_wall = ws_cpu = 0.0
        else:
            ws = _warm_start(preset, root, row.warm_start, common)
            ws_wall, ws_cpu = ws["row_wall_s"], ws.get("cpu_s", 0.0)
            if row.policy_map is None:
                res = {**ws, "steps": 0, "rl_s": 0.0, "success_after_ws": ws["success_warmstart"]}
            else:
                res = _rl_run(preset, root, key, row, ws, common)
                res["success_after_ws"] = ws["success_warmstart"]
                res["rl_cpu_s"] = res.get("cpu_s", 0.0) - ws_cpu
        res.update(
            row=row.label,
            key=key,
            warm_start=row.warm_start,
            mode=WARM_STARTS[row.warm_start][0],
            rl_steps=res["steps"],
            started_utc=started,
            finished_utc=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            process_wall_s=time.perf_counter() - t0,
            commit=code_commit(),
            warmstart_wall_s=ws_wall,
            warmstart_cpu_s=ws_cpu,
        )
        out.with_suffix(".tmp").write_text(json.dumps(res, indent=2) + "\n")
        out.with_suffix(".tmp").replace(out)
        print(
            f"[{preset} {key}] success {res['success_final']:.3f} "
            f"(before: {res['success_after_ws']:.3f}), {res['process_wall_s']:.0f} s",
            flush=True,
        )


# ------------------------------------------------------------------------------------ tables


def _results(args: argparse.Namespace, preset: str, seed: int) -> dict[str, dict[str, Any]]:
    root = Path(args.out_dir) / preset / f"seed-{seed}" / "rows"
    return {
        k: json.loads((root / f"{k}.json").read_text())
        for k in ROWS
        if (root / f"{k}.json").is_file()
    }


def mean_ci(values: list[float]) -> tuple[float, float, float]:
    """Mean of ``values`` and its two-sided 95% Student t interval (the mean itself for one)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = _T95.get(n - 1, 1.96) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def _pooled(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """Wilson interval of all episodes of ``rows`` pooled (one row per seed)."""
    from mas_trainer.eval.play import wilson_interval

    wins = sum(round(r["success_final"] * r["config"]["eval_episodes"]) for r in rows)
    n = sum(r["config"]["eval_episodes"] for r in rows)
    return wilson_interval(wins, n)


def _provenance(entry: dict[str, Any]) -> dict[str, Any]:
    """What made a stored entry's figures: its command, commits, date and machine (if recorded)."""
    keys = ("command", "commits", "measured_utc", "machine")
    return {k: entry[k] for k in keys if k in entry}


def stored_rows(args: argparse.Namespace, preset: str) -> dict[str, dict[str, Any]]:
    """The rows of ``preset`` stored in ``--keep-rows-from`` (none without it), each with its
    provenance (``measured``), provided the file measured the preset's config as resolved here."""
    from mas_trainer.baselines import lookup

    if args.keep_rows_from is None:
        return {}
    path = Path(args.keep_rows_from)
    if not path.is_file():
        raise SystemExit(f"--keep-rows-from: no file {path}")
    entry = lookup(_config(preset, [*args.overrides, "--run.seed", "0"]), path)
    if entry is None:
        raise SystemExit(
            f"--keep-rows-from: {path} holds no figures of {preset} at this config (a changed "
            "setting means its rows measured something else); drop the option or the override"
        )
    return {k: {"measured": _provenance(entry), **row} for k, row in entry["rows"].items()}


def cross_seed(args: argparse.Namespace, preset: str) -> dict[str, Any]:
    """Per row and per gain: per-seed values, mean and 95% intervals (the shipped figures).

    Rows come from the result files of ``--out-dir``; with ``--keep-rows-from``, a stored row
    that has no result file here is kept as stored. Gains pair two rows' figures by seed.
    """
    by_seed = {seed: _results(args, preset, seed) for seed in args.seed}
    kept = stored_rows(args, preset)
    rows: dict[str, Any] = {}
    for key, row in ROWS.items():
        found = [(s, by_seed[s][key]) for s in args.seed if key in by_seed[s]]
        if not found:
            if key in kept:
                rows[key] = kept[key]
            continue
        values = [r["success_final"] for _, r in found]
        mean, low, high = mean_ci(values)
        rows[key] = {
            "label": row.label,
            "seeds": [s for s, _ in found],
            "per_seed": values,
            "mean": mean,
            "ci95_seeds": [low, high],
            "ci95_pooled": list(_pooled([r for _, r in found])),
            "episodes_per_seed": found[0][1]["config"]["eval_episodes"],
            "commits": sorted({r["commit"] for _, r in found}),
        }
    gains: dict[str, Any] = {}
    for name, (text, a, b) in GAINS.items():
        if a not in rows or b not in rows:
            continue
        of_a = dict(zip(rows[a]["seeds"], rows[a]["per_seed"], strict=True))
        of_b = dict(zip(rows[b]["seeds"], rows[b]["per_seed"], strict=True))
        seeds = [s for s in args.seed if s in of_a and s in of_b]
        if seeds:
            pairs = [of_a[s] - of_b[s] for s in seeds]
            mean, low, high = mean_ci(pairs)
            gains[name] = {
                "what": text,
                "seeds": seeds,
                "per_seed": pairs,
                "mean": mean,
                "ci95": [low, high],
            }
    return {"rows": rows, "gains": gains}


def table(args: argparse.Namespace) -> str:
    """Markdown: one table per preset and seed with result files, and the cross-seed tables."""
    lines: list[str] = []
    for preset in args.envs:
        for seed in args.seed:
            lines += _seed_table(list(_results(args, preset, seed).values()), preset, seed)
        if len(args.seed) > 1:
            lines += _summary_table(args, preset)
    return "\n".join(lines)


def _pct(x: float) -> str:
    return f"{100 * min(max(x, 0.0), 1.0):.1f}%"  # a t-interval of a rate, clipped to [0, 1]


def _summary_table(args: argparse.Namespace, preset: str) -> list[str]:
    data = cross_seed(args, preset)
    seeds = args.seed
    lines = [
        f"## {preset}, seeds {', '.join(map(str, seeds))}",
        "",
        "| row | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | 95% CI (seeds) "
        "| 95% CI (pooled episodes) |",
        "|---|" + "---|" * (len(seeds) + 3),
    ]
    for r in data["rows"].values():
        cells = [
            _pct(r["per_seed"][r["seeds"].index(s)]) if s in r["seeds"] else "-" for s in seeds
        ]
        lo, hi = r["ci95_seeds"]
        plo, phi = r["ci95_pooled"]
        lines.append(
            f"| {r['label']} | {' | '.join(cells)} | {_pct(r['mean'])} | "
            f"{_pct(lo)}-{_pct(hi)} | {_pct(plo)}-{_pct(phi)} |"
        )
    lines += [
        "",
        "| gain (points, paired by seed) | per seed | mean | 95% CI |",
        "|---|---|---|---|",
    ]
    for g in data["gains"].values():
        per = ", ".join(f"{100 * v:+.1f}" for v in g["per_seed"])
        lo, hi = g["ci95"]
        lines.append(
            f"| {g['what']} | {per} | {100 * g['mean']:+.1f} | {100 * lo:+.1f} to {100 * hi:+.1f} |"
        )
    return [*lines, ""]


def _seed_table(rows: list[dict[str, Any]], preset: str, seed: int) -> list[str]:
    """The table of one preset and seed (empty when no row has a result yet)."""
    lines: list[str] = []
    if not rows:
        return lines
    cfg = next((r["config"] for r in rows if r["key"] == "mas-per-role"), rows[0]["config"])
    per_policy = "".join(f", {p} {v:g}" for p, v in cfg.get("warmstart_lr_by_policy", {}).items())
    rl_per_policy = "".join(f", {p} {v:g}" for p, v in cfg.get("lr_by_policy", {}).items())
    steps = "".join(f", {p} {n}" for p, n in cfg.get("warmstart_steps_by_policy", {}).items())
    lines += [
        f"## {preset}, seed {seed}",
        "",
        f"Budget (team, per policy): warm start {cfg['warmstart_steps']}{steps} steps (lr "
        f"{cfg['warmstart_lr']:g}{per_policy}, decay to {cfg['warmstart_min_lr_ratio']:g}x), RL "
        f"{cfg['rl_steps']} steps x {cfg['tasks_per_step']} tasks x K={cfg['k']} at "
        f"T={cfg['temperature']:g} (lr {cfg['rl_lr']:g}{rl_per_policy}); held-out: first "
        f"{cfg['eval_episodes']} {cfg.get('eval_split', 'test')} tasks, greedy; env "
        f"{cfg['env']['id']} "
        f"{json.dumps(cfg['env']['options'])}; model {cfg.get('model', '?')}; commit "
        f"{', '.join(sorted({r['commit'] for r in rows}))}.",
        "",
        "| row | mode | policies | RL steps | tasks/step | held-out success | 95% CI | before "
        "| change | wall s | CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ci = r["success_final_ci"]
        c = r["config"]
        delta = 100 * (r["success_final"] - r["success_after_ws"])
        moved = r["rl_steps"] > 0 or r["key"] == "mas-swapped"
        wall = r.get("rl_s", 0.0) if r["rl_steps"] else r.get("row_wall_s", 0.0)
        cpu = r.get("rl_cpu_s", r.get("cpu_s", 0.0))
        lines.append(
            f"| {r['row']} | {r['mode']} | {c['policy_map']} | {r['rl_steps']} | "
            f"{c['tasks_per_step'] if r['rl_steps'] else '-'} | {_pct(r['success_final'])} | "
            f"{_pct(ci[0])}-{_pct(ci[1])} | {_pct(r['success_after_ws'])} | "
            f"{f'{delta:+.1f}' if moved else '-'} | {wall:.0f} | {cpu:.0f} |"
        )
    lines.append("")
    walls = {
        r["warm_start"]: (r["warmstart_wall_s"], r["warmstart_cpu_s"])
        for r in rows
        if r.get("warmstart_wall_s")
    }
    lines.append(
        "Warm starts, wall / CPU s (incl. their evals): "
        + ", ".join(f"{m} {w:.0f} / {c:.0f}" for m, (w, c) in walls.items())
        + '. "before": the row\'s warm start (for the swapped row: the same policies with the '
        "roles as trained); RL rows' wall / CPU s are the RL phase's."
    )
    lines.append("")
    return lines


def write_baselines(args: argparse.Namespace) -> Path:
    """Store the cross-seed figures of every preset in ``<out-dir>/baselines.json`` (the presets
    already there are kept); returns its path.

    Each row carries its provenance (``measured``: command, commits, date, machine): this
    command's for the rows measured in ``--out-dir``, the stored one for rows kept with
    ``--keep-rows-from``. The entry's own provenance is this write's.
    """
    import platform

    from mas_trainer.baselines import fingerprint

    path = Path(args.out_dir) / "baselines.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    this = {
        "command": "python experiments/compare_baselines.py " + " ".join(sys.argv[1:]),
        "measured_utc": now,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.release()}",
    }
    for preset in args.envs:
        figures = cross_seed(args, preset)
        team = figures["rows"].get("mas-per-role")
        if team is None or not set(args.seed) <= set(team["seeds"]):
            raise SystemExit(
                "--write-baselines needs the mas-per-role row of every seed (result files in "
                "--out-dir, or stored rows with --keep-rows-from)"
            )
        for row in figures["rows"].values():
            if "measured" not in row:  # measured here
                row["measured"] = {**this, "commits": row.pop("commits")}
        cfg = _config(preset, [*args.overrides, "--run.seed", "0"])
        commits = {c for row in figures["rows"].values() for c in row["measured"]["commits"]}
        data[preset] = {
            "config": fingerprint(cfg),
            "seeds": list(args.seed),
            **this,
            "commits": sorted(commits),
            **figures,
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path} (mas-train reads mas_trainer/baselines.json: copy it there to ship it)")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--envs",
        nargs="+",
        default=["plan-path-tiny"],
        help="presets to compare (default: plan-path-tiny)",
    )
    parser.add_argument(
        "--rows", nargs="+", choices=list(ROWS), default=list(ROWS), help="rows to run"
    )
    parser.add_argument(
        "--seed",
        type=int,
        nargs="+",
        default=[0],
        help="run.seed of every row; several seeds run one after another, and the tables add "
        "the figures across them",
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
        "--out", default="runs/compare/results.md", help="the Markdown tables (overwritten)"
    )
    parser.add_argument(
        "--table-only", action="store_true", help="only assemble the tables from result files"
    )
    parser.add_argument(
        "--write-baselines",
        action="store_true",
        help="store the cross-seed figures in <out-dir>/baselines.json (copy it to "
        "mas_trainer/baselines.json to ship it: docs/reproduce.md)",
    )
    parser.add_argument(
        "--keep-rows-from",
        default=None,
        metavar="BASELINES_JSON",
        help="a baselines file (e.g. mas_trainer/baselines.json): its rows of the preset that "
        "have no result files in --out-dir join the cross-seed tables, the paired gains and "
        "--write-baselines, with their own provenance (the file must have measured this config)",
    )
    args, overrides = parser.parse_known_args()  # the rest: --section.field value overrides
    args.overrides = overrides
    if not args.table_only:
        for preset in args.envs:
            for seed in args.seed:
                run_rows(args, preset, seed)
    text = table(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    print(text)
    if args.write_baselines:
        write_baselines(args)


if __name__ == "__main__":
    main()
