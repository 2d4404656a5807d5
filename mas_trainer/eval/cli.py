"""``mas-eval``: greedy evaluation of a policy on one env (``--env``) or a benchmark suite
(``--suite``), with one parser, one policy resolver and one play loop behind both forms."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mas_trainer.engines.openai import OpenAIError
from mas_trainer.eval.suite import BOARDS, DEFAULT_DATA, SUITES, resolve_suite
from mas_trainer.outputs import RunRef, find_run

__all__ = ["main"]

_DESCRIPTION = """Evaluate a policy with greedy decoding on the first N tasks of a test split.

forms:
  mas-eval --policy RUN [--episodes N] [--output R.json]
      a mas-train run (or one of its checkpoints) on the env it trained on: its env id, env
      options, turn limit, mode and token limit, from the run's config.json
  mas-eval --env ID --policy POLICY [--episodes N] [--output R.json]
      one env: success with its 95% Wilson interval and mean turns (a JSON file with --output);
      a run evaluated on another env than its own gets a warning
  mas-eval --suite NAME --policy POLICY --output R.json [--data DIR]
      a benchmark suite: a leaderboard result file (mas-leaderboard validate checks it); the
      paper's code and math suites read the files mas-data prepare wrote to DIR
  mas-eval --reasoner-scaling [BOARD] --policy POLICY --output FOLDER [--reasoners 1 2 3 4]
      the paper's reasoner-count figure: a math board (default aime24) played by teams of
      1, 2, ... reasoners; writes a result file per team size, scaling.json and scaling.png

POLICY is one of:
  random | oracle             the reference policies (the floor and the ceiling)
  a model folder or hub id    one model plays every role (save_pretrained folders included)
  tiny:<preset>               a model built in code, random weights from --seed
  a mas-train run folder      each role played by the policy that trained it (the latest
                              checkpoint; or name one: RUN/checkpoints/step-N); one policy's
                              folder of a checkpoint (RUN/checkpoints/step-N/<policy>) is a model
  openai:<model>              a model served over an OpenAI-compatible API (options below)"""

_EPILOG = """examples:
  mas-eval --policy runs/my-run --episodes 100 --output eval.json
  mas-eval --policy runs/my-run/checkpoints/step-000020/planner
  mas-eval --suite default-run-v0 --policy runs/my-run --output my-run.json
  mas-eval --suite games-v0 --policy oracle --name oracle --output oracle.json
  OPENAI_BASE_URL=http://127.0.0.1:8000/v1 mas-eval --env mas/Math-v0 --policy openai:my-model"""

