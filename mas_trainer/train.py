"""The AT-GRPO training loop (``mas-train``), top to bottom.

Which GRPO variant this runs, exactly (the paper's AT-GRPO; docs/algorithm.md):

* **Samples.** Tree rollouts (:mod:`mas_trainer.rollout`): per root env, per turn t, per agent i, K
  candidates from the same state on K clones, each scored by agent i's *immediate* reward ``r =
  alpha * team + local`` (no returns, no discounting); the episode continues from the best
  candidate. ``rollout.mode=parallel`` is the paper's parallel-sampling baseline instead.
* **Groups and advantages.** Group key ``(root uid, t, i)``; ``A = (r - mean) / (std + eps)`` with
  the unbiased std of the group, on every completion token; singleton groups get 0; zero-variance
  groups are counted (``algo/zero_var_groups``) and, with ``algo.drop_zero_var``, left out; the
  paper's group filter leaves out the lowest-mean share of each step's groups
  (``algo.drop_low_mean``, 0.3 for code and math; ``algo.drop_low_std`` by std).
* **Loss.** PPO-clip on token ratios (``algo.clip_low``/``clip_high``, dual clip), token-mean over
  the mini-batch, optional k3 KL to the initial policy (``algo.kl_coef``, off by default), AdamW,
  gradient clip. One epoch over each step's samples; old log-probs are recomputed by the learner,
  so the ratio starts at 1 and ``perf/logprob_mismatch`` shows any engine/learner numeric gap.
* **Policies.** ``shared`` (one model, all samples), ``per_role`` (one model per role, each trained
  on its own role's samples), ``per_role_lora`` (one frozen base with one LoRA adapter per role).
* **Before RL, optionally:** a supervised warm start on oracle transcripts
  (:mod:`mas_trainer.warmstart`). Held-out success is logged before it, after it and after RL, so
  the run shows what SFT and what RL contributed.

* **Model selection** (``eval.select_every``): every N steps greedy episodes of the *validation*
  split; the best weights so far are kept as ``checkpoints/best`` beside the latest, and the run
  ends with a test evaluation of them (``eval_best/*``). The test split never chooses anything.

Phases, one function each, in the order :func:`train` calls them: 0 :func:`_setup`; 1
:func:`_evaluate_untrained` (held-out eval at step 0); 2 :func:`_warm_start` (SFT + eval); 3
:func:`_rl_steps`, each :func:`_rl_step` (3.1 rollout, 3.2 advantages, 3.3 update, 3.4 sync, 3.5
log/eval/select) then a save; 4 :func:`_finish` (final eval, checkpoint, test eval of the best
checkpoint, plots, summary). What passes between them is one typed
:class:`~mas_trainer.outputs.TrainState`, the same object a checkpoint saves.

Ctrl-C during RL saves a checkpoint and returns (an update in progress finishes first; a rollout
in progress is dropped, so the checkpoint is the state after the last whole step);
``--run.resume RUN_DIR`` continues the same run from its newest complete checkpoint: the logs are
cut back to that checkpoint (no step is logged twice), overrides take effect (``optim.lr`` and
``optim.weight_decay`` are set in the restored optimiser) or are refused with the reason, and a
folder without a complete checkpoint is refused (``--run.fresh true`` starts it over). The warm
start checkpoints every ``run.warmstart_save_every`` steps and at its end (``step-000000``), so a
kill during it resumes there; a finished run that is resumed with no more steps logs its final
evaluation once (kept in the checkpoint), without playing it again.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from mas_envs.base import TextEnv
from mas_trainer import at_grpo, baselines
from mas_trainer.config import ConfigError, TrainConfig, config_to_dict
from mas_trainer.distributed.handles import LearnerRankDied
from mas_trainer.engines import SamplingParams
from mas_trainer.eval.play import evaluate_engines, summary_metrics
from mas_trainer.lockstep import once_each
from mas_trainer.outputs import RunDir, TrainState, cpu_seconds, resume_point
from mas_trainer.plots import plot_run
from mas_trainer.policy import (
    Policy,
    build_policies,
    close_engines,
    load_learner_state,
    role_policies,
    save_checkpoint,
    sync_engines,
    tokenizers_of,
)
from mas_trainer.rollout import TreeRollout, env_factory
from mas_trainer.warmstart import oracle_samples, warm_start

__all__ = ["RunStopped", "train"]


def train(cfg: TrainConfig, run_path: str | Path | None = None) -> dict[str, Any]:
    """Run AT-GRPO as configured; return the run summary (also written to ``summary.json``).

    On ``run.backend=ray`` the run's actors and resource pools are freed when it ends (or fails);
    the cluster stays up; engine processes (``--model.engine vllm``) end with the run.

    Args:
        cfg: The resolved config.
        run_path: The run folder (default: ``run.resume`` or ``run.out_dir/run.name``).

    Raises:
        RunStopped: A learner rank died (Ray backend); the message has the resume command.
    """
    name = cfg.run.name or f"{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    path = Path(run_path or cfg.run.resume or Path(cfg.run.out_dir) / name)
    try:
        with contextlib.ExitStack() as at_exit:
            run, state = _setup(cfg, path, at_exit)
            m_init = _evaluate_untrained(run, state) if run.resumed_from is None else None
            _warm_start(run, state)
            stopped_at = _rl_steps(run, state)
            return _finish(run, state, stopped_at=stopped_at, m_init=m_init)
    except LearnerRankDied as err:
        raise RunStopped(err, path) from err


class RunStopped(RuntimeError):
    """The run cannot go on (a learner rank died); its complete checkpoints stay, and the message
    says how to resume from the last one."""

    def __init__(self, cause: BaseException, path: Path) -> None:
        self.path = path
        has_checkpoint = (path / "checkpoints" / "latest").is_file()
        how = (
            f"resume it from its last complete checkpoint with:\n  mas-train --run.resume {path}"
            if has_checkpoint
            else "it had saved no checkpoint yet (run.save_every sets how often it saves); start "
            f"it over with:\n  mas-train --run.resume {path} --run.fresh true"
        )
        super().__init__(f"{cause}\nthe run stopped; {how}")


@dataclass
class _Run:
    """What every phase uses and none changes: the config, the run folder, the policies (their
    engines and learners), the envs and task lists, the generators (their states are saved in
    :class:`TrainState`) and the session's clocks."""

    cfg: TrainConfig
    out: RunDir
    resumed_from: Path | None
    policies: dict[str, Policy]
    side_by_side: bool
    tokenizers: Any
    policy_of: dict[str, str]
    roles: list[str]
    make_env: Callable[[], TextEnv]
    make_eval_env: Callable[[], TextEnv]
    make_select_env: Callable[[], TextEnv]
    train_ids: Sequence[int | str]
    eval_tasks: list[int | str]
    select_tasks: list[int | str]
    rng: np.random.Generator
    rollout: TreeRollout
    t_start: float
    cpu_start: float

    @property
    def learners(self) -> dict[str, Any]:
        """Each policy's learner, one for both phases (the warm start's AdamW state carries
        into RL)."""
        return {n: p.learner for n, p in self.policies.items()}

    @property
    def show(self) -> bool:
        return self.cfg.run.progress


