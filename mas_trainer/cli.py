"""Command-line entry points: ``mas-train`` and ``mas-eval``.

``mas-train [PRESET] [--config FILE] [--section.field VALUE ...]``; with no arguments it runs the
embedded default (``plan-path-tiny``: a tiny model on a small Plan-Path, on the CPU).
``mas-eval --env ID --policy {random,oracle,MODEL,RUN} --episodes N [--output PATH]``;
``mas-eval --suite NAME --policy P --output FILE`` runs a benchmark suite (``mas_trainer.eval``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from mas_trainer.config import (
    PRESETS,
    ConfigError,
    TrainConfig,
    build_config,
    config_from_dict,
    help_text,
)

__all__ = ["eval_main", "train_main"]

_TRAIN_USAGE = """usage: mas-train [PRESET] [--config FILE] [--section.field VALUE ...]

Train LLM agents with AT-GRPO (tree rollouts, agent- and turn-wise groups) on a mas_envs env.
With no arguments: the embedded default, preset 'plan-path-tiny' (a tiny model learns a small
Plan-Path on the CPU in about 8 minutes; supervised warm start, then AT-GRPO).

positional:
  PRESET            one of: {presets}

options:
  -h, --help        show this help (every field below, with its value in PRESET) and exit
  --config FILE     a .json or .toml file of {{section: {{field: value}}}} (may name a "preset")
  --print-config    print the resolved config as JSON and exit
  --run.resume DIR  continue the run in DIR (its config, then your overrides)

fields (--section.field VALUE or --section.field=VALUE):{fields}

examples:
  mas-train
  mas-train plan-path-tiny --rollout.k 8 --algo.policy_map per_role
  mas-train sokoban-tiny --env.options '{{"size": 5}}' --run.name my-run
  mas-train --run.resume runs/my-run