_MAX_NEW_TOKENS_HELP = (
    "token limit per agent turn. Default: a mas-train run's rollout.max_new_tokens when POLICY "
    "is a run (or one of its checkpoints or policy folders); else the largest of the mas-train "
    "presets that train this env with this kind of model (tiny: models: the tiny presets; others: "
    "the GPU presets); else 64 for tiny: models and 2048 for other models. mas-eval prints which."
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mas-eval",
        usage="mas-eval (--env ID | --suite NAME | --reasoner-scaling [BOARD]) --policy POLICY "
        "[options]",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = p.add_argument_group("what to evaluate")
    form = what.add_mutually_exclusive_group()
    form.add_argument(
        "--env",
        metavar="ID",
        help="one env: a registered id (e.g. mas/PlanPath-v0) or package.module:Class "
        "(default when POLICY is a mas-train run: the env it trained on)",
    )
    form.add_argument(
        "--suite", metavar="NAME", help=f"a suite {sorted(SUITES)} or one board's name"
    )
    form.add_argument(
        "--reasoner-scaling",
        nargs="?",
        const="aime24",
        metavar="BOARD",
        help="the reasoner-count scaling of a math board (default aime24)",
    )
    what.add_argument("--policy", required=True, help="see POLICY above")
    what.add_argument(
        "--episodes",
        type=int,
        metavar="N",
        help="the first N tasks (--env: default 100; --suite: default the board's N, fewer "
        "makes a partial result, which leaderboards reject)",
    )
    what.add_argument(
        "--mode",
        choices=["mas", "single", "tool"],
        help="mas: the team; single: one agent does the whole task (the baseline); tool: the "
        "tool agent alone with its code tool (Plan-Path code ids: the paper's SA-code ablation). "
        "Default: a run's env.mode, else mas",
    )
    what.add_argument(
        "--output",
        metavar="FILE",
        help="write the result as JSON (--suite: required; .json or .json.gz; "
        "--reasoner-scaling: a folder)",
    )
    what.add_argument(
        "--data",
        default=DEFAULT_DATA,
        metavar="DIR",
        help="the folder `mas-data prepare --out` wrote, for the data boards (livecodebench-v6, "
        f"apps, codecontests, aime24, aime25, olympiadbench); default {DEFAULT_DATA!r}",
    )
    what.add_argument(
        "--reasoners",
        type=int,
        nargs="+",
        metavar="N",
        help="--reasoner-scaling: the team sizes (default 1 2 3 4)",
    )

    env = p.add_argument_group("--env only")
    env.add_argument("--split", choices=["train", "validation", "test"], help="default: test")
    env.add_argument("--max-turns", type=int, metavar="N", help="override the env's turn limit")
    env.add_argument(
        "--env-options",
        metavar="JSON",
        help='env constructor arguments as JSON, e.g. \'{"rows": 5, "cols": 5}\' (default: a '
        "run's own env options when it trained this env, else none)",
    )
    env.add_argument(
        "--role-map",
        nargs="*",
        metavar="ROLE=POLICY_ROLE",
        help="play ROLE with the policy of POLICY_ROLE (a run with a policy per role; "
        "tool=planner is the swapped-roles ablation)",
    )

    suite = p.add_argument_group("--suite only")
    suite.add_argument(
        "--name", metavar="TEXT", help="display name of the entry (default: the policy)"
    )
    suite.add_argument(
        "--prompts",
        choices=["hash", "full"],
        help="log prompt hashes (default; validate replays to check them) or full texts",
    )

    dec = p.add_argument_group("decoding (model policies; always greedy)")
    dec.add_argument("--max-new-tokens", type=int, metavar="N", help=_MAX_NEW_TOKENS_HELP)
    dec.add_argument(
        "--no-system-message",
        action="store_true",
        help="leave the env's system text out of the prompt (default: as a run was trained)",
    )
    dec.add_argument(
        "--enable-thinking",
        choices=["true", "false", "default"],
        help="the chat template's thinking switch (Qwen3's enable_thinking), for local templates "
        "and an openai: server's (sent as chat_template_kwargs in chat mode): false is the "
        "paper's setting; default passes nothing (the template's own default; for hosted APIs "
        "that reject chat_template_kwargs). Default: a run's rollout.enable_thinking, else false",
    )
    dec.add_argument("--device", default="cpu", metavar="DEV", help="torch device of local models")
    dec.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    dec.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the random policy / tiny models"
    )

    oa = p.add_argument_group("openai:<model> policies")
    oa.add_argument(
        "--base-url",
        metavar="URL",
        help="the API root, e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL, else "
        "https://api.openai.com/v1, as the OpenAI client does)",
    )
    oa.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable that holds the API key (default: OPENAI_API_KEY; unset: no "
        "key is sent, as local servers need)",
    )
    oa.add_argument(
        "--openai-mode",
        default="chat",
        choices=["chat", "tokens"],
        help="chat: text in/out over /chat/completions; tokens: token ids over /completions "
        "(vLLM's server), needs --tokenizer",
    )
    oa.add_argument(
        "--tokenizer", metavar="DIR", help="local tokenizer folder for --openai-mode tokens"
    )
    oa.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="per-request timeout (s)"
    )
    oa.add_argument(
        "--concurrency", type=int, default=8, metavar="N", help="requests in flight at once"
    )
    return p


_ENV_ONLY = ("split", "max_turns", "env_options", "role_map")
_SUITE_ONLY = ("name", "prompts")
_FORM_OPTIONS = {
    "--env": _ENV_ONLY,
    "--suite": _SUITE_ONLY,
    "--reasoner-scaling": ("prompts", "reasoners"),
}