# ---------------------------------------------------------------------------- 0. setup


def _setup(cfg: TrainConfig, path: Path, at_exit: contextlib.ExitStack) -> tuple[_Run, TrainState]:
    """The run folder (a resume's checkpoint read back, its logs rewound), the policies with
    their learners, the envs, the task lists and the rollout."""
    import torch

    t_start, cpu_start = time.perf_counter(), cpu_seconds()
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    ckpt = resume_point(path, fresh=cfg.run.fresh) if cfg.run.resume else None
    state = TrainState()
    if ckpt is not None:
        state = TrainState.load(ckpt)
        changes = _resume_changes(json.loads((path / "config.json").read_text()), cfg, state)
        if state.logs is not None:  # what was logged after the checkpoint goes (logged again)
            RunDir.rewind(path, state.logs)
        if cfg.run.progress:
            listed = "; ".join(changes) if changes else "no overrides"
            print(f"[resume] {path} from {ckpt.name} (step {state.step}): {listed}")
    out = RunDir(path, wandb_config=config_to_dict(cfg) if cfg.run.wandb else None)
    out.write_json("config.json", config_to_dict(cfg))
    env_kwargs = {"mode": cfg.env.mode, "alpha": cfg.env.alpha, "max_turns": cfg.env.max_turns}
    make_env = env_factory(cfg.env.id, split="train", **env_kwargs, **cfg.env.options)
    make_eval_env = env_factory(cfg.env.id, split=cfg.eval.split, **env_kwargs, **cfg.env.options)
    make_select_env = env_factory(cfg.env.id, split="validation", **env_kwargs, **cfg.env.options)
    probe = make_env()
    roles = list(probe.possible_agents)
    policy_of = role_policies(cfg, roles)
    names = sorted(set(policy_of.values()))
    if ckpt is None:
        state.policy_of = policy_of
    rollout_cls: Callable[..., TreeRollout] = TreeRollout
    if cfg.run.backend == "ray":  # engines, learners, env workers as Ray actors
        from mas_trainer.distributed.build import build_ray_policies

        on_ray = build_ray_policies(cfg, names, ckpt)
        at_exit.callback(on_ray.shutdown)
        policies, rollout_cls = on_ray.policies, on_ray.rollout_class
    else:  # engines (vLLM: a process each), learners, placement: each policy built whole
        policies = build_policies(cfg, names, ckpt)
        at_exit.callback(close_engines, policies)
    tokenizers = tokenizers_of(policies)  # each policy's own (a team may mix base models)
    rng = np.random.default_rng(cfg.run.seed)
    if state.rng is not None:
        rng.bit_generator.state = state.rng
    rollout = rollout_cls(
        make_env,
        {n: p.engine for n, p in policies.items()},
        tokenizers,
        policy_of,
        k=cfg.rollout.k,
        params=SamplingParams(
            temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p,
            max_tokens=cfg.rollout.max_new_tokens,
        ),
        mode=cfg.rollout.mode,
        tie_break=cfg.rollout.tie_break,
        seed=cfg.run.seed,
        prefetch=cfg.rollout.prefetch,
        system_message=cfg.rollout.system_message,
        enable_thinking=cfg.rollout.enable_thinking,
        cohorts=cfg.rollout.cohorts,
    )
    if state.rollout_rng is not None:
        rollout.rng.bit_generator.state = state.rollout_rng
    run = _Run(
        cfg=cfg,
        out=out,
        resumed_from=ckpt,
        policies=policies,
        side_by_side=cfg.run.learners_side_by_side and _can_step_side_by_side(cfg, policies),
        tokenizers=tokenizers,
        policy_of=policy_of,
        roles=roles,
        make_env=make_env,
        make_eval_env=make_eval_env,
        make_select_env=make_select_env,
        train_ids=probe.task_ids("train"),  # lazy: a seed range can hold billions of ids
        eval_tasks=list(make_eval_env().task_ids(cfg.eval.split)[: cfg.eval.episodes]),
        select_tasks=list(make_select_env().task_ids("validation")[: cfg.eval.select_episodes]),
        rng=rng,
        rollout=rollout,
        t_start=t_start,
        cpu_start=cpu_start,
    )
    return run, state


