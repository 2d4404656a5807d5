"""Held-out evaluation: greedy episodes on an env's test split, success with a Wilson interval.

Used by the training loop (``eval/*`` metrics) and by ``mas-eval``. Policies:

* ``random`` / ``oracle``: the reference policies of :mod:`mas_envs.policies` (floor and ceiling);
* a model path, hub id or ``tiny:<preset>``: one model plays every role;
* a run folder or one of its checkpoints: each role is played by the policy that trained it
  (``shared`` or one per role), unless ``role_map`` remaps them (the paper's swapped-roles ablation:
  ``{"tool": "planner"}`` lets the planner's policy play the tool's role too).

Episodes are the first N task ids of the split, in order, so two evaluations of the same N see
the same tasks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mas_envs.base import TextEnv
from mas_trainer.rollout import Episode, TreeRollout, env_factory

__all__ = [
    "evaluate_engines",
    "evaluate_reference",
    "load_checkpoint_policies",
    "parse_role_map",
    "run_eval",
    "summarize",
    "wilson_interval",
]


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a success rate (95% for ``z=1.96``); ``(0, 1)`` when ``n == 0``.

    Unlike the normal approximation it stays inside [0, 1] and is honest at 0/n and n/n.
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def summarize(episodes: Sequence[Episode], roles: Sequence[str]) -> dict[str, float]:
    """Success (with its Wilson interval), mean turns, mean return per role, format errors.

    ``episodes`` (the count) is an ``int``; every other value is a ``float``.
    """
    n = len(episodes)
    wins = sum(ep.success for ep in episodes)
    low, high = wilson_interval(wins, n)
    out: dict[str, float] = {
        "episodes": n,
        "success": wins / n if n else 0.0,
        "success_ci_low": low,
        "success_ci_high": high,
        "turns_mean": sum(ep.turns for ep in episodes) / n if n else 0.0,
        "format_errors_mean": sum(ep.format_errors for ep in episodes) / n if n else 0.0,
    }
    for role in roles:
        out[f"return/{role}"] = sum(ep.returns.get(role, 0.0) for ep in episodes) / max(n, 1)
    return out


def evaluate_engines(
    make_env: Callable[[], TextEnv],
    engines: Mapping[str, Any],
    tokenizer: Any,
    policy_of: Mapping[str, str],
    task_ids: Sequence[Any],
    *,
    max_new_tokens: int,
    keep_transcripts: bool = False,
    system_message: bool = True,
) -> tuple[dict[str, float], list[Episode]]:
    """Play one greedy episode per task with the given engines; return metrics and episodes."""
    from mas_trainer.engines import SamplingParams

    rollout = TreeRollout(
        make_env,
        engines,
        tokenizer,
        policy_of,
        k=1,
        params=SamplingParams(greedy=True, max_tokens=max_new_tokens),
        keep_transcripts=keep_transcripts,
        system_message=system_message,
    )
    result = rollout.run(list(task_ids), uid_prefix="eval/")
    roles = make_env().possible_agents
    return summarize(result.episodes, roles), result.episodes


def evaluate_reference(
    make_env: Callable[[], TextEnv], policy: str, task_ids: Sequence[Any], *, seed: int = 0
) -> tuple[dict[str, float], list[Episode]]:
    """Play the ``random`` or ``oracle`` reference policy on each task."""
    from mas_envs.policies import oracle_policy, play_episode, random_policy

    fn = oracle_policy if policy == "oracle" else random_policy(seed)
    episodes = []
    env = make_env()
    for task_id in task_ids:
        res = play_episode(env, fn, options={"task_id": task_id})
        episodes.append(
            Episode(
                uid=f"eval/{task_id}",
                task_id=task_id,
                success=res.success,
                turns=res.turns,
                returns=dict(res.returns),
                format_errors=res.format_errors,
            )
        )
    return summarize(episodes, env.possible_agents), episodes


def parse_role_map(items: Sequence[str]) -> dict[str, str]:
    """``["tool=planner"]`` -> ``{"tool": "planner"}``: ``tool`` plays with ``planner``'s policy."""
    out = {}
    for item in items:
        role, eq, source = item.partition("=")
        if not eq or not role or not source:
            raise ValueError(
                f"--role-map expects ROLE=POLICY_ROLE, e.g. tool=planner; got {item!r}"
            )
        out[role.strip()] = source.strip()
    return out


def _checkpoint_folder(path: Path) -> Path | None:
    """``path`` itself if it is a checkpoint, the latest checkpoint if it is a run folder."""
    if (path / "trainer_state.json").is_file():
        return path
    latest = path / "checkpoints" / "latest"
    if latest.is_file():
        folder = path / "checkpoints" / latest.read_text().strip()
        if (folder / "trainer_state.json").is_file():
            return folder
    return None


