"""Placement and failure handling that decide where models load, where a learner's memory and
checkpoints go, and what a dead worker does, checked without GPUs or a Ray cluster (the actor
bodies are plain classes; Ray's calls are faked).
"""

from __future__ import annotations

import time
import types

import pytest

from mas_trainer.config import build_config
from mas_trainer.distributed import actors, handles
from mas_trainer.policy import engine_gpus, local_placements

pytest.importorskip("torch")


# ---------------------------------------------------------------------------- where models load


@pytest.fixture
def loads(monkeypatch):
    """The devices the actor bodies load their models onto (the loading itself is skipped)."""
    import mas_trainer.models

    seen: list[str] = []

    def load_model(name, *, device, dtype=None, seed=0):
        seen.append(device)
        return types.SimpleNamespace(parameters=lambda: iter(())), object()

    monkeypatch.setattr(mas_trainer.models, "load_model", load_model)
    return seen


def test_a_vllm_rollout_actor_stages_its_model_on_the_cpu(monkeypatch, loads, tmp_path):
    """The rollout actor only writes the model out for vLLM, which loads it onto its own GPUs:
    it must not load the fp32 model onto a GPU (on the Ray backend it may have been given none,
    and a model it drops keeps its blocks in torch's cache)."""
    import mas_trainer.engines.vllm as vllm_engine

    started = {}
    monkeypatch.setattr(actors, "_gpu_ids", lambda: [])
    monkeypatch.setattr(vllm_engine, "save_for_vllm", lambda model, tok, folder: folder)

    def start(folder, options, *, device, seed=0, name="", adapters=None):
        started.update(options, device=device)
        return {"": "engine"}

    monkeypatch.setattr(vllm_engine, "start_vllm_engines", start)
    cfg = build_config(
        "plan-path-tiny", overrides=["--model.engine", "vllm", "--model.device", "cuda"]
    )
    body = actors.EngineActorBody(cfg.model, 0)
    assert loads == ["cpu"]
    assert body.engine == "engine" and started["device"] == "cuda"
    assert started["enable_sleep_mode"] and started["gpu_memory_utilization"] == 0.4


def test_a_transformers_rollout_actor_loads_on_its_own_gpu_or_refuses(monkeypatch, loads):
    cfg = build_config("plan-path-tiny", overrides=["--model.device", "cuda"])
    monkeypatch.setattr(actors, "_gpu_ids", lambda: [])
    with pytest.raises(ValueError, match=r"given no GPU: set run\.ray_gpus_per_policy"):
        actors.EngineActorBody(cfg.model, 0)
    assert loads == []
    monkeypatch.setattr(actors, "_gpu_ids", lambda: [5])  # Ray shows the actor its GPU as 0
    with pytest.raises(Exception):  # noqa: B017 - no CUDA here: the engine cannot be built
        actors.EngineActorBody(cfg.model, 0)
    assert loads == ["cuda:0"]


@pytest.mark.parametrize(
    ("rank", "sharding", "staged"),
    [(0, "fsdp", "cpu"), (1, "fsdp", "meta")] + [(r, "replicate", "cuda:0") for r in (0, 1)],
)
def test_a_sharded_learner_rank_loads_on_the_cpu_and_shards_onto_its_gpu(
    monkeypatch, loads, rank, sharding, staged
):
    """An FSDP rank never holds the whole fp32 model on its GPU: rank 0 loads it on the CPU, the
    other ranks build it on the meta device (no weights: rank 0 sends them their shards), and
    ``fully_shard`` moves one unit at a time to ``body.device``; a replica loads on its own GPU."""
    cfg = build_config("plan-path-tiny", overrides=["--model.device", "cuda"])
    monkeypatch.setattr(actors, "_gpu_ids", lambda: [1])
    body = actors.LearnerActorBody(cfg.model, 0, None, 1, rank, 2, "h:1", sharding)
    assert loads == [staged]
    assert body.device == "cuda:0"


def test_a_ray_learner_rank_gives_its_cached_gpu_blocks_back_after_each_update(monkeypatch, loads):
    """A learner rank returns torch's cached blocks to the GPU after every update, before the
    colocated vLLM engine wakes on that GPU and asks for them (the Ray learners used to keep
    them: only benchmarks/gpu_check.py called ``torch.cuda.empty_cache``)."""
    import torch

    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))

    class RecordingLearner:
        def update(self, samples):
            calls.append("update")
            return {}

        def sft_update(self, samples, lr=None):
            calls.append("sft_update")
            raise RuntimeError("out of memory")  # a failed update frees its blocks too

    monkeypatch.setattr(actors, "_gpu_ids", lambda: [3])
    cfg = build_config("plan-path-tiny", overrides=["--model.device", "cuda"])
    body = actors.LearnerActorBody(cfg.model, 0, None, 1, 0, 1, "h:1")
    body.learner = RecordingLearner()
    body.update([], 1)
    with pytest.raises(RuntimeError, match="out of memory"):
        body.sft_update([], None, 1)
    assert calls == ["update", "empty_cache", "sft_update", "empty_cache"]
    calls.clear()
    monkeypatch.setattr(actors, "_gpu_ids", lambda: [])
    cpu = actors.LearnerActorBody(build_config("plan-path-tiny").model, 0, None, 1, 0, 1, "h:1")
    cpu.learner = RecordingLearner()
    cpu.update([], 1)
    assert calls == ["update"]  # no CUDA call off the GPU


