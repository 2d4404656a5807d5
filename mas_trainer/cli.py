"""``mas-train [PRESET] [--config FILE] [--section.field VALUE ...]``: the command line of
:func:`mas_trainer.train.train`; with no arguments it runs the embedded default (``plan-path-tiny``:
a tiny model on a small Plan-Path, on the CPU). ``mas-eval`` is :mod:`mas_trainer.eval.cli`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from mas_envs.optional import require
from mas_trainer.config import (
    PRESETS,
    ConfigError,
    TrainConfig,
    build_config,
    config_from_dict,
    help_text,
)
from mas_trainer.outputs import find_run

__all__ = ["train_main"]

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
        run = find_run(resume)
        if run is None or run.run_dir != Path(resume):
            raise ConfigError(
                f"--run.resume {resume!r}: no config.json and checkpoints/ there; is it a run "
                "folder?"
            )
        base = config_from_dict(run.config)
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
    try:
        for module in ("torch", "transformers", "tqdm"):
            require(module, purpose="mas-train")
        from mas_trainer.train import train

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
