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
from mas_trainer.baselines import CONTROLS, describe
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
With no arguments: the embedded default, preset 'plan-path-tiny' (a team of two tiny models
learns 5x5 Plan-Path, its tool writing programs the sandbox runs, on the CPU in about 13 minutes
on a slow 2-core machine; supervised warm start, then AT-GRPO).

positional:
  PRESET            one of: {presets}

options:
  -h, --help        show this help (every field below, with its value in PRESET) and exit
  --config FILE     a .json or .toml file of {{section: {{field: value}}}} (may name a "preset")
  --print-config    print the resolved config as JSON and exit
  --plan            print what each GPU will hold (engine weights and KV cache, learner weights,
                    gradients, AdamW moments, activations and logits at the preset's lengths:
                    torch's own accounting of one training step on fake tensors, nothing
                    allocated) and the checkpoints' disk; exit 1, saying what to change, if the
                    run does not fit
  --gpu-gib GIB     --plan: memory of each GPU in GiB (default: the visible GPU's, else 79, an
                    80 GB H100/A100; an H200 is 139)
  --run.resume DIR  continue the run in DIR (its config, then your overrides)

fields (--section.field VALUE or --section.field=VALUE):{fields}

examples:
  mas-train
  mas-train plan-path-tiny --rollout.k 8 --algo.policy_map per_role
  mas-train plan-path-tiny --env.options '{{"rows": 6, "cols": 6}}' --run.name my-run
  mas-train --run.resume runs/my-run
  mas-train plan-path-qwen3-1.7b --plan
"""


def _pop_option(args: list[str], name: str) -> str | None:
    """Remove ``name VALUE`` (or ``name=VALUE``) from ``args``; its value, or None."""
    for i, a in enumerate(args):
        if a == name:
            if i + 1 >= len(args):
                raise ConfigError(f"{name} needs a value")
            value = args[i + 1]
            del args[i : i + 2]
            return value
        if a.startswith(name + "="):
            del args[i]
            return a.split("=", 1)[1]
    return None


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
    """``mas-train``: returns the exit code (0 done, 1 stopped by a dead learner rank, 2 bad
    arguments, 130 interrupted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        rest = [a for a in argv if a not in ("-h", "--help")]
        try:
            cfg, _ = _resolve(rest)
        except ConfigError:
            cfg = None
        print(_TRAIN_USAGE.format(presets=", ".join(PRESETS), fields=help_text(cfg)))
        return 0
    plan = "--plan" in argv
    argv = [a for a in argv if a != "--plan"]
    try:
        gpu_gib = _pop_option(argv, "--gpu-gib")
        cfg, print_config = _resolve(argv)
    except ConfigError as err:
        print(f"mas-train: error: {err}", file=sys.stderr)
        return 2
    if plan and not print_config:
        return _plan_main(cfg, gpu_gib)
    if print_config:
        from mas_trainer.config import config_to_dict

        print(json.dumps(config_to_dict(cfg), indent=2))
        return 0
    try:
        for module in ("torch", "transformers", "tqdm"):
            require(module, purpose="mas-train")
        from mas_trainer.train import RunStopped, train

        summary = train(cfg)
    except (FileNotFoundError, ValueError, ImportError) as err:
        print(f"mas-train: error: {err}", file=sys.stderr)
        return 2
    except RunStopped as err:
        print(f"mas-train: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nmas-train: interrupted before RL started; nothing was saved", file=sys.stderr)
        return 130
    _print_summary(summary)
    return 130 if summary.get("interrupted") else 0


def _plan_main(cfg: TrainConfig, gpu_gib: str | None) -> int:
    """``--plan``: print the run's memory plan; 0 when it fits, 1 when not, 2 on bad input."""
    try:
        for module in ("torch", "transformers"):
            require(module, purpose="mas-train --plan")
        import torch

        from mas_trainer.plan import DEFAULT_GPU_GIB, plan_run

        if gpu_gib is not None:
            size = float(gpu_gib)
        elif torch.cuda.is_available():
            size = torch.cuda.get_device_properties(0).total_memory / 2**30
        else:
            size = DEFAULT_GPU_GIB
        if size <= 0:
            raise ValueError(f"--gpu-gib must be > 0, got {gpu_gib}")
        result = plan_run(cfg, size)
    except (ValueError, ImportError) as err:
        print(f"mas-train: error: {err}", file=sys.stderr)
        return 2
    print(result.render())
    return 0 if result.fits else 1


def _control_lines(summary: dict) -> list[str]:
    """The controls measured at the same budget for this config, each against this run's team."""
    if "success_final" not in summary:
        return []
    if "baselines" not in summary:
        return [
            "single agent, tool alone: no measured figures for this config "
            "(mas_trainer/baselines.json holds the presets' measured configs); measure them with "
            "experiments/compare_baselines.py"
        ]
    lines = []
    for key, label in CONTROLS.items():
        row = summary["baselines"]["rows"].get(key)
        if row is None:
            lines.append(
                f"{label}: not measured for this config "
                f"(experiments/compare_baselines.py --rows {key.removesuffix('-grpo')} {key})"
            )
            continue
        lo, hi = (min(max(x, 0.0), 1.0) for x in row["ci95_seeds"])  # a t-interval of a rate
        gap = 100 * (summary["success_final"] - row["mean"])
        source = describe(row["measured"]) if "measured" in row else summary["baselines"]["source"]
        lines.append(
            f"{label} at the same budget: {100 * row['mean']:.1f}% (95% CI {100 * lo:.1f}-"
            f"{100 * hi:.1f}%, mean of seeds {row['seeds']}); this run's team is "
            f"{abs(gap):.1f} points {'above' if gap >= 0 else 'below'} it\n"
            f"  (measured, not re-run: {source})"
        )
    return lines


def _print_summary(summary: dict) -> None:
    def pct(key: str) -> str:
        return f"{100 * summary[key]:.1f}%" if key in summary else "-"

    print(f"\nrun folder: {summary['run_dir']}")
    print(
        f"held-out success ({summary.get('eval_episodes', '?')} "
        f"{summary.get('eval_split', 'test')} tasks, greedy): "
        f"{pct('success_init')} before training, {pct('success_warmstart')} after warm start "
        f"(SFT), {pct('success_final')} after AT-GRPO"
    )
    if "success_warmstart" in summary and "success_final" in summary:
        gain = 100 * (summary["success_final"] - summary["success_warmstart"])
        print(f"RL's gain over this run's warm start: {gain:+.1f} points")
    for line in _control_lines(summary):
        print(line)
    print(
        f"wall time: {summary['wall_s']:.0f} s, CPU time: {summary.get('cpu_s', 0.0):.0f} s; "
        f"checkpoint: {summary['checkpoint']}"
    )
    if summary.get("interrupted"):
        print(
            f"interrupted at step {summary['steps']}; resume: mas-train --run.resume "
            f"{summary['run_dir']}"
        )