# ---------------------------------------------------------------------------- 1. eval at step 0


def _evaluate_untrained(run: _Run, state: TrainState) -> dict[str, float]:
    """Held-out success of the untrained policies (a resumed run logged it already)."""
    m = _evaluate(run, 0, "init")
    run.out.log(0, m, phase="init")
    state.summary["success_init"] = m["eval/success"]
    if run.show:
        print(f"[step 0] held-out success before training: {m['eval/success']:.3f}")
    return m


# ---------------------------------------------------------------------------- 2. warm start


def _own_answer(run: _Run, agent: str, prompt: list[int]) -> str:
    """``agent``'s own answer to ``prompt`` (``optim.warmstart_own_play``): its policy's engine
    samples it as the rollouts do, or greedily (``optim.warmstart_own_play_decoding``)."""
    policy = run.policy_of[agent]
    params = run.rollout.params
    if run.cfg.optim.warmstart_own_play_decoding == "greedy":
        params = replace(params, greedy=True)
    seed = int(run.rng.integers(2**31))
    (completion,) = run.policies[policy].engine.generate([prompt], params, seed=seed)
    text: str = run.rollout.tokenizers[policy].decode(
        completion.token_ids, skip_special_tokens=True
    )
    return text


def _warm_start(run: _Run, state: TrainState) -> None:
    """Supervised steps on oracle transcripts, then a held-out evaluation and a checkpoint.

    A resume in the middle restores the generator to where the warm start began, so the same
    oracle episodes and minibatches are drawn, and skips the steps already done."""
    from tqdm import tqdm

    cfg = run.cfg
    steps = max(cfg.optim.warmstart_steps_of(name) for name in run.policies)
    if not steps or state.warmstart_done:
        return
    t0 = time.perf_counter()
    if state.warmstart_rng is None:
        state.warmstart_rng = dict(run.rng.bit_generator.state)
    else:
        run.rng.bit_generator.state = state.warmstart_rng
    tasks = [
        run.train_ids[int(i)]
        for i in run.rng.integers(len(run.train_ids), size=cfg.optim.warmstart_episodes)
    ]
    data, no_oracle = oracle_samples(
        run.make_env,
        run.tokenizers,
        run.policy_of,
        tasks,
        rng=run.rng,
        system_message=cfg.rollout.system_message,
        enable_thinking=cfg.rollout.enable_thinking,
        oracle_share=cfg.optim.warmstart_oracle_share,
        explore=cfg.optim.warmstart_explore,
        near_miss=cfg.optim.warmstart_near_miss,
        own_play=cfg.optim.warmstart_own_play,
        answer=partial(_own_answer, run),
    )
    bar = tqdm(total=steps, initial=state.warmstart_step, desc="warm start", disable=not run.show)

    def on_step(i: int, m: dict[str, float]) -> None:
        bar.update(1)
        if i % 10 == 0 or i == steps:
            run.out.log(i, {f"warmstart/{k}": v for k, v in m.items()}, phase="warmstart")
            bar.set_postfix({k: f"{v:.3f}" for k, v in list(m.items())[:2]})

    def on_save(i: int) -> None:
        state.warmstart_step = i
        # the generator as at the warm start's beginning: a resume draws its data again
        _save(run, state, 0, rngs={"rng": state.warmstart_rng}, warmstart_s=t0)

    warm_start(
        run.learners,
        data,
        steps=cfg.optim.warmstart_steps,
        batch_size=cfg.optim.warmstart_batch_size,
        rng=run.rng,
        on_step=on_step,
        lr=cfg.optim.warmstart_lr,
        min_lr_ratio=cfg.optim.warmstart_min_lr_ratio,
        lr_by_policy=cfg.optim.warmstart_lr_by_policy,
        steps_by_policy={n: cfg.optim.warmstart_steps_of(n) for n in run.policies},
        side_by_side=run.side_by_side,
        start=state.warmstart_step,
        save_every=cfg.run.warmstart_save_every,
        on_save=on_save,
    )
    bar.close()
    for pol in run.policies.values():
        pol.learner.reset_reference()  # algo.kl_coef: KL to the warm-started policy
    sync_engines(run.policies, cfg.model.engine_weights_dtype)
    m = _evaluate(run, 0, "warmstart", prefix="eval_warmstart")
    seconds = state.summary.get("warmstart_s", 0.0) + time.perf_counter() - t0
    run.out.log(
        0,
        {
            **m,
            "warmstart/seconds": seconds,
            "warmstart/samples": float(len(data)),
            "warmstart/episodes_without_oracle": float(len(no_oracle)),
        },
        phase="warmstart",
    )
    state.summary["success_warmstart"] = m["eval_warmstart/success"]
    state.summary["warmstart_s"] = seconds
    state.warmstart_done, state.warmstart_step = True, steps
    if run.show:
        print(f"[warm start] held-out success after SFT: {m['eval_warmstart/success']:.3f}")
    _save(run, state, 0)


