"""Tree rollouts: group keys, batching, best-branch continuation, parallel and single modes."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import ClassVar

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from digit_env import DigitEnv

from mas_envs.planpath.prompts import oracle_program_v1
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


def make_rollout(
    engines, policy_of, *, mode="tree", k=4, env_mode="mas", tie="first", seed=0, env=DigitEnv
):
    return TreeRollout(
        lambda: env(mode=env_mode, max_turns=3),
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


class HistoryDigitEnv(DigitEnv):
    """DigitEnv whose prompt also shows the answer the other role gave last (a history)."""

    def _load_task(self, task_id):
        super()._load_task(task_id)
        self._last = ""

    def _apply(self, agent, text):
        self._last = text.strip()[:1]
        return super()._apply(agent, text)

    def _prompt(self, agent):
        return f"{super()._prompt(agent)} Last answer: {self._last or '-'}."


def test_parallel_prompt_mode_groups_only_identical_prompts():
    """Same episodes as ``parallel`` (same seed), but a group never mixes two prompts: the
    ``parallel`` groups whose histories parted are split, one group per prompt."""

    def play(mode):
        engines, policy_of = {"p": ScriptedEngine()}, {"caller": "p", "echo": "p"}
        return make_rollout(engines, policy_of, mode=mode, env=HistoryDigitEnv).run(range(6))

    loose, strict = play("parallel"), play("parallel-prompt")
    assert [ep.transcript for ep in loose.episodes] == [ep.transcript for ep in strict.episodes]
    groups = defaultdict(list)
    for s in strict.samples:
        groups[s.group].append(s)
    for g in groups.values():
        assert len({tuple(s.prompt_ids) for s in g}) == 1
    # each (task, turn, agent) group of the parallel mode is split by prompt, nothing else
    loose_groups = defaultdict(set)
    for s in loose.samples:
        loose_groups[s.group].add(tuple(s.prompt_ids))
    assert len(groups) == sum(len(prompts) for prompts in loose_groups.values())
    assert len(groups) > len(loose_groups)  # some histories parted (the test has teeth)
    assert len(groups[next(k for k in groups if k[:3] == ("0", 0, "caller"))]) == 4


def test_unknown_rollout_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="parallel-prompt"):
        make_rollout({"p": ScriptedEngine()}, {"caller": "p", "echo": "p"}, mode="paralel")


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
    from mas_trainer.engines.transformers import TransformersEngine
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


# ---------------------------------------------------------------------------- prefetch


class PrefetchLog:
    """What the envs of one rollout were asked to prefetch, and what they stepped."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple, list[str]]] = []  # (state, texts)
        self.cache: set[tuple[tuple, str]] = set()
        self.steps: list[tuple[tuple, str, bool]] = []  # (state, text, was it prefetched)


class PrefetchDigitEnv(DigitEnv):
    """DigitEnv with a ``prefetch`` that fills a cache every env of a rollout shares (as the code
    envs' program cache is shared by clones); its steps record whether their text was in it."""

    log: PrefetchLog

    def _state(self, agent):
        return (self._base, self.turn, agent)

    def prefetch(self, texts, agent=None):
        state = self._state(agent or self.agent_selection)
        self.log.calls.append((state, list(texts)))
        self.log.cache.update((state, t) for t in texts)

    def _apply(self, agent, text):
        state = self._state(agent)
        self.log.steps.append((state, text, (state, text) in self.log.cache))
        return super()._apply(agent, text)


def prefetch_rollout(log, *, env_cls=PrefetchDigitEnv, mode="tree", k=4, prefetch=True):
    def make_env():
        env = env_cls(max_turns=3)
        env.log = log
        return env

    return TreeRollout(
        make_env,
        {"p": ScriptedEngine()},
        TOKENIZER,
        {"caller": "p", "echo": "p"},
        k=k,
        params=SamplingParams(max_tokens=4),
        mode=mode,
        seed=3,
        keep_transcripts=True,
        prefetch=prefetch,
    )


def _text(sample):
    return TOKENIZER.decode(sample.completion_ids, skip_special_tokens=True)


def test_tree_prefetches_each_groups_k_texts_once_before_stepping_them():
    log = PrefetchLog()
    result = prefetch_rollout(log).run(range(6))
    groups = defaultdict(list)
    for s in result.samples:
        groups[s.group].append(_text(s))
    called = {(str(base), turn, agent): texts for (base, turn, agent), texts in log.calls}
    assert len(called) == len(log.calls), "one call per (root, turn, agent)"
    assert called == groups  # exactly the K candidates of the group, in order
    assert all(len(texts) == 4 for texts in called.values())
    assert len(log.steps) == len(result.samples) and all(hit for *_, hit in log.steps)


