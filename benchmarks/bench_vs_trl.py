"""Wall time per 1,000 trained samples: our trainer vs TRL's ``GRPOTrainer``, same model and task.

Both sides train the same tiny Qwen3 model (built by ``mas_trainer.models``, saved once to a temp
folder, and loaded fresh from it by each side at each repeat, so both start from the same weights
and tokenizer) on the same single-agent task: ``mas/PlanPath-v0`` (5x5, ``mode="single"``, one
turn). The prompt is the env's chat prompt (user message only, as in the tiny presets); the
reward is the env's reward of the completion. Both sides see the same task ids in the same order,
the same group size K, max completion length, temperature (top-p 1, no top-k), prompts per step,
learning rate, weight decay, grad clip, clip range, no KL, one optimizer step per generation
batch, fp32, and the same ``torch.set_num_threads``.

Per training step (P prompts x K completions = P*K trained samples):

- **ours** (what ``mas-train`` runs in ``rollout.mode=tree`` with one turn): ``TreeRollout.run``
  (prompts encoded once per task; one ``TransformersEngine.generate`` call for all P*K candidates,
  which prefills each distinct prompt once and shares its KV cache among the K; each candidate
  stepped on its own ``env.clone()``), group advantages (``at_grpo``), ``Learner.update`` (one
  no-grad pass recomputing old log-probs, then PPO-clip forward/backward with each distinct prompt
  run once per micro-batch and shared by the K completions, AdamW step).
- **TRL** (``GRPOTrainer``, ``use_vllm=False``): chat template on P*K prompts (each prompt
  repeated K times by its sampler), one ``model.generate`` call on the left-padded P*K batch
  (every copy of a prompt prefilled separately), the reward function (a fresh env reset to the
  row's task id, stepped with the completion), group advantages, then one forward/backward over
  the P*K prompt+completion sequences and an AdamW step. With ``num_iterations=1`` TRL skips the
  old-log-prob pass (the ratio is 1 by construction), which is one forward pass less than ours.
  TRL's defaults ``bf16=True`` and ``gradient_checkpointing=True`` are turned off (fp32 is faster
  on this CPU, and our learner does not checkpoint either).

Timing: each side runs ``--steps`` training steps per repeat; the first step of every run is a
warm-up and is not counted; wall time of the other steps (rollout + update, everything the loop
does) is divided by the samples they trained. Repeats alternate which side runs first. Printed:
per-repeat figures, medians, and the ratio TRL / ours (> 1: ours is faster).

Usage:
    python benchmarks/bench_vs_trl.py                       # tiny model, P=8, K=4, 24 tokens
    python benchmarks/bench_vs_trl.py --repeats 5 --steps 6 --threads 1
    python benchmarks/bench_vs_trl.py --warm-start-steps 60   # answers that parse and stop early
    python benchmarks/bench_vs_trl.py --no-sharing    # + ours with the learner's prompt sharing off

Besides "ours" and "TRL", the table shows ours without the old-log-prob pass (TRL's amount of
learner work) and, with ``--no-sharing``, ours with the learner's prompt sharing off: together
they show where the difference comes from.

Needs the ``bench-trl`` extra (``pip install -e '.[train,bench-trl]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Nothing here may reach the hub: both sides load the model from a local folder.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch

from mas_envs.base import TextEnv
from mas_trainer.rollout import env_factory

TRL_HINT = "pip install -e '.[bench-trl]'  (TRL from PyPI)"


@dataclass(frozen=True)
class Setup:
    """Everything both sides share.

    Attributes:
        model_dir: Folder with the saved model and tokenizer.
        make_env: Builds a fresh single-agent env.
        steps: Training steps per run (the first is a warm-up).
        tasks: Task ids per step (``steps`` lists of ``prompts`` ids), the same for both sides.
        k: Completions per prompt (the group size).
        max_tokens: Max completion tokens.
        temperature: Sampling temperature.
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        grad_clip: Global grad-norm clip.
        seed: Sampling and shuffling seed.
    """

    model_dir: Path
    make_env: Callable[[], TextEnv]
    steps: int
    tasks: list[list[int]]
    k: int
    max_tokens: int
    temperature: float
    lr: float
    weight_decay: float
    grad_clip: float
    seed: int

    @property
    def prompts(self) -> int:
        """Prompts per step."""
        return len(self.tasks[0])


@dataclass
class RunTiming:
    """One run of one side.

    Attributes:
        step_seconds: Wall time of each training step (the first is the warm-up).
        step_samples: Trained samples of each step.
        step_tokens: Completion tokens generated in each step.
        gen_seconds: Time inside generation (counted steps only).
        reward_mean: Mean reward of the counted steps' samples.
    """

    step_seconds: list[float]
    step_samples: list[int]
    step_tokens: list[int]
    gen_seconds: float = 0.0
    reward_mean: float = 0.0

    @property
    def counted_seconds(self) -> float:
        """Wall time of the steps after the warm-up step."""
        return sum(self.step_seconds[1:])

    @property
    def per_1000(self) -> float:
        """Seconds per 1,000 trained samples, warm-up step excluded."""
        return 1000.0 * self.counted_seconds / max(1, sum(self.step_samples[1:]))

    @property
    def tokens_per_sample(self) -> float:
        """Mean completion length of the counted steps."""
        return sum(self.step_tokens[1:]) / max(1, sum(self.step_samples[1:]))

    @property
    def gen_share(self) -> float:
        """Share of the counted wall time spent generating."""
        return self.gen_seconds / max(self.counted_seconds, 1e-9)


def _load(setup: Setup) -> tuple[Any, Any]:
    from mas_trainer.models import load_model

    return load_model(str(setup.model_dir), device="cpu", dtype=torch.float32)


def env_reward(make_env: Callable[[], TextEnv], task_id: int, text: str) -> float:
    """The env's reward for answering ``task_id`` with ``text`` (a fresh env, one step)."""
    env = make_env()
    env.reset(options={"task_id": task_id})
    agent = env.agent_selection
    env.step(text)
    return float(env.rewards[agent])


