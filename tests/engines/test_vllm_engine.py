"""The vLLM engine against the transformers engine and the learner (marker ``vllm``).

Runs in ``.venv-vllm`` (``scripts/install_vllm_cpu.sh``): vllm-cpu with a tiny model saved to a
temp folder. One vLLM engine start costs ~20-80 s on a 2-core machine, so the engines are module
fixtures shared by the tests.
"""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.vllm

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core in this process
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
pytest.importorskip("vllm", reason="needs vllm (scripts/install_vllm_cpu.sh makes .venv-vllm)")

import torch  # noqa: E402

from mas_trainer.engines import SamplingParams  # noqa: E402
from mas_trainer.engines import vllm as vllm_engine  # noqa: E402
from mas_trainer.engines.transformers import TransformersEngine  # noqa: E402
from mas_trainer.engines.vllm import (  # noqa: E402
    VLLMEngine,
    adapter_config,
    build_llm,
    save_for_vllm,
)
from mas_trainer.learner import Learner  # noqa: E402
from mas_trainer.models import add_lora_adapters, build_tiny_model, chat_prompt_ids  # noqa: E402
from mas_trainer.samples import TrainSample  # noqa: E402

torch.set_num_threads(1)


def _prompts(tok, n: int = 6) -> list[list[int]]:
    texts = [f"Move the agent {i} steps; answer with a list of moves." for i in range(n)]
    return [chat_prompt_ids(tok, [{"role": "user", "content": t}]) for t in texts]