def test_prefetch_changes_no_result():
    def played(env_cls, prefetch):
        log = PrefetchLog()
        res = prefetch_rollout(log, env_cls=env_cls, prefetch=prefetch).run(range(8))
        samples = [(s.group, s.completion_ids, s.reward, s.info) for s in res.samples]
        episodes = [
            (ep.uid, ep.success, ep.turns, ep.returns, ep.transcript) for ep in res.episodes
        ]
        return samples, episodes, log

    with_it, without, plain = (
        played(PrefetchDigitEnv, True),
        played(PrefetchDigitEnv, False),
        played(DigitEnv, True),
    )
    assert with_it[2].calls and not without[2].calls and not plain[2].calls
    assert with_it[:2] == without[:2] == plain[:2]


def test_parallel_mode_prefetches_the_texts_of_episodes_at_one_state():
    log = PrefetchLog()
    result = prefetch_rollout(log, mode="parallel", k=3).run(range(5))
    # turn 0's first agent: the 3 episodes of each task start as clones of one env
    assert [state for state, _ in log.calls[:5]] == [(t, 0, "caller") for t in range(5)]
    stepped = defaultdict(list)
    for state, text, hit in log.steps:
        stepped[state].append((text, hit))
    for state, texts in log.calls:
        assert len(texts) >= 2 and sorted(texts) == sorted(t for t, _ in stepped[state])
    # a text was prefetched exactly when another episode of its task stepped from that state
    for state, steps in stepped.items():
        assert all(hit == (len(steps) > 1) for _, hit in steps), state
    assert len(log.steps) == len(result.samples)


def test_one_candidate_per_root_prefetches_nothing():
    log = PrefetchLog()
    prefetch_rollout(log, k=1).run(range(4))  # as evaluation runs: nothing to pool
    assert log.steps and not log.calls


BFS_FROM_STDIN = oracle_program_v1()  # reads the grid from stdin: the same text on every level
TOOL_TEXTS = [BFS_FROM_STDIN, '```python\nprint("#### R")\n```', "Go right, I think."]
PLANNER_TEXTS = ["#### U", "#### L", "no idea"]


class CodeCandidates(ScriptedEngine):
    """The i-th candidate of a K=3 group: the i-th tool program or planner answer above."""

    def generate(self, prompts, params, seed=None):
        out = []
        for i, p in enumerate(prompts):
            tool = "Python program" in TOKENIZER.decode(p)
            text = (TOOL_TEXTS if tool else PLANNER_TEXTS)[i % 3]
            ids = [*list(text.encode()), EOS]
            out.append(Completion(ids, [0.0] * len(ids), "stop"))
        return out


def test_code_env_tree_rollout_reads_the_prefetched_programs(monkeypatch):
    import mas_envs
    from mas_envs import sandbox

    def play(prefetch):
        rollout = TreeRollout(
            lambda: mas_envs.make("mas/PlanPathCode-v0"),
            {"p": CodeCandidates()},
            TOKENIZER,
            {"tool": "p", "planner": "p"},
            k=3,
            params=SamplingParams(max_tokens=1024),
            prefetch=prefetch,
        )
        res = rollout.run(list(mas_envs.make("mas/PlanPathCode-v0").task_ids("train")[:2]))
        return [(s.group, s.reward, s.info) for s in res.samples]

    pooled = []
    real_many = sandbox.run_many
    monkeypatch.setattr(
        sandbox, "run_many", lambda jobs, **kw: pooled.append(len(jobs)) or real_many(jobs, **kw)
    )
    without = play(prefetch=False)
    assert not pooled  # each clone ran its own program

    def no_single_runs(*args, **kwargs):
        raise AssertionError("a clone ran a program the rollout should have prefetched")

    monkeypatch.setattr(sandbox, "run_python", no_single_runs)
    with_prefetch = play(prefetch=True)
    tool_steps = {g for g, _, _ in with_prefetch if g[2] == "tool"}
    # at most one pooled call per tool step, running its 2 programs (none when a step's grid was
    # seen before in that root: the programs' results are cached already)
    assert pooled and set(pooled) == {2} and len(pooled) <= len(tool_steps)
    assert with_prefetch == without
    verdicts = [info["verdict"] for g, _, info in with_prefetch if g[2] == "tool"]
    assert verdicts.count("ok") == 2 * len(tool_steps)
    assert any(r > 1.0 for g, r, _ in with_prefetch if g[2] == "tool")  # the BFS finds the goal


class SlowEngine(ScriptedEngine):
    """A scripted engine whose calls take ``delay`` seconds, as an engine in another process
    does (the caller's thread waits); it records the calls that overlapped another engine's."""

    running: ClassVar[set[str]] = set()  # which engines are generating now

    def __init__(self, name: str, delay: float, overlaps: list[str]) -> None:
        """``delay``: seconds per prompt (a busy engine's time grows with its batch)."""
        super().__init__(junk=0.0)
        self.name, self.delay, self.overlaps = name, delay, overlaps
        self.lock = __import__("threading").Lock()  # one call at a time, as a process serves

    def generate(self, prompts, params, seed=None):
        import time

        with self.lock:
            if SlowEngine.running - {self.name}:
                self.overlaps.append(self.name)
            SlowEngine.running.add(self.name)
            try:
                time.sleep(self.delay * len(prompts))
                return super().generate(prompts, params, seed)
            finally:
                SlowEngine.running.discard(self.name)