"""


def _resolve(argv: Sequence[str]) -> tuple[TrainConfig, bool]:
    args = list(argv)
    print_config = "--print-config" in args
    args = [a for a in args if a != "--print-config"]
    preset = None
    if args and not args[0].startswith("-"):
        preset = args.pop(0)
    config_file = None
    if "--config" in args:
        i = args.index("--config")
        if i + 1 >= len(args):
            raise ConfigError("--config needs a file path")
        config_file = args[i + 1]
        del args[i : i + 2]
    resume = None
    for i, a in enumerate(args):
        if a == "--run.resume" and i + 1 < len(args):
            resume = args[i + 1]
        elif a.startswith("--run.resume="):
            resume = a.split("=", 1)[1]
    if resume:
        saved = Path(resume) / "config.json"
        if not saved.is_file():
            raise ConfigError(f"--run.resume {resume!r}: no config.json there; is it a run folder?")
        base = config_from_dict(json.loads(saved.read_text()))
        return build_config(base=base, config_file=config_file, overrides=args), print_config
    return build_config(preset, config_file=config_file, overrides=args), print_config


def train_main(argv: Sequence[str] | None = None) -> int:
    """``mas-train``: returns the exit code (0 done, 2 bad arguments, 130 interrupted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        rest = [a for a in argv if a not in ("-h", "--help")]
        try:
            cfg, _ = _resolve(rest)
        except ConfigError:
            cfg = None
        print(_TRAIN_USAGE.format(presets=", ".join(PRESETS), fields=help_text(cfg)))
        return 0
    try:
        cfg, print_config = _resolve(argv)
    except ConfigError as err:
        print(f"mas-train: error: {err}", file=sys.stderr)
        return 2
    if print_config:
        from mas_trainer.config import config_to_dict

        print(json.dumps(config_to_dict(cfg), indent=2))
        return 0
    from mas_trainer.train import train

    try:
        summary = train(cfg)
    except (FileNotFoundError, ValueError, ImportError) as err:
        print(f"mas-train: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nmas-train: interrupted before RL started; nothing was saved", file=sys.stderr)
        return 130
    _print_summary(summary)
    return 130 if summary.get("interrupted") else 0


def _print_summary(summary: dict) -> None:
    def pct(key: str) -> str:
        return f"{100 * summary[key]:.1f}%" if key in summary else "-"

    print(f"\nrun folder: {summary['run_dir']}")
    print(
        f"held-out success: {pct('success_init')} before training, "
        f"{pct('success_warmstart')} after warm start (SFT), {pct('success_final')} after AT-GRPO"
    )
    print(f"wall time: {summary['wall_s']:.0f} s; checkpoint: {summary['checkpoint']}")
    if summary.get("interrupted"):
        print(
            f"interrupted at step {summary['steps']}; resume: mas-train --run.resume "
            f"{summary['run_dir']}"
        )


def _run_config(path: Path) -> dict | None:
    """The config.json of a run folder, or of the run that holds a checkpoint folder."""
    for folder in (path, path.parent.parent):
        if (folder / "config.json").is_file():
            return json.loads((folder / "config.json").read_text())
    return None


def eval_main(argv: Sequence[str] | None = None) -> int:
    """``mas-eval``: greedy held-out evaluation with a 95% Wilson interval on success."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a == "--suite" or a.startswith("--suite=") for a in argv):
        from mas_trainer.eval.suite import (
            suite_main,  # benchmark suites -> leaderboard result files
        )

        return suite_main(argv)
    parser = argparse.ArgumentParser(
        prog="mas-eval",
        description="Evaluate a policy on an env's test split (greedy; the first N tasks).",
        epilog="Benchmark suites (leaderboard result files): mas-eval --suite games-v0 --policy P "
        "--output R.json (mas-eval --suite games-v0 --help lists the options).",
    )
    parser.add_argument("--env", required=True, help="env id, e.g. mas/PlanPath-v0")
    parser.add_argument(
        "--policy",
        required=True,
        help="random | oracle | a model path or hub id | tiny:<preset> | a mas-train run folder "
        "or checkpoint folder",
    )
    parser.add_argument("--episodes", type=int, default=100, help="number of test tasks")
    parser.add_argument("--output", help="write the result as JSON to this path")
    parser.add_argument("--split", default="test", choices=["train", "validation", "test"])
    parser.add_argument("--mode", default="mas", choices=["mas", "single"])
    parser.add_argument("--max-turns", type=int, help="override the env's turn limit")
    parser.add_argument(
        "--env-options",
        default="{}",
        help='env constructor arguments as JSON, e.g. \'{"rows": 5, "cols": 5}\'',
    )
    parser.add_argument(
        "--role-map",
        nargs="*",
        default=[],
        metavar="ROLE=POLICY_ROLE",
        help="play ROLE with the policy of POLICY_ROLE (e.g. tool=planner: the swapped-roles "
        "ablation)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        help="token limit per turn (default: the run's rollout.max_new_tokens, else 64)",
    )
    parser.add_argument(
        "--no-system-message",
        action="store_true",
        help="leave the env's system text out of the prompt (default: as the run was trained)",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--seed", type=int, default=0, help="seed of the random policy")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    from mas_trainer.eval.play import parse_role_map, run_eval

    try:
        options = json.loads(args.env_options)
        if not isinstance(options, dict):
            raise ValueError("--env-options must be a JSON object")
        # a run folder carries its env and prompt config: use it unless the caller overrides
        system_message = not args.no_system_message
        max_new_tokens = args.max_new_tokens or 64
        run_cfg = _run_config(Path(args.policy))
        if run_cfg is not None:
            if args.env_options == "{}":
                options = run_cfg["env"].get("options", {})
            if args.max_turns is None:
                args.max_turns = run_cfg["env"].get("max_turns")
            system_message = system_message and run_cfg["rollout"].get("system_message", True)
            max_new_tokens = args.max_new_tokens or run_cfg["rollout"].get("max_new_tokens", 64)
        result = run_eval(
            args.env,
            args.policy,
            episodes=args.episodes,
            split=args.split,
            mode=args.mode,
            max_turns=args.max_turns,
            env_options=options,
            role_map=parse_role_map(args.role_map),
            max_new_tokens=max_new_tokens,
            system_message=system_message,
            device=args.device,
            dtype=args.dtype,
            seed=args.seed,
        )
    except (KeyError, ValueError, FileNotFoundError, ImportError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"mas-eval: error: {msg}", file=sys.stderr)
        return 2
    n = int(result["episodes"])
    print(
        f"{args.env} {args.split} ({args.mode}), policy {args.policy}: success "
        f"{100 * result['success']:.1f}% "
        f"(95% CI {100 * result['success_ci_low']:.1f}-{100 * result['success_ci_high']:.1f}%, "
        f"n={n}), mean turns {result['turns_mean']:.2f}"
    )
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.output}")
    return 0