# ---------------------------------------------------------------------------- 3. RL steps


def _rl_steps(run: _Run, state: TrainState) -> dict[str, Any] | None:
    """RL steps up to ``optim.steps``, a checkpoint every ``run.save_every``.

    Returns:
        None when all steps ran; when Ctrl-C stopped them, the generators' states to save: those
        before the rollout it dropped (empty when it came between two steps)."""
    from tqdm import tqdm

    cfg = run.cfg
    t_rl = time.perf_counter()
    bar = tqdm(total=cfg.optim.steps, initial=state.step, desc="AT-GRPO", disable=not run.show)
    at_step_start: dict[str, Any] = {}  # the generators before this step's rollout
    stopped_at: dict[str, Any] | None = None
    try:
        while state.step < cfg.optim.steps:
            at_step_start = {
                "rng": run.rng.bit_generator.state,
                "rollout_rng": run.rollout.rng.bit_generator.state,
            }
            _rl_step(run, state, bar)
            at_step_start = {}
            if cfg.run.save_every and state.step % cfg.run.save_every == 0:
                _save(run, state, state.step)
    except KeyboardInterrupt:
        stopped_at = at_step_start
    bar.close()
    state.summary["rl_s"] = state.summary.get("rl_s", 0.0) + time.perf_counter() - t_rl
    return stopped_at