def _cohort_run(cohorts, *, delay=0.0, seed=0, tie="random"):
    overlaps: list[str] = []
    engines = {n: SlowEngine(n, delay, overlaps) for n in ("c", "e")}
    rollout = make_rollout(engines, {"caller": "c", "echo": "e"}, tie=tie, seed=seed)
    rollout.cohorts = cohorts
    return rollout.run(range(8), uid_prefix="s/"), overlaps


def _summary(result):
    return (
        [(s.group, s.completion_ids, s.reward) for s in result.samples],
        [(e.uid, e.success, e.turns, [t["action"] for t in e.transcript]) for e in result.episodes],
    )


def test_cohorts_sample_deterministically_in_task_order():
    """Two cohorts play in threads: the samples and episodes come back in task order, the same
    on every run (each cohort seeds its own calls), whatever the timing."""
    two, _ = _cohort_run(2)
    again, _ = _cohort_run(2, delay=0.0005)  # other timings, same result
    assert _summary(two) == _summary(again)
    assert [e.uid for e in two.episodes] == [f"s/{i}" for i in range(8)]
    groups = Counter(s.group for s in two.samples)
    assert set(groups.values()) == {4}  # every (root, turn, agent) group holds its K candidates
    assert {g[0] for g in groups} == {f"s/{i}" for i in range(8)}


def test_cohorts_overlap_two_policies_engines():
    """Per-role engines that serve one call at a time (processes of their own): with two cohorts
    one cohort's caller generates while the other's echo does, and the rollout takes less time.
    Timings here are sleeps standing in for generation, so they hold on a loaded machine."""
    import time

    t0 = time.perf_counter()
    _, none = _cohort_run(1, delay=0.002)
    lockstep = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, both = _cohort_run(2, delay=0.002)
    overlapped = time.perf_counter() - t0
    assert none == []
    assert len(both) >= 2
    assert overlapped < 0.8 * lockstep, (overlapped, lockstep)


def test_cohorts_run_one_cohorts_sandboxed_programs_while_another_generates(monkeypatch):
    """Item 6 of issue 30: on a code env with two cohorts, the tool programs one cohort's step
    runs in the sandbox (on the warm pool where this machine has one) overlap another cohort's
    generate call; one cohort (the old rollout) runs them between its own calls only."""
    import threading
    import time

    import mas_envs
    from mas_envs import sandbox
    from mas_envs.sandbox import pool, runner

    spans: list[tuple[str, int, float, float]] = []  # (what, thread, start, end)

    def timed(what, fn):
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spans.append((what, threading.get_ident(), start, time.perf_counter()))

        return run

    class SlowCandidates(CodeCandidates):
        """Serves one call at a time, as an engine in a process of its own does."""

        def __init__(self) -> None:
            super().__init__()
            self.lock = threading.Lock()

        def generate(self, prompts, params, seed=None):
            answer = super().generate
            with self.lock:
                return timed("generate", lambda: time.sleep(0.15) or answer(prompts, params))()

    monkeypatch.setattr(sandbox, "run_many", timed("sandbox", sandbox.run_many))
    monkeypatch.setattr(sandbox, "run_python", timed("sandbox", sandbox.run_python))
    env_id = "mas/PlanPathCode-v0"
    tasks = list(mas_envs.make(env_id).task_ids("train")[:4])

    def overlaps(cohorts):
        spans.clear()
        pool.shutdown()
        rollout = TreeRollout(
            lambda: mas_envs.make(env_id),
            {"t": SlowCandidates(), "p": SlowCandidates()},
            TOKENIZER,
            {"tool": "t", "planner": "p"},
            k=3,
            params=SamplingParams(max_tokens=1024),
            cohorts=cohorts,
        )
        rollout.run(tasks)
        runs = [sp for sp in spans if sp[0] == "sandbox"]
        gens = [sp for sp in spans if sp[0] == "generate"]
        assert runs and gens
        return [(r, g) for r in runs for g in gens if r[1] != g[1] and r[2] < g[3] and g[2] < r[3]]

    assert overlaps(1) == []
    assert overlaps(2)
    if pool.supports(runner.current_mode()):
        assert pool.active()  # the programs ran on the warm pool


def test_cohorts_need_engines_that_take_concurrent_calls():
    from mas_trainer.config import ConfigError, build_config

    with pytest.raises(ConfigError, match=r"rollout\.cohorts > 1 calls an engine from several"):
        build_config("plan-path-tiny", overrides=["--rollout.cohorts", "2"])
    cfg = build_config(
        "plan-path-tiny", overrides=["--rollout.cohorts", "2", "--model.engine", "vllm"]
    )
    assert cfg.rollout.cohorts == 2
