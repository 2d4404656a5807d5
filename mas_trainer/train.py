"""The AT-GRPO training loop (``mas-train``), top to bottom.

Which GRPO variant this runs, exactly (DESIGN.md section 2, the paper's AT-GRPO):

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

Phases: 0 setup; 1 held-out eval at step 0; 2 warm start + eval; 3 RL steps (3.1 rollout, 3.2
advantages, 3.3 update, 3.4 sync, 3.5 log/eval/select/save); 4 final eval, checkpoint, test eval
of the best checkpoint, plots, summary.
Ctrl-C during RL saves a checkpoint and returns (an update in progress finishes first; a rollout
in progress is dropped, so the checkpoint is the state after the last whole step);
``--run.resume RUN_DIR`` continues the same run from its newest complete checkpoint: the logs are
cut back to that checkpoint (no step is logged twice), overrides take effect (``optim.lr`` and
``optim.weight_decay`` are set in the restored optimiser) or are refused with the reason, and a
folder without a complete checkpoint is refused (``--run.fresh true`` starts it over).
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from mas_trainer import at_grpo, baselines
from mas_trainer.config import ConfigError, TrainConfig, config_to_dict
from mas_trainer.engines import SamplingParams
from mas_trainer.eval.play import evaluate_engines, summary_metrics
from mas_trainer.learner import with_hyperparameters
from mas_trainer.lockstep import once_each
from mas_trainer.outputs import RunDir, cpu_seconds, resume_point
from mas_trainer.plots import plot_run
from mas_trainer.policy import (
    Policy,
    build_policies,
    make_learner,
    role_policies,
    save_checkpoint,
    sync_engines,
    tokenizers_of,
)
from mas_trainer.rollout import TreeRollout, env_factory
from mas_trainer.warmstart import oracle_samples, warm_start

__all__ = ["train"]


def train(cfg: TrainConfig, run_path: str | Path | None = None) -> dict[str, Any]:
    """Run AT-GRPO as configured; return the run summary (also written to ``summary.json``).

    On ``run.backend=ray`` the run's actors and resource pools are freed when it ends (or fails);
    the cluster stays up.

    Args:
        cfg: The resolved config.
        run_path: The run folder (default: ``run.resume`` or ``run.out_dir/run.name``).
    """
    with contextlib.ExitStack() as at_exit:
        return _train(cfg, run_path, at_exit)


def _train(
    cfg: TrainConfig, run_path: str | Path | None, at_exit: contextlib.ExitStack
) -> dict[str, Any]:
    import torch
    from tqdm import tqdm

    # ---------------------------------------------------------------- 0. setup
    t_start = time.perf_counter()
    cpu_start = cpu_seconds()
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    name = cfg.run.name or f"{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    path = Path(run_path or cfg.run.resume or Path(cfg.run.out_dir) / name)
    ckpt = resume_point(path, fresh=cfg.run.fresh) if cfg.run.resume else None
    state: dict[str, Any] = {
        "step": 0,
        "policy_of": {},
        "warmstart_done": False,
        "summary": {},
        "elapsed_s": 0.0,
        "best": None,  # {"step", "success"}: the best validation evaluation so far
        "cpu_s": 0.0,
    }
    if ckpt is not None:
        state = json.loads((ckpt / "trainer_state.json").read_text())
        state.setdefault("best", None)  # checkpoints from before model selection
        changes = _resume_changes(json.loads((path / "config.json").read_text()), cfg, state)
        if "logs" in state:  # what was logged after the checkpoint goes (it is logged again)
            RunDir.rewind(path, state["logs"])
        if cfg.run.progress:
            listed = "; ".join(changes) if changes else "no overrides"
            print(f"[resume] {path} from {ckpt.name} (step {state['step']}): {listed}")
    run = RunDir(path, wandb_config=config_to_dict(cfg) if cfg.run.wandb else None)
    run.write_json("config.json", config_to_dict(cfg))
    env_kwargs = {"mode": cfg.env.mode, "alpha": cfg.env.alpha, "max_turns": cfg.env.max_turns}
    make_env = env_factory(cfg.env.id, split="train", **env_kwargs, **cfg.env.options)
    make_eval_env = env_factory(cfg.env.id, split=cfg.eval.split, **env_kwargs, **cfg.env.options)
    make_select_env = env_factory(cfg.env.id, split="validation", **env_kwargs, **cfg.env.options)
    probe = make_env()
    roles = list(probe.possible_agents)
    policy_of = role_policies(cfg, roles)
    names = sorted(set(policy_of.values()))
    if ckpt is None:
        state["policy_of"] = policy_of
    rollout_cls: Callable[..., TreeRollout] = TreeRollout
    if cfg.run.backend == "ray":  # engines, learners, env workers as Ray actors
        from mas_trainer.distributed.build import build_ray_policies

        on_ray = build_ray_policies(cfg, names, ckpt)
        at_exit.callback(on_ray.shutdown)
        policies, rollout_cls = on_ray.policies, on_ray.rollout_class
    else:
        policies = build_policies(cfg, names, ckpt)
    if cfg.model.engine == "vllm":  # vLLM engines with their own weights, synced after updates
        from mas_trainer.engines.vllm import attach_vllm_engines

        attach_vllm_engines(cfg, policies)
    tokenizers = tokenizers_of(policies)  # each policy's own (a team may mix base models)
    rng = np.random.default_rng(cfg.run.seed)
    if ckpt is not None:
        rng.bit_generator.state = state["rng"]
    train_ids = probe.task_ids("train")
    eval_tasks = list(make_eval_env().task_ids(cfg.eval.split)[: cfg.eval.episodes])
    select_tasks = list(make_select_env().task_ids("validation")[: cfg.eval.select_episodes])
    summary: dict[str, Any] = state["summary"]
    params = SamplingParams(
        temperature=cfg.rollout.temperature,
        top_p=cfg.rollout.top_p,
        max_tokens=cfg.rollout.max_new_tokens,
    )
    rollout = rollout_cls(
        make_env,
        {n: p.engine for n, p in policies.items()},
        tokenizers,
        policy_of,
        k=cfg.rollout.k,
        params=params,
        mode=cfg.rollout.mode,
        tie_break=cfg.rollout.tie_break,
        seed=cfg.run.seed,
        prefetch=cfg.rollout.prefetch,
        system_message=cfg.rollout.system_message,
        enable_thinking=cfg.rollout.enable_thinking,
    )
    if ckpt is not None and "rollout_rng" in state:
        rollout.rng.bit_generator.state = state["rollout_rng"]
    show = cfg.run.progress

    def evaluate(step: int, tag: str, prefix: str = "eval") -> dict[str, float]:
        """Greedy held-out evaluation (``<prefix>/*`` metrics); transcripts of the first episodes.

        ``prefix="select"`` plays the validation split (model selection), anything else the
        report split ``eval.split``."""
        selecting = prefix == "select"
        result, episodes = evaluate_engines(
            make_select_env if selecting else make_eval_env,
            {n: p.engine for n, p in policies.items()},
            tokenizers,
            policy_of,
            select_tasks if selecting else eval_tasks,
            max_new_tokens=cfg.rollout.max_new_tokens,
            system_message=cfg.rollout.system_message,
            enable_thinking=cfg.rollout.enable_thinking,
        )
        if cfg.run.log_transcripts and not selecting:
            run.write_transcripts(step, tag, episodes[: cfg.run.log_transcripts])
        return summary_metrics(result, prefix)

    def select(step: int) -> dict[str, float]:
        """Validation evaluation; the best weights so far become ``checkpoints/best``."""
        m = evaluate(step, f"select-{step}", prefix="select")
        best = state["best"]
        if best is None or m["select/success"] > best["success"]:
            state["best"] = {"step": step, "success": m["select/success"]}
            save_checkpoint(run, step, policies, snapshot(step), tag="best")
        m["select/best_success"] = state["best"]["success"]
        return m

    def snapshot(step: int, rngs: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            **state,
            "step": step,
            "rng": rng.bit_generator.state,
            "rollout_rng": rollout.rng.bit_generator.state,
            **(rngs or {}),
            "summary": summary,
            "elapsed_s": state["elapsed_s"] + time.perf_counter() - t_start,
            "cpu_s": state.get("cpu_s", 0.0) + cpu_seconds() - cpu_start,
            "logs": run.log_sizes(),  # a resume cuts the logs back to these
        }

    # ---------------------------------------------------------------- 1. held-out eval at step 0
    m_init: dict[str, float] | None = None
    if ckpt is None:
        m = m_init = evaluate(0, "init")
        run.log(0, m, phase="init")
        summary["success_init"] = m["eval/success"]
        if show:
            print(f"[step 0] held-out success before training: {m['eval/success']:.3f}")

    # ---------------------------------------------------------------- 2. warm start (SFT) + eval
    # One learner per policy for both phases: the warm start's AdamW state carries into RL.
    for pol in policies.values():
        pol.learner = make_learner(
            cfg, pol, lr=cfg.optim.lr_of(pol.name), mini_batch_size=cfg.optim.mini_batch_size
        )
        if ckpt is not None and (ckpt / f"learner-{pol.name}.pt").is_file():
            saved = torch.load(ckpt / f"learner-{pol.name}.pt", weights_only=False)
            # The saved optimiser would restore its own rate and decay: the config's win.
            lr, wd = cfg.optim.lr_of(pol.name), cfg.optim.weight_decay
            pol.learner.load_state_dict(with_hyperparameters(saved, lr=lr, weight_decay=wd))
    learners = {n: p.learner for n, p in policies.items() if p.learner is not None}
    side_by_side = cfg.run.learners_side_by_side and _can_step_side_by_side(cfg, policies)
    warmstart_steps = max(cfg.optim.warmstart_steps_of(name) for name in policies)
    if warmstart_steps and not state["warmstart_done"]:
        t0 = time.perf_counter()
        tasks = [
            train_ids[int(i)]
            for i in rng.integers(len(train_ids), size=cfg.optim.warmstart_episodes)
        ]
        data, no_oracle = oracle_samples(
            make_env,
            tokenizers,
            policy_of,
            tasks,
            rng=rng,
            system_message=cfg.rollout.system_message,
            enable_thinking=cfg.rollout.enable_thinking,
            oracle_share=cfg.optim.warmstart_oracle_share,
        )
        bar = tqdm(total=warmstart_steps, desc="warm start", disable=not show)

        def on_step(i: int, m: dict[str, float]) -> None:
            bar.update(1)
            if i % 10 == 0 or i == warmstart_steps:
                run.log(i, {f"warmstart/{k}": v for k, v in m.items()}, phase="warmstart")
                bar.set_postfix({k: f"{v:.3f}" for k, v in list(m.items())[:2]})

        warm_start(
            learners,
            data,
            steps=cfg.optim.warmstart_steps,
            batch_size=cfg.optim.warmstart_batch_size,
            rng=rng,
            on_step=on_step,
            lr=cfg.optim.warmstart_lr,
            min_lr_ratio=cfg.optim.warmstart_min_lr_ratio,
            lr_by_policy=cfg.optim.warmstart_lr_by_policy,
            steps_by_policy={n: cfg.optim.warmstart_steps_of(n) for n in policies},
            side_by_side=side_by_side,
        )
        bar.close()
        for pol in policies.values():
            if pol.learner is not None:
                pol.learner.reset_reference()  # algo.kl_coef: KL to the warm-started policy
        sync_engines(policies, cfg.model.engine_weights_dtype)
        m = evaluate(0, "warmstart", prefix="eval_warmstart")
        run.log(
            0,
            {
                **m,
                "warmstart/seconds": time.perf_counter() - t0,
                "warmstart/samples": float(len(data)),
                "warmstart/episodes_without_oracle": float(len(no_oracle)),
            },
            phase="warmstart",
        )
        summary["success_warmstart"] = m["eval_warmstart/success"]
        summary["warmstart_s"] = time.perf_counter() - t0
        state["warmstart_done"] = True
        if show:
            print(f"[warm start] held-out success after SFT: {summary['success_warmstart']:.3f}")

    # ---------------------------------------------------------------- 3. RL steps
    step = int(state["step"])
    t_rl = time.perf_counter()
    bar = tqdm(total=cfg.optim.steps, initial=step, desc="AT-GRPO", disable=not show)
    interrupted = False
    at_step_start: dict[str, Any] = {}  # the generators before this step's rollout
    try:
        while step < cfg.optim.steps:
            at_step_start = {
                "rng": rng.bit_generator.state,
                "rollout_rng": rollout.rng.bit_generator.state,
            }
            t0 = time.perf_counter()
            # 3.1 rollout: K candidates per (root, turn, agent), continue from the best
            picks = rng.integers(len(train_ids), size=cfg.rollout.tasks_per_step)
            result = rollout.run([train_ids[int(i)] for i in picks], uid_prefix=f"{step}/")
            metrics = result.metrics(roles)
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
                # 3.3 update: each policy learns from its own samples
                t1 = time.perf_counter()
                mine = {n: [s for s in batch if s.policy == n] for n in learners}
                updates = {n: partial(learners[n].update, mine[n]) for n in learners if mine[n]}
                for n, out in once_each(updates, side_by_side=side_by_side).items():
                    suffix = "" if len(policies) == 1 else f"/{n}"
                    metrics.update({f"{k}{suffix}": float(v) for k, v in out.items()})
                metrics["perf/update_s"] = time.perf_counter() - t1
                # 3.4 sync: engines holding their own weights get the learner's (no-op if shared)
                sync_engines(policies, cfg.model.engine_weights_dtype)
                step += 1
                at_step_start = {}
                metrics["perf/step_s"] = time.perf_counter() - t0
                # 3.5 log / eval / save
                if cfg.eval.every and step % cfg.eval.every == 0 and step < cfg.optim.steps:
                    m = evaluate(step, f"step-{step}")
                    metrics.update(m)
                    if show:  # above the bar, which stays in place
                        ci = f"{m['eval/ci95_low']:.3f}-{m['eval/ci95_high']:.3f}"
                        bar.write(
                            f"[step {step}] held-out success: {m['eval/success']:.3f} (95% CI {ci})"
                        )
                if cfg.eval.select_every and (
                    step % cfg.eval.select_every == 0 or step == cfg.optim.steps
                ):
                    metrics.update(select(step))
                run.log(step, metrics)
            bar.update(1)
            bar.set_postfix(
                reward=f"{np.mean([s.reward for s in result.samples]):.2f}",
                sampled_success=f"{metrics['rollout/success']:.2f}",
                tok_s=f"{metrics['perf/tokens_per_s']:.0f}",
            )
            if cfg.run.save_every and step % cfg.run.save_every == 0:
                save_checkpoint(run, step, policies, snapshot(step))
    except KeyboardInterrupt:
        interrupted = True
    bar.close()
    summary["rl_s"] = summary.get("rl_s", 0.0) + time.perf_counter() - t_rl

    # ---------------------------------------------------------------- 4. final eval, save, summary
    if not interrupted:
        untouched = m_init is not None and not (cfg.optim.steps or warmstart_steps)
        # An untrained run (a prompting baseline) has the step-0 weights: do not play it twice.
        m = dict(m_init) if untouched and m_init is not None else evaluate(step, "final")
        run.log(step, m, phase="final")
        summary["success_final"] = m["eval/success"]
        summary["success_final_ci"] = [m["eval/ci95_low"], m["eval/ci95_high"]]
    summary["steps"] = step
    summary["interrupted"] = interrupted
    summary["wall_s"] = state["elapsed_s"] + time.perf_counter() - t_start
    # CPU seconds of this process and of the sandbox runs it waited for: the cost on an idle
    # machine (the wall time depends on what else runs).
    summary["cpu_s"] = state.get("cpu_s", 0.0) + cpu_seconds() - cpu_start
    # Interrupted in a rollout: its draws are dropped with it, so a resume redoes that step
    # exactly as an uninterrupted run would have.
    ckpt_path = save_checkpoint(run, step, policies, snapshot(step, at_step_start))
    summary["checkpoint"] = str(ckpt_path)
    best = state["best"]
    if best is not None and not interrupted:
        # The weights validation chose, scored on the test split (the row's number).
        summary["best_step"] = best["step"]
        summary["success_best_validation"] = best["success"]
        if best["step"] != step:
            for name, learner in learners.items():  # the policies save_checkpoint saved
                learner_state = torch.load(
                    run.path / "checkpoints" / "best" / f"learner-{name}.pt", weights_only=False
                )
                learner.load_state_dict(learner_state)
            sync_engines(policies, cfg.model.engine_weights_dtype)
            m = evaluate(step, "best", prefix="eval_best")
        else:
            m = {k.replace("eval/", "eval_best/", 1): v for k, v in m.items()}
        run.log(step, m, phase="best")
        summary["success_best"] = m["eval_best/success"]
    summary["run_dir"] = str(path)
    summary["eval_episodes"] = len(eval_tasks)
    measured = baselines.lookup(cfg)  # the single agent's figures, when this config was measured
    if measured is not None:
        summary["baselines"] = {
            "source": f"{baselines.PATH.name}: {measured['command']} "
            f"(commits {', '.join(measured['commits'])}, {measured['measured_utc']})",
            "rows": measured["rows"],
        }
    run.write_json("summary.json", summary)
    plot_run(path)
    run.close()
    return summary


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


def _resume_changes(saved: dict[str, Any], cfg: TrainConfig, state: dict[str, Any]) -> list[str]:
    """The settings a resume changes, each as ``"optim.lr 1e-06 -> 5e-05 (...)"``.

    Raises:
        ConfigError: A setting that cannot change on resume (its value comes from the
            checkpoint), or a warm-start setting of a run whose warm start is done.
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
        if why is None and key.startswith("optim.warmstart_") and state.get("warmstart_done"):
            why = "this run's warm start is done (it only shapes a warm start)"
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
    models = [id(p.model) for p in policies.values() if p.learner is not None]
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
