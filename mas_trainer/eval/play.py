"""The one play loop of evaluation, and the one summary of its episodes.

:func:`play` plays one episode per task with an :data:`~mas_trainer.eval.actors.Actor`, every
episode in lockstep: at each step the pending actions of all live episodes go to the actor in one
batch (so an engine makes one ``generate`` call per policy). It is what the trainer's held-out
evaluation (:func:`evaluate_engines`, the ``eval/*`` metrics), ``mas-eval --env``
(:func:`run_eval`) and ``mas-eval --suite`` (:func:`mas_trainer.eval.suite.play_board`) run.

:func:`summarize` is the one summary of a list of episodes, with one set of keys: ``episodes``,
``successes``, ``success``, ``ci95`` (its 95% Wilson interval), ``turns_mean``,
``format_errors_mean`` and ``return_mean`` per role. Result files store it as each board's
``aggregate``; the trainer logs it as scalars (:func:`summary_metrics`).

Episodes are the first N task ids of a split, in order, so two evaluations of the same N see the
same tasks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mas_envs.base import TextEnv
from mas_trainer.eval.actors import (
    REFERENCE_POLICIES,
    Actor,
    Item,
    default_max_new_tokens,
    engine_actor,
    greedy,
    resolve_policy,
)
from mas_trainer.rollout import Episode, env_factory, episode_ended

__all__ = [
    "evaluate_engines",
    "play",
    "run_eval",
    "summarize",
    "summary_metrics",
    "wilson_interval",
]


def play(
    make_env: Callable[[], TextEnv],
    task_ids: Sequence[Any],
    act: Actor,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> list[Episode]:
    """Play one episode per task with ``act``, all episodes in lockstep (batched actions).

    Args:
        make_env: Builds a fresh env (one per task).
        task_ids: The tasks (``env.reset(options={"task_id": t})``).
        act: Answers each batch of pending actions.
        progress: Called with ``(episodes done, episodes)`` after each batched step.

    Returns:
        One :class:`~mas_trainer.rollout.Episode` per task, in order, whose ``transcript`` has one
        ``{"turn", "agent", "prompt", "action", "reward", "parsed", "reason"}`` per step.
    """
    envs = []
    for t in task_ids:
        env = make_env()
        env.reset(options={"task_id": t})
        envs.append(env)
    episodes = [
        Episode(f"eval/{n}", t, returns=dict.fromkeys(env.possible_agents, 0.0))
        for n, (t, env) in enumerate(zip(task_ids, envs, strict=True))
    ]
    live = list(range(len(envs)))
    while live:
        items: list[Item] = []
        for i in live:
            agent = envs[i].agent_selection
            items.append((i, envs[i], agent, envs[i].observe(agent)))
        for (i, env, agent, obs), text in zip(items, act(items), strict=True):
            turn = env.turn
            env.step(text)
            reward = float(env.rewards[agent])
            info = env.infos[agent]
            ep = episodes[i]
            ep.returns[agent] += reward
            parsed = bool(info.get("parsed", True))
            ep.format_errors += not parsed
            ep.transcript.append(
                {
                    "turn": turn,
                    "agent": agent,
                    "prompt": obs["prompt"],
                    "action": text,
                    "reward": reward,
                    "parsed": parsed,
                    "reason": info.get("reason", ""),
                }
            )
        live = [i for i in live if not episode_ended(envs[i])]
        if progress:
            progress(len(envs) - len(live), len(envs))
    for ep, env in zip(episodes, envs, strict=True):
        ep.success = bool(env.success)
        ep.turns = int(env.turn)
    return episodes


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


def summarize(episodes: Sequence[Episode], roles: Sequence[str]) -> dict[str, Any]:
    """The summary of ``episodes`` (recomputable from their logs alone).

    Returns:
        ``episodes`` and ``successes`` (ints), ``success`` (the primary metric), ``ci95`` (its
        95% Wilson interval, ``[low, high]``), ``turns_mean``, ``format_errors_mean`` and
        ``return_mean`` (``{role: mean return}``).
    """
    n = len(episodes)
    wins = sum(bool(ep.success) for ep in episodes)
    low, high = wilson_interval(wins, n)
    return {
        "episodes": n,
        "successes": wins,
        "success": wins / n if n else 0.0,
        "ci95": [low, high],
        "turns_mean": sum(ep.turns for ep in episodes) / n if n else 0.0,
        "format_errors_mean": sum(ep.format_errors for ep in episodes) / n if n else 0.0,
        "return_mean": {
            r: sum(ep.returns.get(r, 0.0) for ep in episodes) / n if n else 0.0 for r in roles
        },
    }


def summary_metrics(summary: Mapping[str, Any], prefix: str) -> dict[str, float]:
    """A :func:`summarize` result as scalar metrics: ``<prefix>/<key>``, with ``ci95`` as
    ``<prefix>/ci95_low`` and ``<prefix>/ci95_high`` and ``return_mean`` per role as
    ``<prefix>/return_mean/<role>``."""
    out: dict[str, float] = {}
    for key, value in summary.items():
        if key == "ci95":
            out[f"{prefix}/ci95_low"], out[f"{prefix}/ci95_high"] = value
        elif isinstance(value, Mapping):
            out.update({f"{prefix}/{key}/{k}": v for k, v in value.items()})
        else:
            out[f"{prefix}/{key}"] = value
    return out


def evaluate_engines(
    make_env: Callable[[], TextEnv],
    engines: Mapping[str, Any],
    tokenizer: Any,
    policy_of: Mapping[str, str],
    task_ids: Sequence[Any],
    *,
    max_new_tokens: int,
    system_message: bool = True,
    enable_thinking: bool = False,
) -> tuple[dict[str, Any], list[Episode]]:
    """Play one greedy episode per task with the given engines (the trainer's held-out eval).

    ``tokenizer`` is one shared by the policies or one per policy name; ``system_message`` and
    ``enable_thinking`` encode prompts as in training (:func:`mas_trainer.rollout.encode_prompt`).

    Returns:
        The :func:`summarize` summary and the episodes (with transcripts).
    """
    act = engine_actor(
        engines,
        tokenizer,
        policy_of,
        greedy(max_new_tokens),
        system_message=system_message,
        enable_thinking=enable_thinking,
    )
    episodes = play(make_env, task_ids, act)
    return summarize(episodes, make_env().possible_agents), episodes


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
    max_new_tokens: int | None = None,
    system_message: bool = True,
    seed: int = 0,
    **policy_options: Any,
) -> dict[str, Any]:
    """Evaluate ``policy`` on the first ``episodes`` tasks of ``env_id``'s ``split``
    (``mas-eval --env`` as a function).

    Args:
        env_id: A registered env id, or ``package.module:Class``.
        policy: A policy string (:func:`mas_trainer.eval.actors.resolve_policy`).
        episodes: Number of tasks (the first N of the split).
        split: Which split to draw task ids from.
        mode: ``mas`` or ``single``.
        max_turns: Override the env's turn limit (None: the env's default).
        env_options: Extra env constructor arguments (difficulty).
        role_map: ``{role: policy_role}``: play ``role`` with the policy that plays ``policy_role``.
        max_new_tokens: Token limit per agent turn (None:
            :func:`~mas_trainer.eval.actors.default_max_new_tokens`).
        system_message: Send the env's system text.
        seed: Seed of the random policy and of ``tiny:`` models.
        **policy_options: More :func:`~mas_trainer.eval.actors.resolve_policy` arguments
            (``device``, ``dtype``, the ``openai:`` settings).

    Returns:
        A JSON-able dict: env, policy, split, mode, ``env_options`` and ``max_turns`` as given,
        ``task_ids`` (every task id played, in order), ``episode_success`` (1 or 0 for each of
        them: two evaluations of the same tasks pair up episode by episode), ``policy_of``,
        ``greedy``, ``max_new_tokens`` and ``system_message``, then the :func:`summarize` keys.
    """
    kwargs: dict[str, Any] = {"mode": mode, "split": split, **(env_options or {})}
    if max_turns is not None:
        kwargs["max_turns"] = max_turns
    make_env = env_factory(env_id, **kwargs)
    probe = make_env()
    roles = list(probe.possible_agents)
    task_ids = list(probe.task_ids(split)[:episodes])
    if max_new_tokens is None and policy not in REFERENCE_POLICIES:
        max_new_tokens, _ = default_max_new_tokens(policy, [env_id])
    setup = resolve_policy(
        policy,
        roles,
        max_new_tokens=max_new_tokens,
        seed=seed,
        system_message=system_message,
        role_map=role_map,
        hash_weights=False,
        **policy_options,
    )
    played = play(make_env, task_ids, setup.act)
    return {
        "env_id": env_id,
        "policy": policy,
        "split": split,
        "mode": mode,
        "env_options": dict(env_options or {}),
        "max_turns": max_turns,
        "task_ids": task_ids,
        "episode_success": [int(bool(ep.success)) for ep in played],
        "policy_of": setup.info["policy_of"],
        "greedy": True,
        "max_new_tokens": max_new_tokens,
        "system_message": system_message,
        **summarize(played, roles),
    }
