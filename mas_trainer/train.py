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

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mas_trainer.config import TrainConfig, config_to_dict
from mas_trainer.evaluate import env_factory, evaluate_engines
from mas_trainer.outputs import RunDir
from mas_trainer.rollout import RolloutResult, TreeRollout
from mas_trainer.samples import TrainSample
from mas_trainer.warmstart import oracle_samples, warm_start

__all__ = ["Policy", "train"]


@dataclass
class Policy:
    """One trainable policy: its model, generation engine and learner.

    Attributes:
        name: ``"shared"`` or the role name.
        model: The torch model (a peft model for ``per_role_lora``).
        engine: Generates with this policy (shares ``model`` on one device: sync is a no-op).
        learner: The PPO-clip learner of this policy.
        adapter: The LoRA adapter name (``per_role_lora`` only).
    """

    name: str
    model: Any
    engine: Any
    learner: Any = None
    adapter: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _roles_and_env_factory(cfg: TrainConfig, split: str) -> tuple[list[str], Callable[[], Any]]:
    """The env's roles and a factory of fresh envs of ``split`` (``env.id`` may be mod:Class)."""
    kwargs = {"mode": cfg.env.mode, "alpha": cfg.env.alpha, "max_turns": cfg.env.max_turns}
    make_env = env_factory(cfg.env.id, split=split, **kwargs, **cfg.env.options)
    try:
        probe = make_env()
    except TypeError as err:  # an unknown env option
        raise ValueError(
            f"env {cfg.env.id!r} rejected --env.options {cfg.env.options}: {err}"
        ) from err
    return list(probe.possible_agents), make_env


def _policy_of(cfg: TrainConfig, roles: list[str]) -> dict[str, str]:
    if cfg.algo.policy_map == "shared":
        return dict.fromkeys(roles, "shared")
    return {r: r for r in roles}


def _build_policies(
    cfg: TrainConfig, policy_names: list[str], load_from: Path | None
) -> tuple[dict[str, Policy], Any]:
    """Load the model(s), wrap each policy with an engine (learners come later)."""
    import torch

    from mas_trainer.engines import TransformersEngine
    from mas_trainer.models import load_model

    dtype = getattr(torch, cfg.model.dtype)
    dev = cfg.model.device

    def load(name: str) -> tuple[Any, Any]:
        return load_model(name, device=dev, dtype=dtype, seed=cfg.run.seed)

    policies: dict[str, Policy] = {}
    if cfg.algo.policy_map == "per_role_lora":
        from mas_trainer.models import add_lora_adapters

        base, tokenizer = load(str(load_from / "base") if load_from else cfg.model.name)
        # Fresh adapters; on resume the learners' state restores each adapter's trained weights.
        model = add_lora_adapters(base, policy_names, r=cfg.algo.lora_r, alpha=cfg.algo.lora_alpha)
        for name in policy_names:
            engine = TransformersEngine(
                model, tokenizer, batch_size=cfg.model.engine_batch_size, adapter=name
            )
            policies[name] = Policy(name, model, engine, adapter=name)
        return policies, tokenizer
    first_model, tokenizer = load(str(load_from / policy_names[0]) if load_from else cfg.model.name)
    for i, name in enumerate(policy_names):
        if load_from and i > 0:
            model, _ = load(str(load_from / name))
        else:
            model = first_model if i == 0 else copy.deepcopy(first_model)
        engine = TransformersEngine(model, tokenizer, batch_size=cfg.model.engine_batch_size)
        policies[name] = Policy(name, model, engine)
    return policies, tokenizer


def _make_learner(
    cfg: TrainConfig, policy: Policy, tokenizer: Any, *, lr: float, mini_batch_size: int
) -> Any:
    """A learner for ``policy`` (the warm start and RL each get their own optimiser state)."""
    import torch

    from mas_trainer.learner import Learner

    # The ray backend puts a remote learner factory here; it takes the same arguments.
    return policy.extra.get("learner_factory", Learner)(
        policy.model,
        lr=lr,
        weight_decay=cfg.optim.weight_decay,
        grad_clip=cfg.optim.grad_clip,
        mini_batch_size=mini_batch_size,
        micro_batch_size=cfg.optim.micro_batch_size or None,
        temperature=cfg.rollout.temperature,
        top_p=cfg.rollout.top_p,
        clip_low=cfg.algo.clip_low,
        clip_high=cfg.algo.clip_high,
        dual_clip=cfg.algo.dual_clip or None,
        kl_coef=cfg.algo.kl_coef,  # the learner keeps a frozen copy of the policy as reference
        dtype=None if cfg.model.autocast == "none" else getattr(torch, cfg.model.autocast),
        adapter=policy.adapter,
        pad_token_id=tokenizer.pad_token_id,
        seed=cfg.run.seed,
    )


