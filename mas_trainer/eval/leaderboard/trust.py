"""Trust checks of a result file: :func:`validate` (schema, hashes, aggregates, a replay of every
logged action) and :func:`verify` (a re-run of the policy), and the ``verified.json`` marks.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mas_envs.optional import require
from mas_trainer.eval.suite import (
    BOARDS,
    RESULT_FORMAT,
    BoardSpec,
    DataMissingError,
    aggregate,
    board_task_ids,
    env_version,
    episode_hash,
    episodes_hash,
    load_result,
    prompt_hash,
)

__all__ = [
    "MAX_PROBLEMS",
    "ValidationError",
    "default_root",
    "file_sha256",
    "load_verified",
    "record_verified",
    "replay_episode",
    "validate",
    "validate_file",
    "verify",
]

MAX_PROBLEMS = 20
"""Stop collecting problems after this many (one tampered field can break many checks)."""


class ValidationError(ValueError):
    """A result file failed validation; ``problems`` lists every problem found."""

    def __init__(self, path: str, problems: list[str]) -> None:
        super().__init__(f"{path}: invalid result file:\n  - " + "\n  - ".join(problems))
        self.problems = problems


def default_root() -> Path:
    """``./leaderboards`` if it exists, else the repository's ``leaderboards/``."""
    here = Path("leaderboards")
    if (here / "schema.json").is_file():
        return here
    return Path(__file__).resolve().parents[3] / "leaderboards"  # the repository root


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------- validate


