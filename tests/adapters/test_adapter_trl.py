"""TRL: `env_reward` and `ToolEnv` through two real steps of TRL's `GRPOTrainer` on the CPU.

The model is the project's tiny Qwen3 built in code (`mas_trainer.models`, no hub). Marked
`adapters` (CI runs these after installing the trl extra).
"""

from __future__ import annotations

import pytest

pytest.importorskip("trl", reason="needs the extra: pip install -e '.[trl]'")
pytest.importorskip("torch")

import torch
from transformers import PrinterCallback
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import qwen3_chat_template

import mas_envs
from mas_envs.adapters.trl import ToolEnv, completion_text, env_reward, make_dataset
from mas_trainer.models import build_tiny_model

pytestmark = pytest.mark.adapters

GRID = {"rows": 3, "cols": 3}


def _args(tmp_path, **kw):
    return GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=2,
        learning_rate=1e-2,
        beta=0.0,
        seed=0,
        **kw,
    )


def _train(model, tok, tmp_path, **kw):
    before = [p.detach().clone() for p in model.parameters()]
    trainer = GRPOTrainer(model=model, processing_class=tok, **kw)
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    after = list(model.parameters())
    moved = sum(not torch.equal(a, p.detach()) for a, p in zip(before, after, strict=True))
    logs = [h for h in trainer.state.log_history if "reward" in h]
    return trainer, moved, logs


def test_env_reward_scores_a_completion_on_its_task():
    data = make_dataset("mas/PlanPath-v0", n=3, plays=["planner"], others="oracle")
    rows = data.to_list()
    cols = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    answers = []
    for row in rows:
        env = mas_envs.make("mas/PlanPath-v0")
        env.reset(options={"task_id": int(row["task_id"])})
        env.step(env.oracle_action())  # the oracle tool, as the row's episode has it
        answers.append([{"role": "assistant", "content": env.oracle_action()}])
        env.step(answers[-1][0]["content"])
        row["want"] = env.rewards["planner"]
    rewards = env_reward([r["prompt"] for r in rows], answers, **cols)
    assert rewards == pytest.approx([r["want"] for r in rows]) and min(rewards) > 0
    bad = env_reward([r["prompt"] for r in rows], ["garbage"] * 3, **cols)
    assert bad == [mas_envs.make("mas/PlanPath-v0").format_penalty] * 3
    assert completion_text("x") == "x"
    with pytest.raises(KeyError, match="make_dataset"):
        env_reward([], [], task_id=[])


def test_two_grpo_steps_with_env_reward(tmp_path):
    model, tok = build_tiny_model("tiny", seed=0)
    data = make_dataset("mas/PlanPath-v0", n=8, mode="single", env_kwargs=GRID)
    seen = []

    def reward(prompts, completions, **kwargs):
        out = env_reward(prompts, completions, **kwargs)
        seen.extend(zip(kwargs["task_id"], completions, out, strict=True))
        return out

    reward.__name__ = "env_reward"
    _, moved, logs = _train(
        model, tok, tmp_path, reward_funcs=reward, train_dataset=data,
        args=_args(tmp_path, max_completion_length=12),
    )  # fmt: skip
    assert len(logs) == 2 and moved > 0  # two logged steps; the weights were updated
    assert len(seen) == 8  # 2 steps x 2 prompts x 2 generations, each scored on its task
    for task_id, completion, r in seen:  # the reward is the env's, recomputed independently
        env = mas_envs.make("mas/PlanPath-v0", mode="single", **GRID)
        env.reset(options={"task_id": int(task_id)})
        env.step(completion_text(completion))
        assert r == pytest.approx(env.rewards["planner"])


def test_tool_env_plays_an_episode_through_act():
    data = make_dataset("mas/PlanPath-v0", n=2, env_kwargs=GRID)  # one model plays both roles
    for row in data.to_list():
        env = ToolEnv()
        assert env.reset(**row) is None  # the row's prompt already is the first turn
        assert env.get_reward() == mas_envs.make("mas/PlanPath-v0").format_penalty
        mirror = mas_envs.make("mas/PlanPath-v0", **GRID)
        mirror.reset(options={"task_id": int(row["task_id"])})
        total, done = 0.0, False
        while not done:
            agent, text = mirror.agent_selection, mirror.oracle_action()
            mirror.step(text)
            total += mirror.rewards[agent]
            reply = env.act(text)
            done = mirror.terminations[agent] or mirror.truncations[agent]
            assert done or f"You now act as the {mirror.agent_selection}" in reply
        assert "episode is over: the task is solved" in reply
        assert env.get_reward() == pytest.approx(total)
        assert "do not call act again" in env.act("#### R")


def test_two_grpo_steps_with_the_tool_env(tmp_path):
    model, tok = build_tiny_model("tiny", seed=0)
    tok.chat_template = qwen3_chat_template  # a template that renders tool calls
    data = make_dataset("mas/PlanPath-v0", n=4, mode="single", env_kwargs=GRID)
    resets = []

    class Recorded(ToolEnv):
        def reset(self, **row):
            resets.append(row["task_id"])
            return super().reset(**row)

    trainer, _, logs = _train(
        model, tok, tmp_path, environment_factory=Recorded, train_dataset=data,
        args=_args(tmp_path, max_completion_length=24, max_tool_calling_iterations=2),
    )  # fmt: skip
    assert len(logs) == 2 and len(resets) >= 4
    assert set(resets) <= set(data["task_id"])
    assert [t.__name__ for t in trainer.tools] == ["act"]  # the env's one public method
    # a random tiny model does not call the tool: every rollout earns the format penalty
    penalty = mas_envs.make("mas/PlanPath-v0").format_penalty
    assert all(h["reward"] == pytest.approx(penalty) for h in logs)