def _max_gap(samples: list[TrainSample], learner: Learner) -> float:
    """Largest |engine log-prob - learner log-prob| over all completion tokens."""
    gaps = [
        abs(a - b)
        for s, lp in zip(samples, learner.logprobs(samples), strict=True)
        for a, b in zip(s.logprobs, lp, strict=True)
    ]
    return max(gaps)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A tiny tied-embedding model, its tokenizer and a vLLM engine started on a copy of it."""
    model, tok = build_tiny_model("tiny", seed=3)
    assert model.config.tie_word_embeddings
    folder = save_for_vllm(model, tok, tmp_path_factory.mktemp("tiny"))
    llm = build_llm(folder, dtype="float32", max_model_len=1024, enforce_eager=True)
    return model, tok, VLLMEngine(llm, tok, seed=0)


def test_greedy_output_identical_to_transformers_engine(base):
    model, tok, engine = base
    prompts = _prompts(tok)
    params = SamplingParams(temperature=0, max_tokens=20)
    ours = engine.generate(prompts, params)
    ref = TransformersEngine(model, tok).generate(prompts, params)
    assert [c.token_ids for c in ours] == [c.token_ids for c in ref]
    assert [c.finish_reason for c in ours] == [c.finish_reason for c in ref]
    for a, b in zip(ours, ref, strict=True):  # greedy: log-probs at temperature 1
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_stops_at_im_end_and_reports_it(base):
    model, tok, engine = base
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    with torch.no_grad():  # make <|im_end|> the argmax everywhere, on a copy of the weights
        state = {k: v.clone() for k, v in model.state_dict().items()}
        state["lm_head.weight"][im_end] += 50.0
        state["model.embed_tokens.weight"] = state["lm_head.weight"]
    engine.load_weights(state)
    try:
        out = engine.generate(_prompts(tok, 2), SamplingParams(temperature=0, max_tokens=8))
        assert [c.token_ids for c in out] == [[im_end], [im_end]]
        assert {c.finish_reason for c in out} == {"stop"}
    finally:
        engine.load_weights(model.state_dict())


def test_seeded_sampling_is_reproducible_and_seed_dependent(base):
    _, tok, engine = base
    prompts = _prompts(tok, 4) * 2
    params = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=16)
    a = engine.generate(prompts, params, seed=11)
    b = engine.generate(prompts, params, seed=11)
    c = engine.generate(prompts, params, seed=12)
    assert [x.token_ids for x in a] == [x.token_ids for x in b]
    assert [x.token_ids for x in a] != [x.token_ids for x in c]
    # Duplicated prompts (tree rollouts send K copies) still sample independently.
    assert len({tuple(x.token_ids) for x in a}) > 4


@pytest.mark.parametrize("through_file", [False, True], ids=["in-place", "weights-file"])
def test_logprobs_match_learner_after_update_and_sync(base, through_file, monkeypatch):
    """Sampled log-probs (temperature 0.7, top-p 0.9) equal the learner's, before and after an
    update; tied embeddings included (the update moves embed_tokens == lm_head)."""
    model, tok, engine = base
    if through_file:  # the path a multi-process vLLM engine core takes
        monkeypatch.setattr(vllm_engine, "_in_process", lambda llm: False)
    model = __import__("copy").deepcopy(model)
    params = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=16)
    learner = Learner(
        model, lr=3e-2, temperature=0.7, top_p=0.9, mini_batch_size=6, pad_token_id=tok.pad_token_id
    )
    engine.load_weights(model.state_dict())
    prompts = _prompts(tok)
    outs = engine.generate(prompts, params, seed=1)
    samples = [
        TrainSample(p, c.token_ids, c.logprobs, reward=float(i % 2), advantage=float(i % 2) - 0.5)
        for i, (p, c) in enumerate(zip(prompts, outs, strict=True))
    ]
    assert _max_gap(samples, learner) < 1e-4
    embed_before = model.model.embed_tokens.weight.detach().clone()
    learner.update(samples)
    assert not torch.equal(embed_before, model.model.embed_tokens.weight)
    assert _max_gap(samples, learner) > 1e-2  # the update moved the policy: stale engine differs

    engine.load_weights(model.state_dict())
    outs = engine.generate(prompts, params, seed=2)
    fresh = [
        TrainSample(p, c.token_ids, c.logprobs, reward=0.0)
        for p, c in zip(prompts, outs, strict=True)
    ]
    assert _max_gap(fresh, learner) < 1e-4


def test_per_role_lora_adapters_match_learner(tmp_path):
    """One vLLM engine on the frozen base, one LoRA adapter per role, synced after an update."""
    base_model, tok = build_tiny_model("tiny", seed=4)
    peft_model = add_lora_adapters(base_model, ["planner", "tool"], r=8, alpha=16)
    folder = save_for_vllm(peft_model, tok, tmp_path / "base")
    llm = build_llm(
        folder,
        dtype="float32",
        max_model_len=1024,
        enforce_eager=True,
        enable_lora=True,
        max_lora_rank=8,
        max_loras=2,
    )
    engines = {
        role: VLLMEngine(llm, tok, adapter=role, adapter_config=adapter_config(peft_model, role))
        for role in ("planner", "tool")
    }
    learner = Learner(
        peft_model, lr=5e-2, adapter="planner", mini_batch_size=6, pad_token_id=tok.pad_token_id
    )
    prompts = _prompts(tok)
    params = SamplingParams(temperature=1.0, max_tokens=12)
    for e in engines.values():
        e.load_weights(peft_model.state_dict())
    outs = engines["planner"].generate(prompts, params, seed=3)
    samples = [
        TrainSample(p, c.token_ids, c.logprobs, reward=0.0, advantage=1.0 if i < 3 else -1.0)
        for i, (p, c) in enumerate(zip(prompts, outs, strict=True))
    ]
    learner.update(samples)  # LoRA B leaves zero: the planner now differs from the base
    for e in engines.values():
        e.load_weights(peft_model.state_dict())
    for role, engine in engines.items():
        outs = engine.generate(prompts, params, seed=5)
        fresh = [
            TrainSample(p, c.token_ids, c.logprobs, reward=0.0)
            for p, c in zip(prompts, outs, strict=True)
        ]
        scorer = Learner(peft_model, adapter=role, pad_token_id=tok.pad_token_id)
        assert _max_gap(fresh, scorer) < 1e-3, role
    # The update really moved the planner's adapter (so the match above is not vacuous).
    planner_lp = Learner(peft_model, adapter="planner", pad_token_id=tok.pad_token_id)
    assert _max_gap(samples, planner_lp) > 1e-2


def _records(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _pick(records: list[dict], key: str) -> list:
    return [r[key] for r in records if key in r]


def _per_policy(records: list[dict], key: str) -> list[dict[str, float]]:
    """``key`` of every policy, per step (``key/<policy>`` of a run of several policies; a policy
    whose groups all had zero variance skipped its update that step)."""
    return [
        {k: v for k, v in r.items() if k.startswith(f"{key}/")}
        for r in records
        if r.get("phase") == "rl"
    ]


def _actions(run_dir, tag: str) -> list[str]:
    """The greedy evaluation's actions (transcripts) written under ``tag``."""
    rows = (run_dir / "transcripts.jsonl").read_text().splitlines()
    steps = [st for r in map(json.loads, rows) if r["tag"] == tag for st in r["steps"]]
    assert steps, (run_dir, tag)
    return [st["action"] for st in steps]


