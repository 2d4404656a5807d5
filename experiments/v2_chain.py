"""Design L on 7x7 `mas/PlanPathCode-v2` for one seed, end to end: the team and its controls.

Runs every stage of design L (docs/v2-exploration.md, "Designs I to L on 7x7") and of the
controls it is compared with, for one seed, in dependency order and ``--jobs`` at a time; then
plays the team against each control paired by level (``v2_overlap.py``) on the validation split
and, once, on the test split, each player (the team, the tool alone, the single agent with the
team's planner budget) at the stage its 100 validation levels choose: after RL where RL's last
evaluation beats the warm start, else the warm start; and writes one results file in the schema
of ``experiments/results/v2-7x7/seed-0.json``.

=========  ==========================================================================  =========
stage      what                                                                        after
=========  ==========================================================================  =========
``t7``     the tool alone, 1,200 warm-start steps on the copy (oracle targets)
``t7b``    the same tool, 1,800 more steps on a fresh schedule (3,000 in all)          t7
``t7b_rl`` the tool alone + GRPO, 80 steps (the paper's SA-code control)               t7b
``s7``     the single agent without code, 1,200 warm-start steps
``s7b``    the same, 1,800 more steps (3,000 in all)                                   s7
``s7b_rl`` the single agent + GRPO, 80 steps                                           s7b
``k7``     the team: t7b's tool beside s7b's planner, 1,500 planner steps on the       t7b, s7b
           tool's own greedy reports (``optim.warmstart_own_play``), tool never random
``l7``     design L: k7's planner, 1,500 more steps on a fresh schedule                k7
``l7_rl``  L + AT-GRPO, 40 steps                                                       l7
``s7c``    the single agent with L's planner budget: s7b + 1,500 steps                 s7b
``s7d``    + 1,500 more on a fresh schedule (6,000 in all)                             s7c
``s7d_rl`` that single agent + GRPO, 40 steps                                          s7d
=========  ==========================================================================  =========

Seed S: a stage that starts a chain runs with ``run.seed`` 2S, a continuation on a fresh
schedule with 2S + 1, so seed 0 repeats the commands that made ``seed-0.json``. A stage whose
run folder holds a ``summary.json`` is not run again, nor is a comparison already in the
results file (``--out``): an interrupted chain resumes, and the test split is played once.

    python experiments/v2_chain.py [--seed 1] [--out-dir runs/v2-chain] [--out FILE]
        [--jobs 2] [--scale 1.0] [--probe-episodes 400] [--test-episodes 200] [--no-test]
    python experiments/v2_chain.py --table experiments/results/v2-7x7/seed-*.json

``--table`` runs nothing: it prints each stage's validation success per results file (seed);
then, per seed, the controls' and L's validation success and RL's gain, L against each control
paired by level on validation and test, and those paired counts pooled over the seeds (exact
McNemar on the summed discordant levels).

``--scale`` multiplies every step count (at least 1; a smoke run of the whole chain:
``--scale 0.002 --eval-episodes 4 --probe-episodes 4 --test-episodes 4``). One seed at scale 1
costs about 1.9 CPU hours (seed 0: 6,750 CPU seconds) and about 80 minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from compare_baselines import code_commit  # scripts beside this one
from paired_episodes import mcnemar_exact

ENV_OPTIONS = {"rows": 7, "cols": 7, "wall_prob": 0.22}
MAX_NEW_TOKENS = 128


class Stage(NamedTuple):
    """One ``mas-train`` run of the chain: its name (its run folder), what it is, the stages
    whose checkpoints it starts from, whether it continues a chain on a fresh schedule (the
    seed 2S + 1) and its options (``{run}`` names a stage's folder)."""

    name: str
    what: str
    after: tuple[str, ...]
    fresh_schedule: bool
    options: tuple[str, ...]


def _warmstart(steps: int, episodes: int, *more: str) -> tuple[str, ...]:
    return (
        "--optim.warmstart_steps", str(steps), "--optim.warmstart_episodes", str(episodes),
        *more, "--optim.steps", "0", "--eval.every", "0",
    )  # fmt: skip


def _ckpt(stage: str, policy: str) -> str:
    """A policy of a stage's warm-start checkpoint (``{stage}``: its run folder, filled in
    later)."""
    return "{%s}/checkpoints/step-000000/%s" % (stage, policy)  # noqa: UP031 (braces kept)


def _roles(**policies: str) -> tuple[str, str]:
    """``--model.role_models``: each role's policy, as ``_ckpt``'s paths."""
    return ("--model.role_models", json.dumps(policies))


_TOOL = ("--env.mode", "tool", "--algo.policy_map", "shared")
_SINGLE = ("--env.mode", "single")
_ORACLE = ("--optim.warmstart_oracle_share", '{"tool": 1.0}')
_LR = ("--optim.warmstart_lr", "3e-3")
_ALONE = ("--optim.warmstart_steps_factor_by_policy", '{"planner": 1}', *_LR)
_OWN_PLAY = (
    "--optim.warmstart_steps_factor_by_policy", '{"tool": 0}', *_LR,
    "--optim.warmstart_own_play", '{"tool": 1.0}',
    "--optim.warmstart_own_play_decoding", "greedy", "--optim.warmstart_explore", '{"tool": 0}',
)  # fmt: skip


def _rl(steps: int) -> tuple[str, ...]:
    """AT-GRPO (GRPO for one role) for ``steps`` steps from the checkpoints named after it."""
    return (
        "--rollout.k", "8", "--optim.lr", "1e-4", "--optim.steps", str(steps),
        "--eval.every", "20", "--optim.warmstart_steps", "0",
    )  # fmt: skip


STAGES = (  # the longest chain (t7, t7b, k7, l7) first where several are ready
    Stage("t7", "tool alone, 1,200 warm-start steps on the copy", (), False,
          (*_TOOL, *_warmstart(1200, 512, *_ORACLE))),
    Stage("s7", "single agent without code, 1,200 warm-start steps", (), False,
          (*_SINGLE, "--optim.warmstart_steps", "600", "--optim.warmstart_steps_factor_by_policy",
           '{"planner": 2}', "--optim.warmstart_episodes", "512", "--optim.steps", "0",
           "--eval.every", "0")),
    Stage("t7b", "the same tool, 1,800 more steps (3,000 in all)", ("t7",), True,
          (*_TOOL, "--model.name", _ckpt("t7", "shared"), *_warmstart(1800, 1024, *_LR, *_ORACLE))),
    Stage("s7b", "the same single agent, 1,800 more steps (3,000 in all)", ("s7",), True,
          (*_SINGLE, *_roles(planner=_ckpt("s7", "planner")), *_warmstart(1800, 1024, *_ALONE))),
    Stage("k7", "K: t7b's tool + s7b's planner, 1,500 team steps on the tool's own greedy reports",
          ("t7b", "s7b"), False, (*_warmstart(1500, 2048, *_OWN_PLAY),
          *_roles(tool=_ckpt("t7b", "shared"), planner=_ckpt("s7b", "planner")))),
    Stage("l7", "L: k7's planner + 1,500 more team steps (6,000 planner steps in all)", ("k7",),
          True, (*_warmstart(1500, 2048, *_OWN_PLAY),
          *_roles(tool=_ckpt("t7b", "shared"), planner=_ckpt("k7", "planner")))),
    Stage("s7c", "single agent, s7b + 1,500 steps", ("s7b",), False,
          (*_SINGLE, *_roles(planner=_ckpt("s7b", "planner")), *_warmstart(1500, 2048, *_ALONE))),
    Stage("s7d", "single agent with L's planner budget (6,000 steps)", ("s7c",), True,
          (*_SINGLE, *_roles(planner=_ckpt("s7c", "planner")), *_warmstart(1500, 2048, *_ALONE))),
    Stage("t7b_rl", "tool alone (3,000 steps) + GRPO", ("t7b",), False,
          (*_rl(80), "--model.name", _ckpt("t7b", "shared"), *_TOOL)),
    Stage("s7b_rl", "single agent (3,000 steps) + GRPO", ("s7b",), False,
          (*_rl(80), *_SINGLE, *_roles(planner=_ckpt("s7b", "planner")))),
    Stage("l7_rl", "L + AT-GRPO", ("l7",), False,
          (*_rl(40), *_roles(tool=_ckpt("l7", "tool"), planner=_ckpt("l7", "planner")))),
    Stage("s7d_rl", "single agent (6,000 steps) + GRPO", ("s7d",), False,
          (*_rl(40), *_SINGLE, *_roles(planner=_ckpt("s7d", "planner")))),
)  # fmt: skip

PLAYERS = (  # (mode, its warm start's stage, its RL stage): the team, then the two controls
    ("mas", "l7", "l7_rl"),
    ("tool", "t7b", "t7b_rl"),
    ("single", "s7d", "s7d_rl"),
)


def comparisons(runs: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """``(first, its mode, second, its mode)``: the team against each control, each player at
    the stage chosen on the validation runs (``runs``: stage -> record): its RL stage where RL's
    last evaluation beats its warm start, else the warm start (as seed 0 chose: L's warm start,
    the tool alone + GRPO, the single agent's warm start)."""

    def chosen(warm: str, rl: str) -> str:
        last = list(runs[rl]["validation_success_by_rl_step"].values())[-1]
        return rl if last > runs[warm]["validation_success_by_rl_step"]["0"] else warm

    (team_mode, *team), *controls = PLAYERS
    team_stage = chosen(*team)
    return [(team_stage, team_mode, chosen(warm, rl), mode) for mode, warm, rl in controls]


_STEP_OPTIONS = ("--optim.warmstart_steps", "--optim.steps")


def common(seed: int, eval_episodes: int) -> tuple[str, ...]:
    """The options every stage shares (``C`` in the exploration log), at the stage's seed."""
    return (
        "plan-path-tiny", "--env.id", "mas/PlanPathCode-v2", "--env.options",
        json.dumps(ENV_OPTIONS), "--rollout.max_new_tokens", str(MAX_NEW_TOKENS),
        "--run.threads", "1", "--run.seed", str(seed), "--eval.episodes", str(eval_episodes),
        "--eval.split", "validation",
    )  # fmt: skip


def stage_argv(
    stage: Stage, seed: int, runs: Path, scale: float = 1.0, eval_episodes: int = 100
) -> list[str]:
    """``mas-train``'s arguments for ``stage`` of seed ``seed``, run folders under ``runs``; every
    step count times ``scale`` (at least 1 where it was not 0)."""
    filled = [_fill(o, runs) for o in stage.options]
    for i, name in enumerate(filled[:-1]):
        if name in _STEP_OPTIONS and filled[i + 1] != "0":
            filled[i + 1] = str(max(1, round(int(filled[i + 1]) * scale)))
    run_seed = 2 * seed + stage.fresh_schedule
    return [
        *common(run_seed, eval_episodes), *filled, "--run.name", stage.name,
        "--run.out_dir", str(runs), "--run.progress", "false",
    ]  # fmt: skip


def _fill(option: str, runs: Path) -> str:
    """``{name}`` in an option: that stage's run folder under ``runs``."""
    for stage in STAGES:
        option = option.replace(f"{{{stage.name}}}", str(runs / stage.name))
    return option


def _done(runs: Path, name: str) -> bool:
    summary = runs / name / "summary.json"
    return summary.is_file() and not json.loads(summary.read_text()).get("interrupted")


def run_stages(
    argv_of: Callable[[Stage], list[str]],
    runs: Path,
    mas_train: Sequence[str],
    jobs: int = 2,
    poll_s: float = 1.0,
) -> list[str]:
    """Run every stage not yet done, each once its ``after`` stages are, ``jobs`` at a time,
    each one's output in ``runs/<stage>.log``: the stages run, in the order they started. A
    stage that fails stops the chain (the others running finish first). A stage counts as
    finished once its process has exited with a summary, never while it still runs."""
    runs.mkdir(parents=True, exist_ok=True)
    finished = {s.name for s in STAGES if _done(runs, s.name)}
    todo = [s for s in STAGES if s.name not in finished]
    running: dict[str, subprocess.Popen[bytes]] = {}
    started: list[str] = []
    failed: list[str] = []
    while todo or running:
        for name, proc in list(running.items()):
            if proc.poll() is not None:
                del running[name]
                if proc.returncode != 0 or not _done(runs, name):
                    failed.append(f"{name} (exit {proc.returncode}; {runs / name}.log)")
                else:
                    finished.add(name)
        ready = [s for s in todo if finished.issuperset(s.after)]
        while ready and len(running) < jobs and not failed:
            stage = ready.pop(0)
            todo.remove(stage)
            (runs / f"{stage.name}.commit").write_text(code_commit())  # the code it ran
            with (runs / f"{stage.name}.log").open("wb") as log:
                running[stage.name] = subprocess.Popen(
                    [*mas_train, *argv_of(stage)], stdout=log, stderr=subprocess.STDOUT
                )
            started.append(stage.name)
            print(f"[chain] {stage.name}: {stage.what}", flush=True)
        if failed and not running:
            raise RuntimeError(f"stage failed: {', '.join(failed)}; fix it and run again")
        if not running and todo:
            blocked = ", ".join(s.name for s in todo)
            raise RuntimeError(f"stages {blocked} wait on stages that did not finish")
        time.sleep(poll_s if running else 0)
    return started


def run_record(stage: Stage, runs: Path, argv: Sequence[str]) -> dict[str, Any]:
    """A finished stage as the results file keeps it: what, command, validation success by RL
    step, the warm start's and final success, wall and CPU seconds."""
    curve = {}
    for line in (runs / stage.name / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "eval/success" in row:
            curve[str(row.get("step"))] = row["eval/success"]
    summary = json.loads((runs / stage.name / "summary.json").read_text())
    return {
        "what": stage.what,
        "command": "mas-train " + shlex.join(argv),
        "code": _read(runs / f"{stage.name}.commit") or "unknown",
        "validation_success_by_rl_step": curve,
        "success_warmstart": summary.get("success_warmstart"),
        "success_final": summary["success_final"],
        "wall_s": round(summary["wall_s"]),
        "cpu_s": round(summary["cpu_s"]),
    }


def comparison_argv(
    first: str,
    first_mode: str,
    second: str,
    second_mode: str,
    runs: Path,
    split: str,
    episodes: int,
) -> list[str]:
    """``v2_overlap.py``'s arguments: ``first`` (its warm start's checkpoint when it ran no RL,
    as ``l7``) against ``second``, paired on the first ``episodes`` levels of ``split``."""
    return [
        str(Path(__file__).with_name("v2_overlap.py")), _policy(runs, first), _policy(runs, second),
        "--modes", first_mode, second_mode, "--split", split, "--episodes", str(episodes),
        "--env-options", json.dumps(ENV_OPTIONS), "--max-new-tokens", str(MAX_NEW_TOKENS),
    ]  # fmt: skip


def _policy(runs: Path, name: str) -> str:
    """A stage's trained policies: its run folder, or its warm start's checkpoint when it ran
    no RL (a run folder's policies are its last RL checkpoint's)."""
    steps = int(json.loads((runs / name / "summary.json").read_text())["steps"])
    return str(runs / name / "checkpoints" / "step-000000") if steps == 0 else str(runs / name)


def _read(path: Path) -> str | None:
    return path.read_text().strip() if path.is_file() else None


def compare(results: dict[str, Any], key: str, argv: Sequence[str]) -> None:
    """Run ``v2_overlap.py`` with ``argv`` unless ``results[key]`` has its line already; keep
    the line it prints last (the counts and the paired test)."""
    command = "python experiments/v2_overlap.py " + shlex.join(argv[1:])
    if command in results[key]:
        return
    out = subprocess.run([sys.executable, *argv], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{command} failed:\n{out.stderr[-2000:]}")
    results[key][command] = out.stdout.strip().splitlines()[-1]
    print(f"[chain] {results[key][command]}", flush=True)


_COUNTS = re.compile(  # a name may end in a digit: "team 1 114, team 2 133" (one mode twice)
    r"(\d+) levels: .+? (\d+), .+? (\d+), both .* only (\d+), .* only (\d+): .* p = (\S+)"
)


def _stage(path: str) -> str:
    """The stage a policy path names (``runs/l7/checkpoints/step-000000`` -> ``l7``)."""
    parts = Path(path).parts
    return parts[parts.index("checkpoints") - 1] if "checkpoints" in parts else parts[-1]


def _option(words: list[str], name: str, count: int, default: Sequence[str] = ()) -> list[str]:
    """The ``count`` values after ``name`` in a command's ``words`` (``default`` without it)."""
    if name not in words:
        return list(default)
    at = words.index(name) + 1
    return words[at : at + count]


def comparison(
    lines: dict[str, str],
    first: str,
    second: str,
    modes: tuple[str, str],
    split: str,
    episodes: int,
) -> tuple[int, int, int, int, int, float] | None:
    """The counts a ``v2_overlap.py`` line in ``lines`` (command -> line) printed for ``first``
    against ``second`` in ``modes`` on the first ``episodes`` levels of ``split``: levels,
    first's and second's successes, first only, second only, p. ``None`` when no line is."""
    for command, line in lines.items():
        words = shlex.split(command)[2:]  # after "python experiments/v2_overlap.py"
        if (
            [_stage(w) for w in words[:2]] == [first, second]
            and tuple(_option(words, "--modes", 2)) == modes
            and int(_option(words, "--episodes", 1, ["100"])[0]) == episodes
            and _option(words, "--split", 1, ["validation"])[0] == split
            and (match := _COUNTS.match(line))
        ):
            n, a, b, a_only, b_only, p = match.groups()
            return int(n), int(a), int(b), int(a_only), int(b_only), float(p)
    return None


SPLITS = (("validation", "probes"), ("test", "test_split_once"))  # split, its results key


def _paired(n: int, a: int, b: int, a_only: int, b_only: int, p: float) -> str:
    return f"{a} vs {b} of {n} ({100 * (a - b) / n:+.1f}, p = {p:.2g})"


def _markdown(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table: its header, then one line per row of cells."""
    lines = ["| " + " | ".join(cells) + " |" for cells in (columns, *rows)]
    lines.insert(1, "|" + "---|" * len(columns))
    return "\n".join(lines)


STAGE_ROWS = (  # the tool's stages, the single agent's, the team's
    "t7", "t7b", "t7b_rl", "s7", "s7b", "s7b_rl", "s7c", "s7d", "s7d_rl", "k7", "l7", "l7_rl",
)  # fmt: skip


def stage_table(seeds: Sequence[dict[str, Any]]) -> str:
    """Markdown: each stage's validation success per seed (results file), at each evaluation
    (the warm start, then every RL evaluation), the controls' stages before the team's."""
    what = {stage.name: stage.what for stage in STAGES}
    columns = ["stage", "what"] + [f"seed {result.get('seed', 0)}" for result in seeds]
    rows: list[list[str]] = []
    for name in STAGE_ROWS:
        cells = [f"`{name}`", what[name]]
        for result in seeds:
            curve = result["runs"][name]["validation_success_by_rl_step"].values()
            cells.append(", ".join(f"{100 * v:.0f}%" for v in curve))
        rows.append(cells)
    return _markdown(columns, rows)


def table(
    seeds: Sequence[dict[str, Any]], probe_episodes: int = 400, test_episodes: int = 200
) -> str:
    """Markdown: per seed (results file), each player's validation success at its warm start
    and after RL (100 levels), RL's gain for the team, and the team against each control paired
    by level, each player at its validation-chosen stage (:func:`comparisons`), on
    ``probe_episodes`` validation and ``test_episodes`` test levels; a last row pools those
    counts over the seeds (the levels pair up within a seed, so the discordant counts add;
    exact McNemar on the sums)."""

    def curve(stage: str, runs: dict[str, Any]) -> list[float]:
        return list(runs[stage]["validation_success_by_rl_step"].values())

    names = {"mas": "team", "tool": "tool alone", "single": "single agent"}
    columns = ["seed"] + [f"{names[mode]}: warm start -> RL" for mode, *_ in PLAYERS]
    columns += ["team: RL's gain"]
    columns += [f"team vs {names[m]}, {split}" for split, _ in SPLITS for m, *_ in PLAYERS[1:]]
    rows: list[list[str]] = []
    pooled: dict[tuple[str, str], list[int]] = {}  # (split, control's mode): counts, seeds
    for result in seeds:
        runs = result["runs"]
        cells = [str(result.get("seed", 0))]
        for _, warm, rl in PLAYERS:
            cells.append(f"{100 * curve(warm, runs)[0]:.0f}% -> {100 * curve(rl, runs)[-1]:.0f}%")
        _, warm, rl = PLAYERS[0]
        cells.append(f"{100 * (curve(rl, runs)[-1] - curve(warm, runs)[0]):+.0f}")
        for split, key in SPLITS:
            episodes = probe_episodes if split == "validation" else test_episodes
            for first, first_mode, second, second_mode in comparisons(runs):
                modes = (first_mode, second_mode)
                got = comparison(result.get(key, {}), first, second, modes, split, episodes)
                if got is None:
                    cells.append("not played")
                    continue
                cells.append(f"{first} vs {second}: {_paired(*got)}")
                total = pooled.setdefault((split, second_mode), [0] * 6)
                total[:] = [t + g for t, g in zip(total, (*got[:5], 1), strict=True)]
        rows.append(cells)
    cells = ["pooled"] + [""] * (len(PLAYERS) + 1)
    for split, _ in SPLITS:
        for mode, *_ in PLAYERS[1:]:
            if (split, mode) not in pooled:
                cells.append("")
                continue
            n, a, b, a_only, b_only, played = pooled[split, mode]
            p = mcnemar_exact(a_only, b_only)
            cells.append(f"{_paired(n, a, b, a_only, b_only, p)}, {played} seed(s)")
    rows.append(cells)
    return _markdown(columns, rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1, help="the chain's seed (default 1)")
    parser.add_argument("--out-dir", default="runs/v2-chain", help="run folders: OUT_DIR/seed-S")
    parser.add_argument("--out", default=None, help="results file (OUT_DIR/seed-S.json)")
    parser.add_argument("--jobs", type=int, default=2, help="stages run at once (default 2)")
    parser.add_argument("--scale", type=float, default=1.0, help="every step count times this")
    parser.add_argument("--eval-episodes", type=int, default=100, help="validation levels per run")
    parser.add_argument(
        "--probe-episodes", type=int, default=400, help="validation levels per comparison"
    )
    parser.add_argument("--test-episodes", type=int, default=200, help="test levels, played once")
    parser.add_argument("--no-test", action="store_true", help="do not play the test split")
    parser.add_argument(
        "--mas-train",
        default=str(Path(sys.executable).with_name("mas-train")),
        help="the mas-train command (default: the one beside this Python)",
    )
    parser.add_argument(
        "--table",
        nargs="+",
        metavar="RESULTS_JSON",
        help="run nothing: print the table across these results files (one per seed)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.scale <= 0:
        parser.error("--jobs must be at least 1 and --scale above 0")
    if args.table:
        seeds = [json.loads(Path(f).read_text()) for f in args.table]
        print(stage_table(seeds), table(seeds), sep="\n\n")
        return
    runs = Path(os.path.relpath(Path(args.out_dir) / f"seed-{args.seed}"))  # as commands name it
    out = Path(args.out or Path(args.out_dir) / f"seed-{args.seed}.json")

    def argv_of(stage: Stage) -> list[str]:
        return stage_argv(stage, args.seed, runs, args.scale, args.eval_episodes)

    run_stages(argv_of, runs, shlex.split(args.mas_train), args.jobs)
    results = json.loads(out.read_text()) if out.is_file() else {}
    results.update(
        env={"id": "mas/PlanPathCode-v2", "options": ENV_OPTIONS},
        seed=args.seed,
        evaluation=f"greedy, the first {args.eval_episodes} validation levels",
        runs={s.name: run_record(s, runs, argv_of(s)) for s in STAGES},
    )
    results.setdefault("probes", {})
    results.setdefault("test_split_once", {})
    out.parent.mkdir(parents=True, exist_ok=True)
    for split, key in SPLITS if not args.no_test else SPLITS[:1]:
        episodes = args.probe_episodes if split == "validation" else args.test_episodes
        for first, first_mode, second, second_mode in comparisons(results["runs"]):
            pair = (first, first_mode, second, second_mode, runs)
            compare(results, key, comparison_argv(*pair, split, episodes))
            out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"[chain] wrote {out}")


if __name__ == "__main__":
    main()