# ------------------------------------------------------------------------------------------ ours


def run_ours(
    setup: Setup, *, recompute_logprobs: bool = True, share_prompts: bool = True
) -> RunTiming:
    """``setup.steps`` steps of our loop: tree rollout (one turn), advantages, learner update.

    ``recompute_logprobs=False`` takes the engine's log-probs as old log-probs (one forward pass
    less, as TRL does with ``num_iterations=1``); ``mas-train`` recomputes them (the default).
    ``share_prompts=False`` makes the learner run every sample's prompt, as TRL's loss does (the
    engine still prefills each distinct prompt once).
    """
    from mas_trainer import at_grpo
    from mas_trainer.engines import SamplingParams
    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.learner import Learner
    from mas_trainer.rollout import TreeRollout

    model, tok = _load(setup)
    roles = setup.make_env().possible_agents
    rollout = TreeRollout(
        setup.make_env,
        {"shared": TransformersEngine(model, tok, batch_size=setup.prompts * setup.k)},
        tok,
        dict.fromkeys(roles, "shared"),
        k=setup.k,
        params=SamplingParams(temperature=setup.temperature, max_tokens=setup.max_tokens),
        system_message=False,
        seed=setup.seed,
    )
    learner = Learner(
        model,
        lr=setup.lr,
        weight_decay=setup.weight_decay,
        grad_clip=setup.grad_clip,
        mini_batch_size=setup.prompts * setup.k,  # one optimizer step per rollout, like TRL's
        temperature=setup.temperature,
        pad_token_id=tok.pad_token_id,
        recompute_logprobs=recompute_logprobs,
        share_prompts=share_prompts,
        seed=setup.seed,
    )
    timing = RunTiming([], [], [])
    rewards: list[float] = []
    for step, tasks in enumerate(setup.tasks):
        t0 = time.perf_counter()
        result = rollout.run(tasks, uid_prefix=f"{step}/")
        samples = result.samples
        reward = torch.tensor([s.reward for s in samples], dtype=torch.float32)  # (N,)
        index = at_grpo.dense_group_index([s.group for s in samples])  # (N,)
        adv, _ = at_grpo.group_advantages(reward, index)  # (N,)
        for s, a in zip(samples, adv.tolist(), strict=True):
            s.advantage = a
        learner.update(samples)
        timing.step_seconds.append(time.perf_counter() - t0)
        timing.step_samples.append(len(samples))
        timing.step_tokens.append(result.gen_tokens)
        if step > 0:
            timing.gen_seconds += result.gen_seconds
            rewards.extend(s.reward for s in samples)
    timing.reward_mean = float(np.mean(rewards)) if rewards else 0.0
    return timing


# ------------------------------------------------------------------------------------------- TRL


