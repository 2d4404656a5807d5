"""Supervised warm start on oracle transcripts, so a tiny model learns the answer format first.

A randomly initialised model writes bytes that never parse, every reward in a group is the same
format penalty, and AT-GRPO has no signal. The warm start fixes that with plain supervised
fine-tuning: at every state the env's solver's answer (``env.oracle_action(agent)``) is the target.

The states come from episodes on the *training* split whose executed actions are the oracle's with
probability ``1 - explore`` and a well-formed random answer otherwise (the target is always the
oracle's). Executing some random actions shows the model the states it will meet itself: later
turns, and a planner prompt whose tool proposal is wrong, not only the perfect first turn (the idea
of DAgger, with a fixed mixing rate). A role may also play a near miss (``near_miss``: the env's
wrong answer of the kind a learner gives) or its own model's answer (``own_play``: DAgger with the
learner's policy), so that the roles after it learn from the reports they will really see.

A task whose data holds no oracle answer (a CodeContests problem published without a correct
Python solution: :class:`mas_envs.base.NoOracleError`) gives no samples; the warm start warns
with their count and plays the others, and the RL phase still trains on every task.

This is supervised learning, not RL: the training loop logs held-out success right after it, so
a run shows separately what the warm start and what AT-GRPO contributed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from mas_envs.base import NoOracleError, TextEnv
from mas_trainer.learner import cosine_decay
from mas_trainer.lockstep import lockstep
from mas_trainer.rollout import Tokenizers, encode_prompt, policy_tokenizers
from mas_trainer.samples import TrainSample

__all__ = ["EXPLORE", "Answer", "OracleSamples", "cosine_lr", "oracle_samples", "warm_start"]

EXPLORE = 0.3
"""The share of warm-start steps that play a random answer, for a role not given its own."""

Answer = Callable[[str, list[int]], str]
"""A role's own answer, ``answer(agent, prompt_ids) -> text``: its model's completion of the
encoded prompt (``own_play``)."""


class OracleSamples(NamedTuple):
    """What :func:`oracle_samples` played."""

    samples: list[TrainSample]
    """One per visited (state, agent) of the tasks that have an oracle."""
    skipped: list[Any]
    """The task ids (one entry per drawn episode) whose data has no oracle answer."""


def oracle_samples(
    make_env: Callable[[], TextEnv],
    tokenizer: Tokenizers,
    policy_of: Mapping[str, str],
    task_ids: Sequence[Any],
    *,
    rng: np.random.Generator,
    explore: float | Mapping[str, float] = EXPLORE,
    system_message: bool = True,
    enable_thinking: bool = False,
    oracle_share: Mapping[str, float] | None = None,
    near_miss: Mapping[str, float] | None = None,
    own_play: Mapping[str, float] | None = None,
    answer: Answer | None = None,
) -> OracleSamples:
    """One supervised sample per visited (state, agent): the prompt and the oracle's answer.

    Args:
        make_env: Builds a training-split env.
        tokenizer: The policies' tokenizer (chat template, eos), or one per policy name: each
            sample is tokenized by its own policy's.
        policy_of: Role -> policy name; each sample's ``policy`` routes it to that learner.
        task_ids: Training tasks to play.
        rng: Draws which actions are explored and the random answers.
        explore: Probability that a step executes a random answer instead of the oracle's; or
            one per role (roles not named: :data:`EXPLORE`).
        system_message: Include the env's system text in the prompt (as the rollouts do).
        enable_thinking: The chat template's thinking switch (as the rollouts pass it).
        oracle_share: Per role, the probability that a sample's target is the oracle's answer;
            otherwise it is a random well-formed answer (``env.random_action``). Roles not named
            here always get the oracle's. A share below 1 teaches the role the answer format and
            shows it the oracle's answer only sometimes: what solves the task is left to RL.
        near_miss: Per role, the probability that a step not explored plays the env's
            ``near_miss_action`` (a wrong answer like the role's own mistakes) instead of the
            oracle's; the target stays the oracle's. The other roles then see those mistakes,
            with the answer that wins despite them as their target.
        own_play: Per role, the probability that a step neither explored nor a near miss plays
            ``answer(agent, prompt_ids)``, the role's own model's answer, instead of the
            oracle's; the target stays the oracle's. The samples are drawn before the first
            supervised step, so this is the model as the warm start begins: for a trained role
            (e.g. a tool loaded with ``model.role_models``) the roles after it see its real
            reports, right and wrong, with the level's answer as their target.
        answer: A role's own answer (required when ``own_play`` names a role).

    Returns:
        The samples, whose ``completion_ids`` are the oracle text followed by the end-of-turn
        token, and the tasks skipped because the env has no oracle answer for them (warned).

    Raises:
        ValueError: No task of ``task_ids`` has an oracle answer, ``near_miss`` names a role
            of an env without ``near_miss_action``, or ``own_play`` names a role with no
            ``answer`` given.
    """
    tokenizers = policy_tokenizers(tokenizer, policy_of.values())
    env = make_env()
    if any(near_miss or {}) and not hasattr(env, "near_miss_action"):
        raise ValueError(
            f"optim.warmstart_near_miss is set ({dict(near_miss or {})}) but "
            f"{type(env).__name__} has no near_miss_action: leave it empty for this env"
        )
    if any(own_play or {}) and answer is None:
        raise ValueError(f"own_play is set ({dict(own_play or {})}) but no answer function is")
    out: list[TrainSample] = []
    skipped: list[Any] = []
    reasons: list[str] = []
    for task_id in task_ids:
        try:
            out += _episode(
                env, task_id, tokenizers, policy_of, rng, explore=explore,
                system_message=system_message, enable_thinking=enable_thinking,
                oracle_share=oracle_share, near_miss=near_miss or {}, own_play=own_play or {},
                answer=answer,
            )  # fmt: skip
        except NoOracleError as e:
            skipped.append(task_id)
            reasons.append(str(e))
    if skipped and not out:
        raise ValueError(
            f"none of the {len(skipped)} warm-start episodes has an oracle answer (e.g. "
            f"{reasons[0]}): the warm start needs training tasks with a reference solution; add "
            "some to the training split or set --optim.warmstart_steps 0"
        )
    if skipped:
        warnings.warn(
            f"warm start: skipped {len(skipped)} of {len(task_ids)} episode(s) whose task has no "
            f"oracle answer (e.g. {reasons[0]}); the RL phase still trains on them",
            stacklevel=2,
        )
    return OracleSamples(out, skipped)


def _episode(
    env: TextEnv,
    task_id: Any,
    tokenizers: Mapping[str, Any],
    policy_of: Mapping[str, str],
    rng: np.random.Generator,
    *,
    explore: float | Mapping[str, float],
    system_message: bool,
    enable_thinking: bool,
    oracle_share: Mapping[str, float] | None,
    near_miss: Mapping[str, float],
    own_play: Mapping[str, float],
    answer: Answer | None,
) -> list[TrainSample]:
    """The samples of one episode of ``task_id`` (none if its oracle fails: NoOracleError)."""
    out = []
    env.reset(options={"task_id": task_id})
    for agent in env.agent_iter():
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
            continue
        oracle = target = env.oracle_action(agent)
        share = (oracle_share or {}).get(agent, 1.0)
        if share < 1.0 and rng.random() >= share:
            target = env.random_action(rng, agent)
        tok: Any = tokenizers[policy_of[agent]]
        ids = [*list(tok.encode(target, add_special_tokens=False)), tok.eos_token_id]
        prompt = encode_prompt(
            tok, env.observe(agent), system=system_message, enable_thinking=enable_thinking
        )
        out.append(
            TrainSample(
                prompt_ids=prompt,
                completion_ids=ids,
                logprobs=[0.0] * len(ids),
                reward=0.0,
                group=(f"oracle/{task_id}", env.turn, agent),
                role=agent,
                policy=policy_of[agent],
            )
        )
        # The oracle's answer is played (a random one with probability explore, else a near miss
        # or the role's own answer with its probabilities), whatever the target: a role's random
        # targets do not change the states the other roles see. A role without near_miss or
        # own_play draws no number for them, so runs without them reproduce.
        played = oracle
        rate = explore.get(agent, EXPLORE) if isinstance(explore, Mapping) else explore
        if rng.random() < rate:
            played = env.random_action(rng, agent)
        elif near_miss.get(agent, 0.0) > 0 and rng.random() < near_miss[agent]:
            played = env.near_miss_action(rng, agent)
        elif own_play.get(agent, 0.0) > 0 and rng.random() < own_play[agent]:
            assert answer is not None  # checked by oracle_samples
            played = answer(agent, prompt)
        env.step(played)
    return out


def cosine_lr(lr: float, min_lr_ratio: float, step: int, steps: int) -> float:
    """Learning rate of 1-based ``step`` of ``steps``: ``lr`` at step 1, ``lr * min_lr_ratio`` at
    the last (:func:`mas_trainer.learner.cosine_decay` in between)."""
    if steps <= 1:
        return lr
    progress = (step - 1) / (steps - 1)  # 0 at the first step, 1 at the last
    return lr * cosine_decay(progress, min_lr_ratio)


def warm_start(
    learners: Mapping[str, Any],
    samples: Sequence[TrainSample],
    *,
    steps: int,
    batch_size: int,
    rng: np.random.Generator,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
    lr: float | None = None,
    min_lr_ratio: float = 1.0,
    lr_by_policy: Mapping[str, float] | None = None,
    steps_by_policy: Mapping[str, int] | None = None,
    side_by_side: bool = False,
    start: int = 0,
    save_every: int = 0,
    on_save: Callable[[int], None] | None = None,
) -> dict[str, float]:
    """Run ``steps`` supervised steps per policy on minibatches drawn from its own samples.

    With ``lr`` set, step ``s`` (1-based) uses a cosine decay from ``lr`` down to
    ``lr * min_lr_ratio`` at the last step: at a constant rate the loss stops falling at the
    level of the minibatch noise (Plan-Path: ~0.42 nats/token from step 100 on), and lowering
    the rate at the end is what takes it below that floor.

    Args:
        learners: Learner of each policy (``sft_update(batch) -> metrics``).
        samples: Oracle samples (routed by ``sample.policy``).
        steps: Supervised steps per policy.
        batch_size: Samples per step.
        rng: Draws the minibatches.
        on_step: Called with ``(step, metrics)`` after every step (progress, logging).
        lr: Peak learning rate of the schedule (``None``: each learner's own rate, constant).
        min_lr_ratio: Rate at the last step as a share of ``lr`` (1.0 = constant rate).
        lr_by_policy: Per policy name, a peak rate in place of ``lr`` (same schedule).
        steps_by_policy: Per policy name, its steps in place of ``steps``: its schedule spans
            them, and step ``s`` trains only the policies with at least ``s`` steps.
        side_by_side: Train the policies at the same time, each in a thread of its own
            (:func:`~mas_trainer.lockstep.lockstep`; the same minibatches and results). Only for
            learners that share no model.
        start: Steps already done (a resumed warm start): the minibatches are drawn as for a
            whole warm start and those of steps ``1..start`` are skipped.
        save_every: Call ``on_save(step)`` after every ``save_every``-th step (not after the
            last), when every policy has finished that step and none has begun the next.
        on_save: Saves a checkpoint of the learners (the caller's).

    Returns:
        The last step's metrics, prefixed by policy name when there are several policies.
    """
    by_policy: dict[str, list[TrainSample]] = {}
    for s in samples:
        by_policy.setdefault(s.policy, []).append(s)
    missing = sorted(set(by_policy) - set(learners))
    if missing:
        raise ValueError(f"warm-start samples for policies without a learner: {missing}")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio}")
    peak = {p: (lr_by_policy or {}).get(p, lr) for p in by_policy}
    length = {p: int((steps_by_policy or {}).get(p, steps)) for p in by_policy}
    # Every minibatch is drawn first, in a one-after-another run's order (step by step, policy by
    # policy), so that policies stepping side by side train on the same ones.
    draws: dict[str, list[np.ndarray]] = {p: [] for p in by_policy}
    for step in range(1, max(length.values(), default=0) + 1):
        for policy, pool in by_policy.items():
            if step <= length[policy]:
                size = min(batch_size, len(pool))
                draws[policy].append(rng.choice(len(pool), size=size, replace=False))
    prefix = {p: "" if len(by_policy) == 1 else f"{p}/" for p in by_policy}

    def sft_step(policy: str, step: int) -> dict[str, float]:
        rate = peak[policy]
        step_lr = None if rate is None else cosine_lr(rate, min_lr_ratio, step, length[policy])
        pool = by_policy[policy]
        m = learners[policy].sft_update([pool[i] for i in draws[policy][step - 1]], lr=step_lr)
        if step_lr is not None:
            m = {**m, "optim/lr": step_lr}
        return {f"{prefix[policy]}{k}": float(v) for k, v in m.items()}

    last: dict[str, float] = {}
    end = max(length.values(), default=0)
    chunk = save_every if save_every and on_save is not None else end
    # Chunks of ``save_every`` steps: between two chunks no policy is stepping (side by side,
    # the threads of a chunk are joined), so a checkpoint there is one consistent state.
    for done in range(start, end, max(chunk, 1)):
        upto = min(done + chunk, end)
        todo = {p: max(0, min(n, upto) - done) for p, n in length.items()}
        steps_of = partial(_shifted, sft_step, done)
        for step, per_policy in lockstep(steps_of, todo, side_by_side=side_by_side):
            last = {k: v for m in per_policy.values() for k, v in m.items()}
            if on_step is not None:
                on_step(done + step, last)
        if upto < end and on_save is not None:
            on_save(upto)
    return last


def _shifted(fn: Callable[[str, int], dict[str, float]], by: int, policy: str, step: int) -> Any:
    """``fn(policy, by + step)``: a chunk's step numbered in the whole warm start."""
    return fn(policy, by + step)