def _sync_engines(policies: dict[str, Policy]) -> None:
    """Give engines that hold their own weights (vLLM, remote) the learners' (no-op when shared)."""
    for pol in policies.values():
        if pol.engine is not None and getattr(pol.engine, "model", pol.model) is not pol.model:
            pol.engine.load_weights(pol.model.state_dict())


def _save(run: RunDir, step: int, policies: dict[str, Policy], tokenizer: Any, state: dict) -> Path:
    """Checkpoint every policy (HF folder + learner state) and the trainer state, atomically."""
    import torch

    def write(folder: Path) -> None:
        lora = any(pol.adapter is not None for pol in policies.values())
        if lora:  # one frozen base + adapters/<role>/ (peft's layout for named adapters)
            model = next(iter(policies.values())).model
            base = model.get_base_model()
            clean = {  # the frozen base without peft's wrapping
                k.replace(".base_layer.", "."): v
                for k, v in base.state_dict().items()
                if "lora_" not in k
            }
            base.save_pretrained(folder / "base", state_dict=clean)
            tokenizer.save_pretrained(folder / "base")
            model.save_pretrained(folder / "adapters")
        for name, pol in policies.items():
            if not lora:
                pol.model.save_pretrained(folder / name)
                tokenizer.save_pretrained(folder / name)
            if pol.learner is not None:
                torch.save(pol.learner.state_dict(), folder / f"learner-{name}.pt")
        (folder / "trainer_state.json").write_text(json.dumps(state, indent=2) + "\n")

    return run.save_checkpoint(step, write)


def _rollout_metrics(result: RolloutResult, roles: list[str]) -> dict[str, float]:
    eps = result.episodes
    m = {
        "rollout/success": float(np.mean([e.success for e in eps])),
        "rollout/turns_mean": float(np.mean([e.turns for e in eps])),
        "rollout/samples": float(len(result.samples)),
        "rollout/format_error_rate": float(
            np.mean([not s.info.get("parsed", True) for s in result.samples])
        ),
        "perf/tokens_per_s": result.gen_tokens / max(result.gen_seconds, 1e-9),
        "perf/rollout_s": result.total_seconds,
        "perf/rollout_other_share": result.other_share,
    }
    for role in roles:
        rewards = [s.reward for s in result.samples if s.role == role]
        if rewards:
            m[f"rollout/reward/{role}"] = float(np.mean(rewards))
        m[f"rollout/return/{role}"] = float(np.mean([e.returns.get(role, 0.0) for e in eps]))
    return m


def _advantages(samples: list[TrainSample], cfg: TrainConfig) -> tuple[list[TrainSample], dict]:
    """Fill ``sample.advantage`` per AT-GRPO group; maybe drop zero-variance groups."""
    import torch

    from mas_trainer import at_grpo

    rewards = torch.tensor([s.reward for s in samples], dtype=torch.float32)  # (N,)
    index = at_grpo.dense_group_index([s.group for s in samples])  # (N,)
    adv, _ = at_grpo.group_advantages(rewards, index, eps=cfg.algo.adv_eps)  # (N,)
    zero = at_grpo.zero_variance_groups(rewards, index)  # (G,)
    for s, a in zip(samples, adv.tolist(), strict=False):
        s.advantage = a
    kept = samples
    if cfg.algo.drop_zero_var:
        keep = (~zero[index]).tolist()
        kept = [s for s, k in zip(samples, keep, strict=False) if k]
    metrics = {
        "algo/groups": float(zero.numel()),
        "algo/zero_var_groups": float(zero.sum()),
        "algo/zero_var_share": float(zero.float().mean()) if zero.numel() else 0.0,
        "algo/adv_abs_mean": float(adv.abs().mean()) if adv.numel() else 0.0,
        "algo/samples_trained": float(len(kept)),
    }
    return kept, metrics