def test_load_device():
    assert actors.load_device("cpu", []) == "cpu"
    assert actors.load_device("cuda", [2]) == "cuda:0"
    assert actors.load_device("cuda:1", [2], staging=True) == "cpu"
    with pytest.raises(ValueError, match="given no GPU"):
        actors.load_device("cuda", [])


def test_engine_processes_see_only_their_gpus():
    assert engine_gpus("cpu", 1, None) is None
    assert engine_gpus("cuda", 1, None) == "0"
    assert engine_gpus("cuda:1", 2, None) == "1,2"
    assert engine_gpus("cuda:1", 1, "4,6,7") == "6"  # indices count in the trainer's own list
    with pytest.raises(ValueError, match="engine_tp 2 needs GPUs"):
        engine_gpus("cuda:1", 2, "4,6")


def test_local_placements_split_the_engine_memory_and_sleep_only_on_a_gpu(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    vllm = ["--model.engine", "vllm", "--model.engine_memory", "0.5"]
    gpu = local_placements(
        build_config("plan-path-tiny", overrides=[*vllm, "--model.device", "cuda:1"]),
        ["planner", "tool"],
    )
    assert {p.engine_env["CUDA_VISIBLE_DEVICES"] for p in gpu.values()} == {"1"}
    assert {p.engine_memory for p in gpu.values()} == {0.25}
    assert all(p.engine_sleeps and p.learner_device == "cuda:1" for p in gpu.values())
    cpu = local_placements(build_config("plan-path-tiny", overrides=vllm), ["planner", "tool"])
    assert all(not p.engine_sleeps and not p.engine_env for p in cpu.values())


def test_a_vllm_engine_process_is_started_with_its_placements_gpus(monkeypatch):
    """``start_engine_process`` gives the engine's worker the placement's environment (its
    ``CUDA_VISIBLE_DEVICES``) and memory share; the worker applies it before it builds vLLM
    (tests/engines/test_engine_process.py)."""
    import mas_trainer.engines.process as process
    from mas_trainer.models import build_tiny_model
    from mas_trainer.policy import start_engine_process

    started = {}

    class Recorded:
        def __init__(self, build, *, env=None, label="", keep=None):
            started.update(env=env, label=label, options=build.args[1])

    monkeypatch.setattr(process, "EngineProcess", Recorded)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = build_config(
        "plan-path-tiny",
        overrides=["--model.engine", "vllm", "--model.device", "cuda:1", "--model.engine_tp", "2"],
    )
    placement = local_placements(cfg, ["planner", "tool"])["tool"]
    model, tok = build_tiny_model("tiny", seed=0)
    start_engine_process(cfg, "tool", model, tok, placement)
    assert started["label"] == "tool" and started["env"]["CUDA_VISIBLE_DEVICES"] == "1,2"
    assert started["options"]["gpu_memory_utilization"] == placement.engine_memory > 0


def test_a_policy_is_built_whole_and_never_changed_afterwards():
    """Issue 30 item 1: ``build_policies`` returns each policy complete (its own model, engine,
    learner on that model, placement), and a built policy refuses to be changed (an engine or a
    learner used to be attached to it later, by the engine module and the train loop)."""
    import dataclasses

    from mas_trainer.learner import Learner
    from mas_trainer.policy import build_policies

    cfg = build_config("plan-path-tiny", overrides=["--algo.policy_map", "per_role"])
    policies = build_policies(cfg, ["planner", "tool"], None)
    assert set(policies) == {"planner", "tool"}
    for name, pol in policies.items():
        assert pol.name == name and pol.engine is not None
        assert isinstance(pol.learner, Learner) and pol.learner.model is pol.model
        assert pol.placement.learner_device == "cpu"
        with pytest.raises(dataclasses.FrozenInstanceError):
            pol.engine = None  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            pol.learner = None  # type: ignore[misc]
    assert policies["planner"].model is not policies["tool"].model


# ---------------------------------------------------------------------------- dead workers


class _Died(Exception):
    """Stands in for ray.exceptions.RayActorError."""


class _Ref:
    def __init__(self, fn):
        self.fn = fn


class _Method:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args):
        return _Ref(lambda: self.fn(*args))


def _fake_ray(monkeypatch):
    ray = types.SimpleNamespace(
        exceptions=types.SimpleNamespace(RayActorError=_Died, GetTimeoutError=TimeoutError),
        get=lambda ref, timeout=None: [r.fn() for r in ref] if isinstance(ref, list) else ref.fn(),
    )
    monkeypatch.setattr(handles, "ray_module", lambda: ray)
    return ray