def run_trl(setup: Setup, out_dir: Path) -> RunTiming:
    """``setup.steps`` steps of TRL's ``GRPOTrainer`` on the same model, prompts and reward."""
    try:
        from datasets import Dataset
        from transformers import PrinterCallback, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as err:
        raise SystemExit(f"this benchmark needs TRL ({err}); run: {TRL_HINT}") from err

    model, tok = _load(setup)
    env = setup.make_env()
    rows = []
    for tasks in setup.tasks:
        for task_id in tasks:
            env.reset(options={"task_id": task_id})
            obs = env.observe(env.agent_selection)
            rows.append(
                {"prompt": [{"role": "user", "content": obs["prompt"]}], "task_id": task_id}
            )
    dataset = Dataset.from_list(rows)

    timing = RunTiming([], [], [])
    counts: list[int] = []  # completion tokens per reward call (one call per step)
    rewards: list[float] = []

    def reward(
        prompts: list[Any], completions: list[Any], completion_ids: list[list[int]], **kw: Any
    ) -> list[float]:
        counts.append(sum(len(c) for c in completion_ids))
        out = [
            env_reward(setup.make_env, int(t), c[0]["content"])
            for t, c in zip(kw["task_id"], completions, strict=True)
        ]
        rewards.append(float(np.mean(out)))
        return out

    reward.__name__ = "env_reward"

    class StepClock(TrainerCallback):  # type: ignore[misc]
        """Wall time between consecutive step ends (the first from the start of training)."""

        def on_train_begin(self, *a: Any, **k: Any) -> None:
            self.last = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            now = time.perf_counter()
            timing.step_seconds.append(now - self.last)
            timing.step_samples.append(setup.prompts * setup.k)
            self.last = now

    args = GRPOConfig(
        output_dir=str(out_dir),
        use_cpu=True,
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        report_to=[],
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        seed=setup.seed,
        max_steps=setup.steps,
        per_device_train_batch_size=setup.prompts * setup.k,
        gradient_accumulation_steps=1,
        num_generations=setup.k,
        num_iterations=1,
        shuffle_dataset=False,  # rows in order: the same tasks per step as ours
        max_completion_length=setup.max_tokens,
        temperature=setup.temperature,
        top_p=1.0,
        top_k=0,
        learning_rate=setup.lr,
        lr_scheduler_type="constant",
        weight_decay=setup.weight_decay,
        max_grad_norm=setup.grad_clip,
        beta=0.0,  # no KL, no reference model (ours: kl_coef=0)
        epsilon=0.2,
        loss_type="dapo",  # token mean over the batch, as ours
        scale_rewards="group",
        log_completions=False,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        callbacks=[StepClock()],
    )
    trainer.remove_callback(PrinterCallback)  # it prints the end-of-training metrics dict
    generate = trainer._generate_single_turn  # wrapped only to time generation
    gen_times: list[float] = []

    def timed_generate(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        out = generate(*a, **k)
        gen_times.append(time.perf_counter() - t0)
        return out

    trainer._generate_single_turn = timed_generate
    trainer.train()
    if len(timing.step_seconds) != setup.steps or len(counts) != setup.steps:
        raise RuntimeError(
            f"TRL ran {len(timing.step_seconds)} steps and {len(counts)} generation batches, "
            f"expected {setup.steps} of each; check GRPOConfig batch settings"
        )
    timing.step_tokens = counts
    timing.gen_seconds = sum(gen_times[1:])
    timing.reward_mean = float(np.mean(rewards[1:])) if len(rewards) > 1 else 0.0
    return timing


# ------------------------------------------------------------------------------------------ main


def prepare_model(args: argparse.Namespace, folder: Path, make_env: Callable[[], TextEnv]) -> Path:
    """Build the tiny model (optionally warm-started on oracle answers); save it in ``folder``."""
    from mas_trainer.learner import Learner
    from mas_trainer.models import build_tiny_model
    from mas_trainer.warmstart import oracle_samples, warm_start

    model, tok = build_tiny_model(args.preset, seed=args.seed)
    if args.warm_start_steps:
        rng = np.random.default_rng(args.seed)
        roles = make_env().possible_agents
        # Warm-start tasks come from a range the timed steps never use.
        data = oracle_samples(
            make_env,
            tok,
            dict.fromkeys(roles, "shared"),
            list(range(10**6, 10**6 + 512)),
            rng=rng,
            system_message=False,
        ).samples
        learner = Learner(model, lr=5e-3, mini_batch_size=32, pad_token_id=tok.pad_token_id)
        warm_start({"shared": learner}, data, steps=args.warm_start_steps, batch_size=32, rng=rng)
    path = folder / "model"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny", help="mas_trainer.models preset")
    parser.add_argument("--env", default="mas/PlanPath-v0")
    parser.add_argument("--env-options", default='{"rows": 5, "cols": 5, "wall_prob": 0.1}')
    parser.add_argument("--prompts", type=int, default=8, help="prompts (tasks) per step")
    parser.add_argument("--k", type=int, default=4, help="group size (TRL num_generations)")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--steps", type=int, default=5, help="steps per run (first = warm-up)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads, both")
    parser.add_argument("--warm-start-steps", type=int, default=0, help="SFT steps before timing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-floor", action="store_true", help="skip our run without the old-log-prob pass"
    )
    parser.add_argument(
        "--no-sharing",
        action="store_true",
        help="also run ours with the learner's prompt sharing off (where the speed comes from)",
    )
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be >= 2 (the first step of each run is a warm-up)")

    import warnings

    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    torch.set_num_threads(args.threads)
    make_env = env_factory(
        args.env, mode="single", max_turns=1, split="train", **json.loads(args.env_options)
    )
    rng = np.random.default_rng(args.seed)
    tasks = [[int(t) for t in rng.integers(0, 10**6, size=args.prompts)] for _ in range(args.steps)]
    print(
        f"{args.env} single-agent, one turn; model {args.preset!r}; P={args.prompts} prompts x "
        f"K={args.k} = {args.prompts * args.k} samples/step; {args.steps} steps/run (1 warm-up); "
        f"max {args.max_new_tokens} tokens; T={args.temperature}; threads={args.threads}"
    )
    sides = ["ours", "trl"] + ([] if args.no_floor else ["ours-no-recompute"])
    sides += ["ours-no-sharing"] if args.no_sharing else []
    results: dict[str, list[RunTiming]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="bench_vs_trl_") as tmp:
        model_dir = prepare_model(args, Path(tmp), make_env)
        setup = Setup(
            model_dir=model_dir,
            make_env=make_env,
            steps=args.steps,
            tasks=tasks,
            k=args.k,
            max_tokens=args.max_new_tokens,
            temperature=args.temperature,
            lr=args.lr,
            weight_decay=0.01,
            grad_clip=1.0,
            seed=args.seed,
        )
        for r in range(args.repeats):
            order = sides if r % 2 == 0 else sides[::-1]  # alternate who runs first
            for side in order:
                if side == "trl":
                    t = run_trl(setup, Path(tmp) / f"trl-{r}")
                else:
                    t = run_ours(
                        setup,
                        recompute_logprobs=side != "ours-no-recompute",
                        share_prompts=side != "ours-no-sharing",
                    )
                if torch.get_num_threads() != args.threads:
                    raise RuntimeError(
                        f"{side} changed torch's thread count; timings not comparable"
                    )
                results[side].append(t)
                print(
                    f"repeat {r} {side:17s}: {t.per_1000:6.1f} s/1000 samples  "
                    f"(gen {100 * t.gen_share:4.1f}%, {t.tokens_per_sample:4.1f} tokens/sample, "
                    f"reward {t.reward_mean:+.2f})",
                    flush=True,
                )
    med = {side: statistics.median(t.per_1000 for t in runs) for side, runs in results.items()}
    names = {
        "ours": "ours (`mas-train` loop)",
        "trl": "TRL `GRPOTrainer`",
        "ours-no-recompute": "ours, no old-log-prob pass",
        "ours-no-sharing": "ours, learner without prompt sharing",
    }
    print()
    print("| side | s per 1,000 trained samples | generation share | tokens/sample | TRL / side |")
    print("|---|---:|---:|---:|---:|")
    for side, runs in results.items():
        share = statistics.median(t.gen_share for t in runs)
        toks = statistics.median(t.tokens_per_sample for t in runs)
        print(
            f"| {names[side]} | {med[side]:.1f} | {100 * share:.0f}% | {toks:.1f} | "
            f"{med['trl'] / med[side]:.2f}x |"
        )
    print(
        f"\nratio TRL / ours (median s per 1,000 samples; > 1: ours faster): "
        f"{med['trl'] / med['ours']:.2f}x"
    )


if __name__ == "__main__":
    main()