def _evaluate(cfg: TrainConfig, run: RunDir, ctx: dict[str, Any], step: int, tag: str) -> dict:
    """Greedy held-out evaluation; writes transcripts of the first episodes."""
    metrics, episodes = evaluate_engines(
        ctx["make_eval_env"],
        {n: p.engine for n, p in ctx["policies"].items()},
        ctx["tokenizer"],
        ctx["policy_of"],
        ctx["eval_tasks"],
        max_new_tokens=cfg.rollout.max_new_tokens,
        keep_transcripts=cfg.run.log_transcripts > 0,
        system_message=cfg.rollout.system_message,
    )
    if cfg.run.log_transcripts:
        run.write_transcripts(step, tag, episodes[: cfg.run.log_transcripts])
    return {f"eval/{k}": v for k, v in metrics.items()}


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
    roles, make_env = _roles_and_env_factory(cfg, "train")
    _, make_eval_env = _roles_and_env_factory(cfg, cfg.eval.split)
    policy_of = _policy_of(cfg, roles)
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
    if cfg.run.backend == "ray":  # engines, learners, env workers as Ray actors (ray_backend.py)
        from mas_trainer.ray_backend import build_policies as build_ray_policies

        policies, tokenizer, rollout_cls = build_ray_policies(cfg, names, ckpt)
    else:
        policies, tokenizer = _build_policies(cfg, names, ckpt)
    if cfg.model.engine == "vllm":  # vLLM engines with their own weights, synced after updates
        from mas_trainer.vllm_engine import attach_vllm_engines

        attach_vllm_engines(cfg, policies, tokenizer)
    rng = np.random.default_rng(cfg.run.seed)
    if ckpt is not None:
        rng.bit_generator.state = state["rng"]
    train_ids = make_env().task_ids("train")
    eval_tasks = list(make_eval_env().task_ids(cfg.eval.split)[: cfg.eval.episodes])
    ctx = {
        "make_eval_env": make_eval_env,
        "policies": policies,
        "tokenizer": tokenizer,
        "policy_of": policy_of,
        "eval_tasks": eval_tasks,
    }
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
        m = _evaluate(cfg, run, ctx, 0, "init")
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
            n: _make_learner(
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
        _sync_engines(policies)
        m = _evaluate(cfg, run, ctx, 0, "warmstart")
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
        pol.learner = _make_learner(
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
            metrics = _rollout_metrics(result, roles)
            # 3.2 advantages within each (root, turn, agent) group
            batch, algo_metrics = _advantages(result.samples, cfg)
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
            _sync_engines(policies)
            step += 1
            metrics["perf/step_s"] = time.perf_counter() - t0
            # 3.5 log / eval / save
            if cfg.eval.every and step % cfg.eval.every == 0 and step < cfg.optim.steps:
                metrics.update(_evaluate(cfg, run, ctx, step, f"step-{step}"))
            run.log(step, metrics)
            bar.update(1)
            bar.set_postfix(
                reward=f"{np.mean([s.reward for s in result.samples]):.2f}",
                success=f"{metrics['rollout/success']:.2f}",
                tok_s=f"{metrics['perf/tokens_per_s']:.0f}",
            )
            if cfg.run.save_every and step % cfg.run.save_every == 0:
                _save(run, step, policies, tokenizer, snapshot(step))
    except KeyboardInterrupt:
        interrupted = True
    bar.close()
    summary["rl_s"] = summary.get("rl_s", 0.0) + time.perf_counter() - t_rl

    # ---------------------------------------------------------------- 4. final eval, save, summary
    if not interrupted:
        m = _evaluate(cfg, run, ctx, step, "final")
        run.log(step, m, phase="final")
        summary["success_final"] = m["eval/success"]
        summary["success_final_ci"] = [m["eval/success_ci_low"], m["eval/success_ci_high"]]
    summary["steps"] = step
    summary["interrupted"] = interrupted
    summary["wall_s"] = state["elapsed_s"] + time.perf_counter() - t_start
    ckpt_path = _save(run, step, policies, tokenizer, snapshot(step))
    summary["checkpoint"] = str(ckpt_path)
    summary["run_dir"] = str(path)
    run.write_json("summary.json", summary)
    run.plot()
    run.close()
    return summary