def test_the_restart_deadline_counts_from_the_death_not_from_the_call(monkeypatch):
    """A call that runs longer than the restart timeout before its actor dies is still retried
    on the restarted actor (the deadline used to be fixed before the call started)."""
    _fake_ray(monkeypatch)
    monkeypatch.setattr(handles, "RESTART_TIMEOUT_S", 0.3)
    calls = []

    def generate():
        calls.append(time.monotonic())
        if len(calls) == 1:
            time.sleep(0.5)  # a long generation, then the process dies
            raise _Died("killed")
        return "done"

    actor = types.SimpleNamespace(generate=_Method(generate), ping=_Method(lambda: True))
    restarted = []
    assert handles.call_with_restart(actor, "generate", on_restart=restarted.append) == "done"
    assert len(calls) == 2 and restarted == [actor]


def test_a_call_that_kills_its_actor_every_time_is_given_up(monkeypatch):
    _fake_ray(monkeypatch)

    def always_dies():
        raise _Died("segfault")

    actor = types.SimpleNamespace(step=_Method(always_dies), ping=_Method(lambda: True))
    with pytest.raises(RuntimeError, match="failed 4 times, its actor dying each time"):
        handles.call_with_restart(actor, "step")


def test_a_dead_learner_rank_stops_the_run_with_the_resume_command(monkeypatch, tmp_path, capsys):
    """A learner rank is not restarted (a fresh rank lost its optimizer state and cannot rejoin
    its group): the update raises LearnerRankDied naming the policy and rank, and ``train`` turns
    it into RunStopped with the command that resumes the run from its last checkpoint."""
    import mas_trainer.train as train_module
    from mas_trainer.cli import train_main

    _fake_ray(monkeypatch)

    def rank1_update(samples, steps):
        raise _Died("rank 1's process was killed")

    ok = types.SimpleNamespace(
        make_learner=_Method(lambda kw: None), update=_Method(lambda s, n: {"loss/policy": 0.0})
    )
    dead = types.SimpleNamespace(
        make_learner=_Method(lambda kw: None), update=_Method(rank1_update)
    )
    learner = handles.RemoteLearner([ok, dead], {"mini_batch_size": 2}, policy="planner")
    with pytest.raises(handles.LearnerRankDied, match="rank 1 of policy 'planner' died") as err:
        learner.update([types.SimpleNamespace(completion_ids=[1])] * 4)

    def dies(cfg, path, at_exit):
        (path / "checkpoints").mkdir(parents=True, exist_ok=True)
        (path / "checkpoints" / "latest").write_text("step-4")
        raise err.value

    monkeypatch.setattr(train_module, "_setup", dies)
    run = tmp_path / "run"
    args = ["plan-path-tiny", "--run.out_dir", str(tmp_path), "--run.name", "run"]
    with pytest.raises(train_module.RunStopped, match=f"mas-train --run.resume {run}$"):
        train_module.train(build_config("plan-path-tiny", overrides=args[1:]))
    assert train_main(args) == 1
    err = capsys.readouterr().err  # mas-train prints why it stopped and how to resume
    assert "rank 1 of policy 'planner' died" in err and f"mas-train --run.resume {run}\n" in err


# ---------------------------------------------------------------------------- checkpoints


def test_a_sharded_policys_checkpoint_is_written_by_its_ranks_not_the_driver(monkeypatch, tmp_path):
    """``save_checkpoint`` of a policy whose learner is a Ray actor group: every rank writes its
    own shards into the checkpoint's ``learner-<policy>/`` and nothing of the state reaches the
    driver (the old checkpoint pulled rank 0's whole state, ~393 GB per 8B policy, into it)."""
    from pathlib import Path

    from mas_trainer.outputs import RunDir
    from mas_trainer.policy import Policy, save_checkpoint

    _fake_ray(monkeypatch)
    saved = []

    def rank(r):
        def save(folder):
            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / f"shard-{r}").write_text("written by the rank")
            saved.append(r)

        def pulled():
            raise AssertionError(f"the driver asked rank {r} for its whole state")

        return types.SimpleNamespace(
            make_learner=_Method(lambda kw: None), save=_Method(save), state_dict=_Method(pulled)
        )

    learner = handles.RemoteLearner(
        [rank(0), rank(1)], {"mini_batch_size": 2}, sharded=True, policy="planner"
    )
    folder = types.SimpleNamespace(save_pretrained=lambda path: Path(path).mkdir(exist_ok=True))
    policy = Policy("planner", folder, None, learner, folder)  # type: ignore[arg-type]
    ckpt = save_checkpoint(RunDir(tmp_path, tensorboard=False), 4, {"planner": policy}, {})
    assert saved == [0, 1]
    assert sorted(f.name for f in (ckpt / "learner-planner").iterdir()) == ["shard-0", "shard-1"]