SHORT_RUN = [
    "plan-path-tiny",  # a policy per role, on the tiny-bpe tokenizer
    "--optim.warmstart_steps", "40",
    "--optim.warmstart_episodes", "64",
    "--optim.steps", "3",
    "--rollout.tasks_per_step", "4",
    "--eval.episodes", "8",
    "--run.progress", "false",
    "--run.log_transcripts", "2",
]  # fmt: skip


@pytest.fixture(scope="module")
def short_runs(tmp_path_factory):
    """The same short ``mas-train`` run with the transformers engine and with vLLM."""
    from mas_trainer.cli import train_main

    out = tmp_path_factory.mktemp("runs")
    common = [*SHORT_RUN, "--run.out_dir", str(out)]
    assert train_main([*common, "--run.name", "hf"]) == 0
    assert train_main([*common, "--run.name", "vllm", "--model.engine", "vllm"]) == 0
    return out


def test_mas_train_with_vllm_engine_follows_the_transformers_run(short_runs):
    """A short ``mas-train --model.engine vllm`` run completes; its greedy evaluations equal the
    transformers run's (same seed, same warm start) and its reward curve has the same shape."""
    hf, vl = _records(short_runs / "hf"), _records(short_runs / "vllm")
    # Greedy evaluation writes the same actions, before and after the warm start (so the warm
    # start's weights reached vLLM), and scores the same.
    for tag in ("init", "warmstart"):
        assert _actions(short_runs / "vllm", tag) == _actions(short_runs / "hf", tag), tag
    assert _actions(short_runs / "hf", "init") != _actions(short_runs / "hf", "warmstart")
    assert _pick(vl, "eval/success")[0] == _pick(hf, "eval/success")[0]
    assert _pick(vl, "eval_warmstart/success") == _pick(hf, "eval_warmstart/success")
    # RL: vLLM's log-probs are each policy's learner's (the ratio starts at 1), and the curves
    # agree.
    mismatch = [v for step in _per_policy(vl, "perf/logprob_mismatch") for v in step.values()]
    assert mismatch and max(mismatch) < 1e-3
    rh, rv = _pick(hf, "rollout/success"), _pick(vl, "rollout/success")
    assert len(rh) == len(rv) == 3
    assert abs(sum(rh) / 3 - sum(rv) / 3) < 0.35


def test_ray_backend_with_vllm_rollout_actors_matches_the_local_vllm_run(short_runs):
    """``--run.backend ray --model.engine vllm``: vLLM inside the rollout actors, same samples."""
    ray = pytest.importorskip("ray", reason="needs ray: pip install -e '.[ray]'")
    from mas_trainer.cli import train_main

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        args = [*SHORT_RUN, "--run.out_dir", str(short_runs), "--run.name", "ray-vllm"]
        assert train_main([*args, "--model.engine", "vllm", "--run.backend", "ray"]) == 0
    finally:
        ray.shutdown()
    local, remote = _records(short_runs / "vllm"), _records(short_runs / "ray-vllm")
    for tag in ("init", "warmstart", "final"):
        assert _actions(short_runs / "ray-vllm", tag) == _actions(short_runs / "vllm", tag), tag
    for key in ("rollout/success", "rollout/samples", "algo/zero_var_groups"):
        assert _pick(remote, key) == _pick(local, key), key
    losses = _per_policy(local, "loss/policy")
    assert any(losses)
    for step_remote, step_local in zip(_per_policy(remote, "loss/policy"), losses, strict=True):
        assert step_remote == pytest.approx(step_local, abs=1e-5)