def _check(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.episodes is not None and args.episodes < 1:
        p.error("--episodes must be >= 1")
    form = "--env" if args.env else "--suite" if args.suite else "--reasoner-scaling"
    for other, names in _FORM_OPTIONS.items():
        for name in set(names) - set(_FORM_OPTIONS[form]):
            if getattr(args, name) is not None:
                flag = "--" + name.replace("_", "-")
                p.error(f"{flag} applies to {other} only")
    if not args.env and not args.output:
        p.error(f"{form} needs --output (the result file or folder to write)")


def main(argv: Sequence[str] | None = None) -> int:
    """``mas-eval``; returns the exit code (0 done, 2 bad arguments or a failed evaluation)."""
    p = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(argv)
    run = find_run(args.policy)
    if not (args.env or args.suite or args.reasoner_scaling):
        if run is None:
            p.error(
                "name what to evaluate: --env ID, --suite NAME or --reasoner-scaling (only a "
                "mas-train run as --policy defaults to the env it trained on)"
            )
        args.env = run.config["env"]["id"]
    if args.mode is None:
        args.mode = run.config["env"].get("mode", "mas") if run is not None else "mas"
    _check(p, args)
    try:
        if run is not None:
            _warn_other_env(args, run)
        if args.env:
            _env_form(args)
        elif args.suite:
            _suite_form(args, argv)
        else:
            _scaling_form(args, argv)
    except (KeyError, ValueError, FileNotFoundError, ImportError, OpenAIError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        end_progress = "\n" if not args.env else ""  # the suite form's progress line
        print(f"{end_progress}mas-eval: error: {msg}", file=sys.stderr)
        return 2
    return 0


def _warn_other_env(args: argparse.Namespace, run: RunRef) -> None:
    """Say loudly when a run is evaluated on an env (id or options) it did not train on: a score
    there measures transfer, not what the run learnt (a 5x5-trained team scores about the random
    floor on the registered 10x10 grid)."""
    # `problems` names data files (train and test files differ by design): not the env's settings
    options = {k: v for k, v in run.config["env"].get("options", {}).items() if k != "problems"}
    trained = (run.config["env"]["id"], options)
    if args.env:
        # the env form plays a run's own options on its own env id unless told otherwise
        default = trained[1] if args.env == trained[0] else {}
        asked = [(args.env, json.loads(args.env_options) if args.env_options else default)]
    else:
        boards = resolve_suite(args.suite or args.reasoner_scaling)
        asked = [(BOARDS[b].env_id, dict(BOARDS[b].kwargs)) for b in boards]
    asked = [(e, {k: v for k, v in o.items() if k != "problems"}) for e, o in asked]
    other = [a for a in asked if a != trained]
    if not other:
        return
    own = [k for k, b in BOARDS.items() if (b.env_id, dict(b.kwargs)) == trained]
    own_board = f" or --suite {own[0]}" if own else ""
    print(
        f"mas-eval: WARNING: {run.run_dir} trained on {trained[0]} with options "
        f"{json.dumps(trained[1])}; this evaluates it on "
        + ", ".join(f"{e} with options {json.dumps(o)}" for e, o in other)
        + ". That score measures transfer to another env, not what the run learnt: leave out "
        f"--env to evaluate the run on its own env{own_board}.",
        file=sys.stderr,
    )


def _decoding(args: argparse.Namespace, env_ids: Sequence[str]) -> tuple[dict[str, Any], Any]:
    """The resolver's options from the command line; a run folder's defaults where it has them."""
    from mas_trainer.eval.actors import REFERENCE_POLICIES, default_max_new_tokens

    run = find_run(args.policy)
    system_message = not args.no_system_message
    thinking = {"true": True, "false": False, "default": None}.get(args.enable_thinking, False)
    if run is not None:  # evaluate as it was trained, unless the command line says otherwise
        system_message = system_message and run.config["rollout"].get("system_message", True)
        if args.enable_thinking is None:  # a run made before the switch existed: False
            thinking = run.config["rollout"].get("enable_thinking", False)
    max_new_tokens = args.max_new_tokens
    if max_new_tokens is None and args.policy not in REFERENCE_POLICIES:
        max_new_tokens, source = default_max_new_tokens(args.policy, env_ids)
        print(
            f"mas-eval: at most {max_new_tokens} new tokens per turn (from {source}; "
            "--max-new-tokens overrides)",
            file=sys.stderr,
        )
    options = {
        "max_new_tokens": max_new_tokens,
        "system_message": system_message,
        "enable_thinking": thinking,
        "seed": args.seed,
        "device": args.device,
        "dtype": args.dtype,
        "base_url": args.base_url,
        "api_key_env": args.api_key_env,
        "openai_mode": args.openai_mode,
        "tokenizer": args.tokenizer,
        "timeout": args.timeout,
        "concurrency": args.concurrency,
    }
    return options, run


def _env_form(args: argparse.Namespace) -> None:
    from mas_trainer.eval.actors import parse_role_map
    from mas_trainer.eval.play import run_eval

    options, run = _decoding(args, [args.env])
    env_options: Any = json.loads(args.env_options) if args.env_options else {}
    if not isinstance(env_options, dict):
        raise ValueError("--env-options must be a JSON object")
    max_turns = args.max_turns
    if run is not None and run.config["env"]["id"] == args.env:  # the run's own env settings
        if args.env_options is None:
            env_options = dict(run.config["env"].get("options", {}))
        if max_turns is None:
            max_turns = run.config["env"].get("max_turns")
    split = args.split or "test"
    result = run_eval(
        args.env,
        args.policy,
        episodes=args.episodes or 100,
        split=split,
        mode=args.mode,
        max_turns=max_turns,
        env_options=env_options,
        role_map=parse_role_map(args.role_map or []),
        **options,
    )
    low, high = result["ci95"]
    print(
        f"{args.env} {split} ({args.mode}), policy {args.policy}: success "
        f"{100 * result['success']:.1f}% (95% CI {100 * low:.1f}-{100 * high:.1f}%, "
        f"n={result['episodes']}), mean turns {result['turns_mean']:.2f}"
    )
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.output}")


def _suite_form(args: argparse.Namespace, argv: Sequence[str]) -> None:
    from mas_trainer.eval.suite import run_suite, save_result

    boards = resolve_suite(args.suite)
    options, _ = _decoding(args, [BOARDS[b].env_id for b in boards])
    result = run_suite(
        boards,
        args.policy,
        name=args.name,
        mode=args.mode,
        episodes=args.episodes,
        prompts=args.prompts or "hash",
        command=["mas-eval", *argv],
        progress=lambda s: print(f"\r{s}", end="", file=sys.stderr, flush=True),
        data_dir=args.data,
        **options,
    )
    print(file=sys.stderr)
    for r in result["results"]:
        print(_aggregate_line(r["board"], r["aggregate"]))
    print(f"wrote {save_result(result, args.output)}")


def _aggregate_line(label: str, a: dict[str, Any]) -> str:
    return (
        f"{label}: success {100 * a['success']:.1f}% "
        f"(95% CI {100 * a['ci95'][0]:.1f}-{100 * a['ci95'][1]:.1f}%, n={a['episodes']}), "
        f"mean turns {a['turns_mean']:.2f}"
    )


def _scaling_form(args: argparse.Namespace, argv: Sequence[str]) -> None:
    from mas_trainer.eval.scaling import reasoner_scaling

    board = args.reasoner_scaling
    if board not in BOARDS:
        raise KeyError(f"no board {board!r}; boards: {sorted(BOARDS)}")
    options, _ = _decoding(args, [BOARDS[board].env_id])
    summary = reasoner_scaling(
        board,
        args.policy,
        args.reasoners or [1, 2, 3, 4],
        args.output,
        data_dir=args.data,
        episodes=args.episodes,
        prompts=args.prompts or "hash",
        command=["mas-eval", *argv],
        **options,
    )
    print(file=sys.stderr)
    for point in summary["points"]:
        n = point["reasoners"]
        label = f"{board}, {n} reasoner{'s' if n > 1 else ''}"
        print(_aggregate_line(label, point))
    print(f"wrote {Path(args.output) / 'scaling.png'} ({len(summary['points'])} team sizes)")