def _rl_step(run: _Run, state: TrainState, bar: Any) -> None:
    """One AT-GRPO step (3.1-3.5); ``state.step`` counts it once its update is applied."""
    cfg = run.cfg
    t0 = time.perf_counter()
    # 3.1 rollout: K candidates per (root, turn, agent), continue from the best
    picks = run.rng.integers(len(run.train_ids), size=cfg.rollout.tasks_per_step)
    result = run.rollout.run([run.train_ids[int(i)] for i in picks], uid_prefix=f"{state.step}/")
    metrics = result.metrics(run.roles)
    # 3.2 advantages within each (root, turn, agent) group
    batch, algo_metrics = at_grpo.advantages(
        result.samples,
        eps=cfg.algo.adv_eps,
        drop_zero_var=cfg.algo.drop_zero_var,
        drop_low_mean=cfg.algo.drop_low_mean,
        drop_low_std=cfg.algo.drop_low_std,
    )
    metrics.update(algo_metrics)
    with _ctrl_c_after_the_step():  # a half-applied update is no state to save
        # 3.3 update: each policy learns from its own samples (a frozen one, lr 0, from none)
        t1 = time.perf_counter()
        mine = {n: [s for s in batch if s.policy == n] for n in run.policies}
        updates = {
            n: partial(pol.learner.update, mine[n])
            for n, pol in run.policies.items()
            if mine[n] and cfg.optim.lr_of(n) > 0
        }
        for n, out in once_each(updates, side_by_side=run.side_by_side).items():
            suffix = "" if len(run.policies) == 1 else f"/{n}"
            metrics.update({f"{k}{suffix}": float(v) for k, v in out.items()})
        metrics["perf/update_s"] = time.perf_counter() - t1
        # 3.4 sync: engines holding their own weights get the learner's (no-op if shared); a
        # policy not updated (frozen, or no samples this step) still has its engine's weights
        sync_engines({n: run.policies[n] for n in updates}, cfg.model.engine_weights_dtype)
        state.step += 1
        state.final = None  # trained past any earlier final evaluation
        step = state.step
        metrics["perf/step_s"] = time.perf_counter() - t0
        # 3.5 log / eval / select
        if cfg.eval.every and step % cfg.eval.every == 0 and step < cfg.optim.steps:
            m = _evaluate(run, step, f"step-{step}")
            metrics.update(m)
            if run.show:  # above the bar, which stays in place
                ci = f"{m['eval/ci95_low']:.3f}-{m['eval/ci95_high']:.3f}"
                bar.write(f"[step {step}] held-out success: {m['eval/success']:.3f} (95% CI {ci})")
        if cfg.eval.select_every and (step % cfg.eval.select_every == 0 or step == cfg.optim.steps):
            metrics.update(_select(run, state, step))
        run.out.log(step, metrics)
    bar.update(1)
    bar.set_postfix(
        reward=f"{np.mean([s.reward for s in result.samples]):.2f}",
        sampled_success=f"{metrics['rollout/success']:.2f}",
        tok_s=f"{metrics['perf/tokens_per_s']:.0f}",
    )


# ---------------------------------------------------------------------------- 4. finish