def test_per_role_engines_run_in_processes_of_their_own_and_sync_exactly():
    """``--model.engine vllm`` with a policy per role: each policy's engine is a process of its
    own (a second sleep-mode ``vllm.LLM`` in one process fails vLLM's ``CuMemAllocator`` assert on
    a GPU), the engines generate at once from two threads, and weights synced after an update
    reach the right process exactly."""
    import threading

    from mas_trainer.config import build_config
    from mas_trainer.policy import build_policies, close_engines, engine_weights

    cfg = build_config("plan-path-tiny", overrides=["--model.engine", "vllm"])
    policies = build_policies(cfg, ["planner", "tool"], None)
    try:
        pids = {name: pol.engine.pid for name, pol in policies.items()}
        assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
        for pid in pids.values():
            os.kill(pid, 0)  # alive: the pids are real processes
        planner, tool = policies["planner"], policies["tool"]
        prompts = _prompts(planner.tokenizer)
        params = SamplingParams(temperature=1.0, max_tokens=12)
        outs: dict[str, list] = {}
        threads = [
            threading.Thread(
                target=lambda n=n: outs.setdefault(
                    n, policies[n].engine.generate(prompts, params, 1)
                )
            )
            for n in policies
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        samples = [
            TrainSample(p, c.token_ids, c.logprobs, reward=0.0, advantage=1.0 if i < 3 else -1.0)
            for i, (p, c) in enumerate(zip(prompts, outs["planner"], strict=True))
        ]
        scorer = Learner(
            planner.model,
            lr=3e-2,
            temperature=1.0,
            mini_batch_size=6,
            pad_token_id=planner.tokenizer.pad_token_id,
        )
        assert _max_gap(samples, scorer) < 1e-4
        scorer.update(samples)
        assert _max_gap(samples, scorer) > 1e-3  # the update moved the planner
        for pol in policies.values():
            pol.engine.load_weights(engine_weights(pol.model, cfg.model.engine_weights_dtype))
        fresh = planner.engine.generate(prompts, params, seed=2)
        synced = [
            TrainSample(p, c.token_ids, c.logprobs, 0.0)
            for p, c in zip(prompts, fresh, strict=True)
        ]
        assert _max_gap(synced, scorer) < 1e-4
        tool_scorer = Learner(tool.model, temperature=1.0, pad_token_id=tool.tokenizer.pad_token_id)
        again = tool.engine.generate(prompts, params, seed=1)
        assert [c.token_ids for c in again] == [c.token_ids for c in outs["tool"]]
        tool_samples = [
            TrainSample(p, c.token_ids, c.logprobs, 0.0)
            for p, c in zip(prompts, again, strict=True)
        ]
        assert _max_gap(tool_samples, tool_scorer) < 1e-4
    finally:
        close_engines(policies)
    for pid in pids.values():  # closed: the processes are gone
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_colocated_engine_sleeps_during_updates_and_wakes_for_sync_then_rollout(monkeypatch):
    """GPU memory hand-over, on a recording stand-in for ``vllm.LLM`` (vllm-cpu ignores sleep):
    the engine sleeps before the update, the learner gives its cached blocks back after it, and
    only then does the engine wake (weights for the sync, KV cache for the rollout)."""
    from mas_trainer.models import build_byte_tokenizer
    from mas_trainer.policy import EngineSleepsDuringUpdates

    calls: list[tuple] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(("empty_cache",)))

    class RecordingLLM:
        def sleep(self, level: int) -> None:
            calls.append(("sleep", level))

        def wake_up(self, tags: list[str]) -> None:
            calls.append(("wake", tuple(tags)))

    class RecordingLearner:
        lr = 0.5

        def update(self, samples):
            calls.append(("update",))
            return {}

    llm = RecordingLLM()
    planner, tool = (VLLMEngine(llm, build_byte_tokenizer(), adapter=a) for a in ("p", "t"))
    learner = EngineSleepsDuringUpdates(RecordingLearner(), planner, "cuda:0")
    learner.update([])
    # same LLM: already asleep
    EngineSleepsDuringUpdates(RecordingLearner(), tool, "cuda:0").update([])
    planner.wake_up(tags=["weights"])  # what load_weights does before reloading
    tool.wake_up()  # what generate does: only the KV cache is still asleep
    tool.wake_up()
    assert calls == [
        ("sleep", 1),
        ("update",),
        ("empty_cache",),
        ("update",),
        ("empty_cache",),
        ("wake", ("weights",)),
        ("wake", ("kv_cache",)),
    ]
    assert learner.lr == 0.5  # the wrapper is the learner otherwise
