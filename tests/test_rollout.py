"""Tree rollouts: group keys, batching, best-branch continuation, parallel and single modes."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from digit_env import DigitEnv

from mas_trainer.engines import Completion, SamplingParams
from mas_trainer.models import build_byte_tokenizer
from mas_trainer.rollout import TreeRollout, encode_prompt

TOKENIZER = build_byte_tokenizer()
EOS = TOKENIZER.eos_token_id


class ScriptedEngine:
    """Answers each prompt with a seeded random digit (or junk), and records its calls."""

    def __init__(self, junk: float = 0.2) -> None:
        self.calls: list[list[list[int]]] = []
        self.junk = junk

    def generate(self, prompts, params, seed=None):
        self.calls.append(prompts)
        rng = np.random.default_rng(seed)
        out = []
        for _ in prompts:
            text = "x" if rng.random() < self.junk else str(int(rng.integers(10)))
            ids = [*list(text.encode()), EOS]
            out.append(Completion(ids, [-math.log(10)] * len(ids), "stop"))
        return out

    def load_weights(self, state_dict):
        pass


def make_rollout(engines, policy_of, *, mode="tree", k=4, env_mode="mas", tie="first", seed=0):
    return TreeRollout(
        lambda: DigitEnv(mode=env_mode, max_turns=3),
        engines,
        TOKENIZER,
        policy_of,
        k=k,
        params=SamplingParams(max_tokens=4),
        mode=mode,
        tie_break=tie,
        seed=seed,
        keep_transcripts=True,
    )


def test_encode_prompt_is_the_chat_template():
    ids = encode_prompt(TOKENIZER, {"system": "S", "prompt": "Say 3."})
    text = TOKENIZER.decode(ids)
    assert (
        text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nSay 3.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_tree_groups_hold_k_candidates_of_the_same_prompt():
    engine = ScriptedEngine()
    result = make_rollout({"p": engine}, {"caller": "p", "echo": "p"}).run(
        range(6), uid_prefix="s0/"
    )
    groups = defaultdict(list)
    for s in result.samples:
        groups[s.group].append(s)
    assert all(len(g) == 4 for g in groups.values())
    for (uid, turn, agent), g in groups.items():
        assert uid.startswith("s0/")
        assert {tuple(s.prompt_ids) for s in g} == {tuple(g[0].prompt_ids)}
        assert all(s.role == agent and s.info["turn"] == turn for s in g)
    # one generate call per (turn, agent) step, batching every live root's K candidates
    assert all(len(call) % 4 == 0 for call in engine.calls)
    assert len(engine.calls[0]) == 6 * 4


def test_tree_continues_from_the_best_branch_and_rewards_are_immediate():
    result = make_rollout({"p": ScriptedEngine()}, {"caller": "p", "echo": "p"}).run(range(8))
    by_root = defaultdict(list)
    for s in result.samples:
        by_root[s.group[0]].append(s)
    for ep in result.episodes:
        groups = defaultdict(list)
        for s in by_root[ep.uid]:
            groups[(s.group[1], s.group[2])].append(s.reward)
        for role in ("caller", "echo"):
            best = sum(max(r) for (t, a), r in groups.items() if a == role)
            assert ep.returns[role] == pytest.approx(best)
        # each chosen step's reward is what the env gives that text from that state
        env = DigitEnv(max_turns=3)
        env.reset(options={"task_id": ep.task_id})
        for step in ep.transcript:
            assert env.observe(step["agent"])["prompt"] == step["prompt"]
            env.step(step["action"])
            assert env.rewards[step["agent"]] == pytest.approx(step["reward"])
        assert env.success == ep.success


def test_oracle_like_engine_solves_and_stops_early():
    class Oracle(ScriptedEngine):
        def generate(self, prompts, params, seed=None):
            out = []
            for p in prompts:
                digit = TOKENIZER.decode(p).split("Say ")[1][0]
                ids = [*list(digit.encode()), EOS]
                out.append(Completion(ids, [0.0] * len(ids), "stop"))
            return out

    result = make_rollout({"p": Oracle()}, {"caller": "p", "echo": "p"}).run(range(5))
    assert all(ep.success and ep.turns == 1 for ep in result.episodes)
    assert len(result.samples) == 5 * 2 * 4  # one turn, two agents, K=4


def test_per_role_policies_get_only_their_roles_prompts():
    caller, echo = ScriptedEngine(), ScriptedEngine()
    result = make_rollout({"c": caller, "e": echo}, {"caller": "c", "echo": "e"}).run(range(4))
    assert {s.policy for s in result.samples if s.role == "caller"} == {"c"}
    assert {s.policy for s in result.samples if s.role == "echo"} == {"e"}
    n_caller = sum(len(c) for c in caller.calls)
    assert n_caller == sum(s.role == "caller" for s in result.samples)


def test_parallel_mode_groups_independent_episodes_by_task_turn_agent():
    result = make_rollout(
        {"p": ScriptedEngine()}, {"caller": "p", "echo": "p"}, mode="parallel", k=3
    ).run(range(5))
    assert len(result.episodes) == 15
    assert Counter(ep.task_id for ep in result.episodes) == dict.fromkeys(range(5), 3)
    sizes = Counter(s.group for s in result.samples)
    assert max(sizes.values()) <= 3
    assert sizes[("0", 0, "caller")] == 3  # every episode plays turn 0's first agent
    # every sample is a distinct episode's own step: no candidate branches
    assert len(result.samples) == sum(len(ep.transcript) for ep in result.episodes)


def test_single_agent_mode_has_one_role():
    result = make_rollout({"p": ScriptedEngine()}, {"echo": "p"}, env_mode="single").run(range(3))
    assert {s.role for s in result.samples} == {"echo"}


def test_tie_break_random_is_seeded_and_differs_from_first():
    def chosen(tie, seed):
        res = make_rollout(
            {"p": ScriptedEngine(junk=0.0)}, {"caller": "p", "echo": "p"}, tie=tie, seed=seed
        ).run(range(10))
        return [[s["action"] for s in ep.transcript] for ep in res.episodes]

    assert chosen("random", 1) == chosen("random", 1)
    assert chosen("first", 1) == chosen("first", 1)
    assert chosen("random", 1) != chosen("first", 1)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="without an engine"):
        make_rollout({"p": ScriptedEngine()}, {"caller": "p", "echo": "q"})
    with pytest.raises(ValueError, match="rollout mode"):
        make_rollout({"p": ScriptedEngine()}, {"caller": "p", "echo": "p"}, mode="beam")


def test_real_engine_samples_have_matching_logprobs():
    from mas_trainer.engines import TransformersEngine
    from mas_trainer.models import build_tiny_model

    model, tok = build_tiny_model("tiny", seed=0)
    engine = TransformersEngine(model, tok)
    result = make_rollout({"p": engine}, {"caller": "p", "echo": "p"}).run(range(4))
    assert result.samples
    for s in result.samples:
        assert 1 <= len(s.completion_ids) <= 4
        assert len(s.logprobs) == len(s.completion_ids)
        assert all(lp <= 0 for lp in s.logprobs)
    assert result.gen_tokens == sum(len(s.completion_ids) for s in result.samples)
    assert 0.0 <= result.other_share < 1.0
