"""The AT-GRPO training loop (``mas-train``), top to bottom.

Which GRPO variant this runs, exactly (DESIGN.md section 2, the paper's AT-GRPO):

* **Samples.** Tree rollouts (:mod:`mas_trainer.rollout`): per root env, per turn t, per agent i, K
  candidates from the same state on K clones, each scored by agent i's *immediate* reward ``r =
  alpha * team + local`` (no returns, no discounting); the episode continues from the best
  candidate. ``rollout.mode=parallel`` is the paper's parallel-sampling baseline instead.
* **Groups and advantages.** Group key ``(root uid, t, i)``; ``A = (r - mean) / (std + eps)`` with
  the unbiased std of the group, on every completion token; singleton groups get 0; zero-variance
  groups are counted (``algo/zero_var_groups``) and, with ``algo.drop_zero_var``, left out.
* **Loss.** PPO-clip on token ratios (``algo.clip_low``/``clip_high``, dual clip), token-mean over
  the mini-batch, optional k3 KL to the initial policy (``algo.kl_coef``, off by default), AdamW,
  gradient clip. One epoch over each step's samples; old log-probs are recomputed by the learner,
  so the ratio starts at 1 and ``perf/logprob_mismatch`` shows any engine/learner numeric gap.
* **Policies.** ``shared`` (one model, all samples), ``per_role`` (one model per role, each trained
  on its own role's samples), ``per_role_lora`` (one frozen base with one LoRA adapter per role).
* **Before RL, optionally:** a supervised warm start on oracle transcripts
  (:mod:`mas_trainer.warmstart`). Held-out success is logged before it, after it and after RL, so
  the run shows what SFT and what RL contributed.

Phases: 0 setup; 1 held-out eval at step 0; 2 warm start + eval; 3 RL steps (3.1 rollout, 3.2
advantages, 3.3 update, 3.4 sync, 3.5 log/eval/save); 4 final eval, checkpoint, plots, summary.
Ctrl-C during RL saves a checkpoint and returns; ``--run.resume RUN_DIR`` continues the same run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mas_trainer import at_grpo
from mas_trainer.config import TrainConfig, config_to_dict
from mas_trainer.eval.play import evaluate_engines
from mas_trainer.outputs import RunDir
from mas_trainer.plots import plot_run
from mas_trainer.policy import (
    build_policies,
    make_learner,
    role_policies,
    save_checkpoint,
    sync_engines,
)
from mas_trainer.rollout import TreeRollout, env_factory
from mas_trainer.warmstart import oracle_samples, warm_start

__all__ = ["train"]


def train(cfg: TrainConfig, run_path: str | Path | None = None) -> dict[str, Any]:
    """Run AT-GRPO as configured; return the run summary (also written to ``summary.json``).

    Args:
        cfg: The resolved config.
        run_path: The run folder (default: ``run.resume`` or ``run.out_dir/run.name``).
    """
    import torch
    from tqdm import tqdm

    from mas_trainer.engines import SamplingParams

    # ---------------------------------------------------------------- 0. setup
    t_start = time.perf_counter()
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    name = cfg.run.name or f"{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    path = Path(run_path or cfg.run.resume or Path(cfg.run.out_dir) / name)
    run = RunDir(path, wandb_config=config_to_dict(cfg) if cfg.run.wandb else None)
    run.write_json("config.json", config_to_dict(cfg))
    env_kwargs = {"mode": cfg.env.mode, "alpha": cfg.env.alpha, "max_turns": cfg.env.max_turns}
    make_env = env_factory(cfg.env.id, split="train", **env_kwargs, **cfg.env.options)
    make_eval_env = env_factory(cfg.env.id, split=cfg.eval.split, **env_kwargs, **cfg.env.options)
    probe = make_env()
    roles = list(probe.possible_agents)
    policy_of = role_policies(cfg, roles)
    names = sorted(set(policy_of.values()))
    ckpt = run.latest_checkpoint() if cfg.run.resume else None
    state: dict[str, Any] = {
        "step": 0,
        "policy_of": policy_of,
        "warmstart_done": False,
        "summary": {},
        "elapsed_s": 0.0,
    }
    if ckpt is not None:
        state = json.loads((ckpt / "trainer_state.json").read_text())
    rollout_cls: Callable[..., TreeRollout] = TreeRollout
    if cfg.run.backend == "ray":  # engines, learners, env workers as Ray actors
        from mas_trainer.distributed.build import build_ray_policies

        on_ray = build_ray_policies(cfg, names, ckpt)
        policies, tokenizer, rollout_cls = on_ray.policies, on_ray.tokenizer, on_ray.rollout_class
    else:
        policies, tokenizer = build_policies(cfg, names, ckpt)
    if cfg.model.engine == "vllm":  # vLLM engines with their own weights, synced after updates
        from mas_trainer.engines.vllm import attach_vllm_engines

        attach_vllm_engines(cfg, policies, tokenizer)
    rng = np.random.default_rng(cfg.run.seed)
    if ckpt is not None:
        rng.bit_generator.state = state["rng"]
    train_ids = probe.task_ids("train")
    eval_tasks = list(make_eval_env().task_ids(cfg.eval.split)[: cfg.eval.episodes])
    summary: dict[str, Any] = state["summary"]
    params = SamplingParams(
        temperature=cfg.rollout.temperature,
        top_p=cfg.rollout.top_p,
        max_tokens=cfg.rollout.max_new_tokens,
    )
    rollout = rollout_cls(
        make_env,
        {n: p.engine for n, p in policies.items()},
        tokenizer,
        policy_of,
        k=cfg.rollout.k,
        params=params,
        mode=cfg.rollout.mode,
        tie_break=cfg.rollout.tie_break,
        seed=cfg.run.seed,
        prefetch=cfg.rollout.prefetch,
        system_message=cfg.rollout.system_message,
    )
    if ckpt is not None and "rollout_rng" in state:
        rollout.rng.bit_generator.state = state["rollout_rng"]
    show = cfg.run.progress

    def evaluate(step: int, tag: str) -> dict[str, float]:
        """Greedy held-out evaluation (``eval/*`` metrics); transcripts of the first episodes."""
        metrics, episodes = evaluate_engines(
            make_eval_env,
            {n: p.engine for n, p in policies.items()},
            tokenizer,
            policy_of,
            eval_tasks,
            max_new_tokens=cfg.rollout.max_new_tokens,
            keep_transcripts=cfg.run.log_transcripts > 0,
            system_message=cfg.rollout.system_message,
        )
        if cfg.run.log_transcripts:
            run.write_transcripts(step, tag, episodes[: cfg.run.log_transcripts])
        return {f"eval/{k}": v for k, v in metrics.items()}

    def snapshot(step: int) -> dict[str, Any]:
        return {
            **state,
            "step": step,
            "rng": rng.bit_generator.state,
            "rollout_rng": rollout.rng.bit_generator.state,
            "summary": summary,
            "elapsed_s": state["elapsed_s"] + time.perf_counter() - t_start,
        }

    # ---------------------------------------------------------------- 1. held-out eval at step 0
    if ckpt is None:
        m = evaluate(0, "init")
        run.log(0, m, phase="init")
        summary["success_init"] = m["eval/success"]
        if show:
            print(f"[step 0] held-out success before training: {m['eval/success']:.3f}")

    # ---------------------------------------------------------------- 2. warm start (SFT) + eval
    if cfg.optim.warmstart_steps and not state["warmstart_done"]:
        t0 = time.perf_counter()
        tasks = [
            train_ids[int(i)]
            for i in rng.integers(len(train_ids), size=cfg.optim.warmstart_episodes)
        ]
        data = oracle_samples(
            make_env,
            tokenizer,
            policy_of,
            tasks,
            rng=rng,
            system_message=cfg.rollout.system_message,
        )
        sft = {
            n: make_learner(
                cfg,
                p,
                tokenizer,
                lr=cfg.optim.warmstart_lr,
                mini_batch_size=cfg.optim.warmstart_batch_size,
            )
            for n, p in policies.items()
        }
        bar = tqdm(total=cfg.optim.warmstart_steps, desc="warm start", disable=not show)

        def on_step(i: int, m: dict[str, float]) -> None:
            bar.update(1)
            if i % 10 == 0 or i == cfg.optim.warmstart_steps:
                run.log(i, {f"warmstart/{k}": v for k, v in m.items()}, phase="warmstart")
                bar.set_postfix({k: f"{v:.3f}" for k, v in list(m.items())[:2]})

        warm_start(
            sft,
            data,
            steps=cfg.optim.warmstart_steps,
            batch_size=cfg.optim.warmstart_batch_size,
            rng=rng,
            on_step=on_step,
            lr=cfg.optim.warmstart_lr,
            min_lr_ratio=cfg.optim.warmstart_min_lr_ratio,
        )
        bar.close()
        del sft
        sync_engines(policies)
        m = evaluate(0, "warmstart")
        m = {k.replace("eval/", "eval_warmstart/"): v for k, v in m.items()}
        run.log(
            0,
            {
                **m,
                "warmstart/seconds": time.perf_counter() - t0,
                "warmstart/samples": float(len(data)),
            },
            phase="warmstart",
        )
        summary["success_warmstart"] = m["eval_warmstart/success"]
        summary["warmstart_s"] = time.perf_counter() - t0
        state["warmstart_done"] = True
        if show:
            print(f"[warm start] held-out success after SFT: {summary['success_warmstart']:.3f}")

    # ---------------------------------------------------------------- 3. RL steps
    for pol in policies.values():
        pol.learner = make_learner(
            cfg, pol, tokenizer, lr=cfg.optim.lr, mini_batch_size=cfg.optim.mini_batch_size
        )
        if ckpt is not None and (ckpt / f"learner-{pol.name}.pt").is_file():
            pol.learner.load_state_dict(
                torch.load(ckpt / f"learner-{pol.name}.pt", weights_only=False)
            )
    step = int(state["step"])
    t_rl = time.perf_counter()
    bar = tqdm(total=cfg.optim.steps, initial=step, desc="AT-GRPO", disable=not show)
    interrupted = False
    try:
        while step < cfg.optim.steps:
            t0 = time.perf_counter()
            # 3.1 rollout: K candidates per (root, turn, agent), continue from the best
            picks = rng.integers(len(train_ids), size=cfg.rollout.tasks_per_step)
            result = rollout.run([train_ids[int(i)] for i in picks], uid_prefix=f"{step}/")
            metrics = result.metrics(roles)
            # 3.2 advantages within each (root, turn, agent) group
            batch, algo_metrics = at_grpo.advantages(
                result.samples, eps=cfg.algo.adv_eps, drop_zero_var=cfg.algo.drop_zero_var
            )
            metrics.update(algo_metrics)
            # 3.3 update: each policy learns from its own samples
            t1 = time.perf_counter()
            for pol in policies.values():
                mine = [s for s in batch if s.policy == pol.name]
                if not mine:
                    continue
                out = pol.learner.update(mine)
                suffix = "" if len(policies) == 1 else f"/{pol.name}"
                metrics.update({f"{k}{suffix}": float(v) for k, v in out.items()})
            metrics["perf/update_s"] = time.perf_counter() - t1
            # 3.4 sync: engines that hold their own weights get the learner's (no-op when shared)
            sync_engines(policies)
            step += 1
            metrics["perf/step_s"] = time.perf_counter() - t0
            # 3.5 log / eval / save
            if cfg.eval.every and step % cfg.eval.every == 0 and step < cfg.optim.steps:
                m = evaluate(step, f"step-{step}")
                metrics.update(m)
                if show:  # above the bar, which stays in place
                    bar.write(
                        f"[step {step}] held-out success: {m['eval/success']:.3f} "
                        f"(95% CI {m['eval/success_ci_low']:.3f}-{m['eval/success_ci_high']:.3f})"
                    )
            run.log(step, metrics)
            bar.update(1)
            bar.set_postfix(
                reward=f"{np.mean([s.reward for s in result.samples]):.2f}",
                success=f"{metrics['rollout/success']:.2f}",
                tok_s=f"{metrics['perf/tokens_per_s']:.0f}",
            )
            if cfg.run.save_every and step % cfg.run.save_every == 0:
                save_checkpoint(run, step, policies, tokenizer, snapshot(step))
    except KeyboardInterrupt:
        interrupted = True
    bar.close()
    summary["rl_s"] = summary.get("rl_s", 0.0) + time.perf_counter() - t_rl

    # ---------------------------------------------------------------- 4. final eval, save, summary
    if not interrupted:
        m = evaluate(step, "final")
        run.log(step, m, phase="final")
        summary["success_final"] = m["eval/success"]
        summary["success_final_ci"] = [m["eval/success_ci_low"], m["eval/success_ci_high"]]
    summary["steps"] = step
    summary["interrupted"] = interrupted
    summary["wall_s"] = state["elapsed_s"] + time.perf_counter() - t_start
    ckpt_path = save_checkpoint(run, step, policies, tokenizer, snapshot(step))
    summary["checkpoint"] = str(ckpt_path)
    summary["run_dir"] = str(path)
    run.write_json("summary.json", summary)
    plot_run(path)
    run.close()
    return summary