def _finish(
    run: _Run,
    state: TrainState,
    *,
    stopped_at: dict[str, Any] | None,
    m_init: dict[str, float] | None,
) -> dict[str, Any]:
    """Final evaluation, the last checkpoint, the test evaluation of the weights validation
    chose, the summary and the plots (``stopped_at``: see :func:`_rl_steps`)."""

    cfg, summary, step = run.cfg, state.summary, state.step
    interrupted = stopped_at is not None
    m: dict[str, float] = {}
    if not interrupted:
        untouched = m_init is not None and not (cfg.optim.steps or state.warmstart_done)
        if state.final is not None:  # a resumed run that had finished: logged, not played again
            m = state.final
        elif untouched and m_init is not None:
            m = dict(m_init)  # an untrained run (a prompting baseline) has the step-0 weights
        else:
            m = _evaluate(run, step, "final")
        summary["success_final"] = m["eval/success"]
        summary["success_final_ci"] = [m["eval/ci95_low"], m["eval/ci95_high"]]
        state.final = m
    summary["steps"] = step
    summary["interrupted"] = interrupted
    # The checkpoint's logs end before the final row: a resume that trains on drops it.
    # Interrupted in a rollout: its draws are dropped with it, so a resume redoes that step
    # exactly as an uninterrupted run would have.
    ckpt_path = _save(run, state, step, rngs=stopped_at)
    if not interrupted:
        run.out.log(step, m, phase="final")
    summary["checkpoint"] = str(ckpt_path)
    best = state.best
    if best is not None and not interrupted:
        # The weights validation chose, scored on the test split (the row's number).
        summary["best_step"] = best["step"]
        summary["success_best_validation"] = best["success"]
        if best["step"] != step:
            for pol in run.policies.values():
                load_learner_state(run.out.path / "checkpoints" / "best", pol.name, pol.learner)
            sync_engines(run.policies, cfg.model.engine_weights_dtype)
            m = _evaluate(run, step, "best", prefix="eval_best")
        else:
            m = {k.replace("eval/", "eval_best/", 1): v for k, v in m.items()}
        run.out.log(step, m, phase="best")
        summary["success_best"] = m["eval_best/success"]
    summary["wall_s"] = state.elapsed_s + time.perf_counter() - run.t_start
    # CPU seconds of this process and of the sandbox runs it waited for: the cost on an idle
    # machine (the wall time depends on what else runs).
    summary["cpu_s"] = state.cpu_s + cpu_seconds() - run.cpu_start
    summary["run_dir"] = str(run.out.path)
    summary["eval_episodes"] = len(run.eval_tasks)
    summary["eval_split"] = cfg.eval.split
    measured = baselines.lookup(cfg)  # the controls' figures, when this config was measured
    if measured is not None:
        summary["baselines"] = {"source": baselines.describe(measured), "rows": measured["rows"]}
    run.out.write_json("summary.json", summary)
    plot_run(run.out.path)
    run.out.close()
    return summary


# ---------------------------------------------------------------------------- evaluate, save


def _evaluate(run: _Run, step: int, tag: str, prefix: str = "eval") -> dict[str, float]:
    """Greedy held-out evaluation (``<prefix>/*`` metrics); transcripts of the first episodes.

    ``prefix="select"`` plays the validation split (model selection), anything else the report
    split ``eval.split``."""
    selecting = prefix == "select"
    result, episodes = evaluate_engines(
        run.make_select_env if selecting else run.make_eval_env,
        {n: p.engine for n, p in run.policies.items()},
        run.tokenizers,
        run.policy_of,
        run.select_tasks if selecting else run.eval_tasks,
        max_new_tokens=run.cfg.rollout.max_new_tokens,
        system_message=run.cfg.rollout.system_message,
        enable_thinking=run.cfg.rollout.enable_thinking,
    )
    if run.cfg.run.log_transcripts and not selecting:
        run.out.write_transcripts(step, tag, episodes[: run.cfg.run.log_transcripts])
    return summary_metrics(result, prefix)


def _select(run: _Run, state: TrainState, step: int) -> dict[str, float]:
    """Validation evaluation; the best weights so far become ``checkpoints/best``."""
    m = _evaluate(run, step, f"select-{step}", prefix="select")
    if state.best is None or m["select/success"] > state.best["success"]:
        state.best = {"step": step, "success": m["select/success"]}
        _save(run, state, step, tag="best")
    m["select/best_success"] = state.best["success"]
    return m