def load_checkpoint_policies(
    path: str | Path, *, device: str, dtype: Any, batch_size: int = 64
) -> tuple[dict[str, Any], Any, dict[str, str]] | None:
    """Load every policy of a run checkpoint; None when ``path`` is not a run or checkpoint.

    Returns:
        ``(engines by policy name, tokenizer, policy_of role -> policy)``.
    """
    from mas_trainer.policy import load_checkpoint_engines

    folder = _checkpoint_folder(Path(path))
    if folder is None:
        return None
    return load_checkpoint_engines(folder, device=device, dtype=dtype, batch_size=batch_size)


def run_eval(
    env_id: str,
    policy: str,
    *,
    episodes: int,
    split: str = "test",
    mode: str = "mas",
    max_turns: int | None = None,
    env_options: Mapping[str, Any] | None = None,
    role_map: Mapping[str, str] | None = None,
    max_new_tokens: int = 64,
    system_message: bool = True,
    device: str = "cpu",
    dtype: str = "float32",
    seed: int = 0,
) -> dict[str, Any]:
    """Evaluate ``policy`` on the first ``episodes`` tasks of ``env_id``'s ``split``.

    Args:
        env_id: A registered env id.
        policy: ``random``, ``oracle``, a model path / hub id / ``tiny:<preset>``, or a run
            folder or
            checkpoint folder written by ``mas-train``.
        episodes: Number of test tasks (the first N of the split).
        split: Which split to draw task ids from.
        mode: ``mas`` or ``single``.
        max_turns: Override the env's turn limit (None: the env's default).
        env_options: Extra env constructor arguments (difficulty).
        role_map: ``{role: policy_role}``: play ``role`` with the policy that plays ``policy_role``.
        max_new_tokens: Token limit per agent turn.
        system_message: Send the env's system text (as the policy was trained; a run folder's
            config decides this in ``mas-eval``).
        device: torch device for model policies.
        dtype: ``float32`` or ``bfloat16``.
        seed: Seed of the random policy.

    Returns:
        A JSON-able dict: env, policy, split, mode, ``env_options`` and ``max_turns`` as given,
        ``task_ids`` (every task id played, in order: the first ``episodes`` ids of the split, or
        all of them when the split is smaller), ``episodes`` (an int, the number played), success
        and its 95% Wilson interval, mean turns, mean returns per role, and the role -> policy
        map used.
    """
    kwargs: dict[str, Any] = {"mode": mode, "split": split, **(env_options or {})}
    if max_turns is not None:
        kwargs["max_turns"] = max_turns
    make_env = env_factory(env_id, **kwargs)
    probe = make_env()
    roles = list(probe.possible_agents)
    task_ids = list(probe.task_ids(split)[:episodes])
    policy_of: dict[str, str] = {}
    if policy in ("random", "oracle"):
        if role_map:
            raise ValueError("--role-map applies to trained policies, not to random/oracle")
        metrics, _ = evaluate_reference(make_env, policy, task_ids, seed=seed)
    else:
        import torch

        from mas_trainer.engines.transformers import TransformersEngine
        from mas_trainer.models import load_model

        torch_dtype = getattr(torch, dtype)
        loaded = load_checkpoint_policies(policy, device=device, dtype=torch_dtype)
        if loaded is None:
            model, tokenizer = load_model(policy, device=device, dtype=torch_dtype, seed=seed)
            engines = {"shared": TransformersEngine(model, tokenizer)}
            policy_of = dict.fromkeys(roles, "shared")
        else:
            engines, tokenizer, policy_of = loaded
        unknown = sorted(set(roles) - set(policy_of))
        if unknown:
            raise ValueError(f"the checkpoint has no policy for roles {unknown} of {env_id}")
        for role, source in (role_map or {}).items():
            if role not in roles or source not in policy_of:
                raise ValueError(
                    f"--role-map {role}={source}: both sides must be roles of {env_id} {roles}"
                )
        policy_of = {r: policy_of[(role_map or {}).get(r, r)] for r in roles}
        metrics, _ = evaluate_engines(
            make_env,
            engines,
            tokenizer,
            policy_of,
            task_ids,
            max_new_tokens=max_new_tokens,
            system_message=system_message,
        )
    return {
        "env_id": env_id,
        "policy": policy,
        "split": split,
        "mode": mode,
        "env_options": dict(env_options or {}),
        "max_turns": max_turns,
        "task_ids": task_ids,
        "policy_of": policy_of,
        "greedy": True,
        **metrics,
    }