def _schema_problems(result: Mapping[str, Any], root: Path) -> list[str]:
    jsonschema = require("jsonschema", purpose="validating result files")
    schema = json.loads((root / "schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    out = []
    for err in sorted(validator.iter_errors(result), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        out.append(f"schema: at {where}: {err.message[:200]}")
    return out


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _aggregate_problems(
    env_id: str, stored: Mapping[str, Any], fresh: Mapping[str, Any]
) -> list[str]:
    out = []
    for key in ("episodes", "successes", "success", "turns_mean", "format_errors_mean"):
        if not _close(float(stored[key]), float(fresh[key])):
            out.append(
                f"{env_id}: aggregate {key} is {stored[key]!r} but the episode logs give "
                f"{fresh[key]!r} (a tampered or stale score)"
            )
    if not all(_close(a, b) for a, b in zip(stored["ci95"], fresh["ci95"], strict=True)):
        out.append(
            f"{env_id}: aggregate ci95 {stored['ci95']} does not match the episodes "
            f"({fresh['ci95']})"
        )
    if set(stored["return_mean"]) != set(fresh["return_mean"]) or not all(
        _close(stored["return_mean"][r], v) for r, v in fresh["return_mean"].items()
    ):
        out.append(f"{env_id}: aggregate return_mean does not match the episode logs")
    return out


def replay_episode(board: BoardSpec, mode: str, episode: Mapping[str, Any]) -> list[str]:
    """Replay an episode's logged actions in the env; return the disagreements (empty: it holds).

    Every prompt is regenerated and compared with its logged hash (and text, if logged); every
    reward, parse flag, the final success and the turn count are compared with the log.
    """
    where = f"{board.key} task {episode['task_id']!r}"
    env = board.make_env(mode)
    env.reset(options={"task_id": episode["task_id"]})
    for n, step in enumerate(episode["steps"]):
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            return [f"{where}: step {n} comes after the episode ended"]
        if step["agent"] != agent or step["turn"] != env.turn:
            return [
                f"{where}: step {n} is {step['agent']!r} at turn {step['turn']}, but the env "
                f"expects {agent!r} at turn {env.turn}"
            ]
        prompt = env.observe(agent)["prompt"]
        if prompt_hash(prompt) != step["prompt_hash"] or step.get("prompt", prompt) != prompt:
            return [
                f"{where}: step {n}: the logged prompt is not the env's prompt (another env "
                "version or settings?)"
            ]
        env.step(step["action"])
        reward, parsed = float(env.rewards[agent]), bool(env.infos[agent].get("parsed", True))
        if not _close(reward, float(step["reward"])) or parsed != step["parsed"]:
            return [
                f"{where}: step {n}: replaying the action gives reward {reward} "
                f"(parsed={parsed}), the log says {step['reward']} (parsed={step['parsed']})"
            ]
    agent = env.agent_selection
    if not (env.terminations[agent] or env.truncations[agent]):
        return [f"{where}: the log stops before the episode ended (missing steps)"]
    out = []
    if bool(env.success) != episode["success"]:
        out.append(
            f"{where}: the log says success={episode['success']}, replaying its actions "
            f"gives success={bool(env.success)}"
        )
    if env.turn != episode["turns"]:
        out.append(f"{where}: the log says {episode['turns']} turns, replay gives {env.turn}")
    return out


def _data_problems(board: BoardSpec, res: Mapping[str, Any]) -> list[str]:
    """A data board's result must be made on the same prepared test file as the one here."""
    try:
        here = board.data_record()
    except (DataMissingError, ValueError) as err:
        return [f"{board.key}: {err}"]
    theirs = res.get("data")
    if not isinstance(theirs, Mapping) or theirs.get("name") != board.data:
        return [f"{board.key}: the result does not record the {board.data} data it was made on"]
    if theirs.get("test_sha256") != here["test_sha256"]:
        inputs = {i["path"]: i["sha256"][:12] for i in theirs.get("inputs", [])}
        return [
            f"{board.key}: the result was made on a {board.data} test file with SHA-256 "
            f"{str(theirs.get('test_sha256'))[:16]}..., the one in {board.data_dir} has "
            f"{here['test_sha256'][:16]}... (prepared from other downloads? the result's "
            f"inputs: {inputs})"
        ]
    return []


def _env_problems(
    res: Mapping[str, Any], *, replay: bool, data_dir: str | Path | None
) -> list[str]:
    env_id = res["env_id"]
    key = res.get("board", env_id)
    board = BOARDS.get(key)
    if board is None:
        same = [b for b in BOARDS if b.rsplit("-v", 1)[0] == env_id.rsplit("-v", 1)[0]]
        hint = f" (the board of this env is {same[0]!r}: an env version mismatch)" if same else ""
        return [f"{key}: no leaderboard of this name{hint}; boards: {sorted(BOARDS)}"]
    board = board.resolve(data_dir)
    if board.env_id != env_id:
        same = board.env_id.rsplit("-v", 1)[0] == env_id.rsplit("-v", 1)[0]
        why = " (an env version mismatch)" if same else ""
        return [f"{key}: the board plays {board.env_id}, the result {env_id}{why}"]
    out = _data_problems(board, res) if board.data else []
    if out:
        return out
    env_id = key  # name the board in what follows
    n_tasks = "every task" if board.episodes is None else f"the first {board.episodes} ids"
    if res["env_version"] != env_version(board.env_id):
        out.append(
            f"{env_id}: env_version {res['env_version']} does not match the board's "
            f"version {env_version(board.env_id)}"
        )
    if dict(res["env_kwargs"]) != dict(board.kwargs):
        out.append(
            f"{env_id}: env_kwargs {res['env_kwargs']} differ from the board's "
            f"{dict(board.kwargs)} (boards use the id's registered settings)"
        )
    test_ids = board_task_ids(board)
    allowed = set(test_ids)
    seen: set[Any] = set()
    for ep in res["episodes"]:
        t = ep["task_id"]
        if t not in allowed:
            out.append(
                f"{env_id}: task id {t!r} is not one of the board's test tasks ({n_tasks} of "
                "the test split)"
            )
        elif t in seen:
            out.append(f"{env_id}: task id {t!r} appears twice")
        seen.add(t)
    missing = [t for t in test_ids if t not in seen]
    if missing:
        out.append(
            f"{env_id}: missing episode(s) for {len(missing)} of the board's "
            f"{len(test_ids)} test tasks, e.g. task id {missing[0]!r}"
        )
    if list(res["task_ids"]) != [ep["task_id"] for ep in res["episodes"]]:
        out.append(f"{env_id}: task_ids does not list the episodes' task ids in order")
    for ep in res["episodes"]:
        where = f"{env_id} task {ep['task_id']!r}"
        if episode_hash(ep) != ep["sha256"]:
            out.append(
                f"{where}: episode hash mismatch (the record was edited after it was written)"
            )
        returns = {
            r: sum(s["reward"] for s in ep["steps"] if s["agent"] == r) for r in res["roles"]
        }
        if set(returns) != set(ep["returns"]) or not all(
            _close(v, ep["returns"][r]) for r, v in returns.items()
        ):
            out.append(f"{where}: returns {ep['returns']} are not the sums of its step rewards")
        if ep["format_errors"] != sum(not s["parsed"] for s in ep["steps"]):
            out.append(f"{where}: format_errors does not count its unparsed steps")
    if episodes_hash(res["episodes"]) != res["episodes_sha256"]:
        out.append(
            f"{env_id}: episodes_sha256 does not match the episodes (episodes were added, "
            "removed, reordered or edited)"
        )
    out += _aggregate_problems(env_id, res["aggregate"], aggregate(res["episodes"], res["roles"]))
    if replay and not out:
        for ep in res["episodes"]:
            out += replay_episode(board, res["mode"], ep)
            if len(out) >= MAX_PROBLEMS:
                break
    return out


def validate(
    result: Mapping[str, Any],
    *,
    root: Path | None = None,
    replay: bool = True,
    data_dir: str | Path | None = None,
) -> list[str]:
    """Every problem of a result file, each named (empty list: valid).

    Args:
        result: A loaded result file.
        root: The leaderboard folder (for ``schema.json``); default :func:`default_root`.
        replay: Replay every episode in the env (the strongest check; seconds for the game boards,
            longer for code and math, whose tools run in the sandbox).
        data_dir: The prepared data of the data boards (default ``data``); a data board's result
            must have been made on the same test file (SHA-256).
    """
    root = default_root() if root is None else root
    problems = _schema_problems(result, root)
    if problems:
        return problems[:MAX_PROBLEMS]
    if result["format"] != RESULT_FORMAT:
        return [f"format {result['format']!r} is not {RESULT_FORMAT!r}"]
    ids = [r.get("board", r["env_id"]) for r in result["results"]]
    if len(set(ids)) != len(ids):
        problems.append(f"a board appears more than once in results: {ids}")
    for res in result["results"]:
        problems += _env_problems(res, replay=replay, data_dir=data_dir)
    return problems[:MAX_PROBLEMS]


def validate_file(
    path: Path, root: Path, replay: bool, data_dir: str | Path | None = None
) -> dict[str, Any]:
    result = load_result(path)
    problems = validate(result, root=root, replay=replay, data_dir=data_dir)
    if problems:
        raise ValidationError(str(path), problems)
    return result


# ---------------------------------------------------------------------------------- verify


def verify(
    result: Mapping[str, Any], *, device: str = "cpu", data_dir: str | Path | None = None
) -> list[str]:
    """Re-run the result's policy with its recorded settings; return the differences.

    Empty means every episode was reproduced exactly (same hashes). Entries served over HTTP
    (``openai`` policies) cannot be verified here: the weights are not ours to check.
    """
    from mas_trainer.eval.actors import resolve_policy
    from mas_trainer.eval.suite import play_board

    policy = result["policy"]
    if policy["kind"] == "openai":
        return [
            "an openai: entry is served by someone else's server: it cannot be re-run "
            "exactly here (verify with a local model path instead)"
        ]
    sampling = result["sampling"]
    kwargs: dict[str, Any] = {"seed": policy["seed"]}
    if result["model"] is not None:
        kwargs.update(
            max_new_tokens=sampling["max_tokens"],
            system_message=sampling.get("system_message", True),
            enable_thinking=sampling.get("enable_thinking", False),  # older files: the default
            device=device,
            dtype=result["model"].get("dtype", "float32"),
        )
    out = []
    for res in result["results"]:
        board = BOARDS[res.get("board", res["env_id"])].resolve(data_dir)
        setup = resolve_policy(policy["spec"], res["roles"], **kwargs)
        if result["model"] is not None and setup.model is not None:
            want, got = result["model"]["weights_sha256"], setup.model["weights_sha256"]
            if want != got:
                out.append(
                    f"{res['env_id']}: the weights of {policy['spec']!r} here differ from "
                    "the weights the result was made with (weights_sha256)"
                )
                continue
        fresh = play_board(
            board,
            setup.act,
            mode=res["mode"],
            episodes=len(res["episodes"]),
            prompts=result["meta"]["prompts"],
        )
        for old, new in zip(res["episodes"], fresh["episodes"], strict=True):
            if old["sha256"] != new["sha256"]:
                out.append(
                    f"{res['env_id']} task {old['task_id']!r}: {_first_difference(old, new)}"
                )
                break
        else:
            if fresh["aggregate"]["success"] != res["aggregate"]["success"]:
                out.append(f"{res['env_id']}: re-run success {fresh['aggregate']['success']}")
    return out


def _first_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """Where a re-run episode first departs from the logged one, in words."""
    for n, (a, b) in enumerate(zip(old["steps"], new["steps"], strict=False)):
        if a != b:
            key = next(
                (
                    k
                    for k in ("agent", "turn", "prompt_hash", "action", "reward", "parsed")
                    if a.get(k) != b.get(k)
                ),
                "prompt",
            )
            return (
                f"the re-run departs at step {n} ({a['agent']}, turn {a['turn']}): {key} "
                f"{str(a.get(key))[:60]!r} was logged, the re-run gives {str(b.get(key))[:60]!r}"
            )
    return (
        f"the re-run has {len(new['steps'])} steps, the log {len(old['steps'])} "
        f"(success {old['success']} -> {new['success']})"
    )


def load_verified(root: Path) -> dict[str, Any]:
    path = root / "verified.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def record_verified(root: Path, path: Path) -> None:
    verified = load_verified(root)
    rel = path.resolve().relative_to(root.resolve()).as_posix()
    verified[rel] = {"sha256": file_sha256(path)}
    text = json.dumps(dict(sorted(verified.items())), indent=2) + "\n"
    (root / "verified.json").write_text(text)