def _save(
    run: _Run,
    state: TrainState,
    step: int,
    *,
    rngs: dict[str, Any] | None = None,
    tag: str | None = None,
    warmstart_s: float | None = None,
) -> Path:
    """Checkpoint the policies and the state as it is now (``rngs``: generator states to save
    in place of the current ones; ``warmstart_s``: the running warm start's start time)."""
    now = time.perf_counter()
    state.rng = dict(run.rng.bit_generator.state)
    state.rollout_rng = dict(run.rollout.rng.bit_generator.state)
    saved = TrainState(
        **{
            **state.to_json(),
            **{k: v for k, v in (rngs or {}).items() if v is not None},
            "step": step,
            "summary": dict(state.summary),
            "elapsed_s": state.elapsed_s + now - run.t_start,
            "cpu_s": state.cpu_s + cpu_seconds() - run.cpu_start,
            "logs": run.out.log_sizes(),  # a resume cuts the logs back to these
        }
    )
    if warmstart_s is not None:
        saved.summary["warmstart_s"] = state.summary.get("warmstart_s", 0.0) + now - warmstart_s
    return save_checkpoint(run.out, step, run.policies, saved.to_json(), tag=tag)


# ---------------------------------------------------------------------------- resume, Ctrl-C

_FIXED_ON_RESUME = {
    "model.name": "the policies' weights come from the checkpoint",
    "algo.policy_map": "the checkpoint holds this run's policies",
    "algo.lora_r": "the checkpoint holds this run's adapters",
    "algo.lora_alpha": "the checkpoint holds this run's adapters",
    "run.seed": "the run's generators continue from the checkpoint's state",
}
_IGNORED_ON_RESUME = {"run.resume", "run.fresh", "run.name", "run.out_dir"}
"""The run folder is the one given to ``--run.resume``, whatever these say."""


def _resume_changes(saved: dict[str, Any], cfg: TrainConfig, state: TrainState) -> list[str]:
    """The settings a resume changes, each as ``"optim.lr 1e-06 -> 5e-05 (...)"``.

    Raises:
        ConfigError: A setting that cannot change on resume (its value comes from the
            checkpoint), or a warm-start setting of a run whose warm start is done or begun.
    """
    new = config_to_dict(cfg)
    changed = [
        (f"{section}.{key}", value, new[section][key])
        for section, fields in saved.items()
        if isinstance(fields, dict) and isinstance(new.get(section), dict)
        for key, value in fields.items()
        if key in new[section] and new[section][key] != value
    ]
    refused, notes = [], []
    for key, old, value in changed:
        if key in _IGNORED_ON_RESUME:
            continue
        why = _FIXED_ON_RESUME.get(key)
        if why is None and key.startswith("optim.warmstart_") and state.warmstart_done:
            why = "this run's warm start is done (it only shapes a warm start)"
        elif why is None and key.startswith("optim.warmstart_") and state.warmstart_step:
            why = "this run's warm start has begun (a resume finishes the one it began)"
        if why:
            refused.append(f"{key} {old!r} -> {value!r}: {why}")
        else:
            how = (
                "set in the restored optimiser"
                if key in ("optim.lr", "optim.lr_by_policy", "optim.weight_decay")
                else ""
            )
            notes.append(f"{key} {old!r} -> {value!r}" + (f" ({how})" if how else ""))
    if refused:
        raise ConfigError(
            "these settings cannot change when resuming (start a new run with --run.name to "
            "change them): " + "; ".join(refused)
        )
    return notes


def _can_step_side_by_side(cfg: TrainConfig, policies: dict[str, Policy]) -> bool:
    """Whether the learners share nothing: a model each (``per_role_lora``'s adapters share one),
    on the CPU or in Ray actors of their own (two policies training on one GPU at once would hold
    both activations)."""
    models = [id(p.model) for p in policies.values()]
    own_device = cfg.run.backend == "ray" or cfg.model.device == "cpu"
    return own_device and len(set(models)) == len(models)


@contextlib.contextmanager
def _ctrl_c_after_the_step() -> Iterator[None]:
    """Hold a Ctrl-C that comes inside the block until the block is done (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[bool] = []
    previous = signal.signal(signal.SIGINT, lambda *_: pressed.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt
