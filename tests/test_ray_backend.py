"""The Ray backend on a local Ray cluster (marker ``ray``): same run as the single process,
data-parallel learners, and actors that die mid-step."""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="needs ray: pip install 'mas-rl[ray]'")

from mas_trainer.config import build_config  # noqa: E402
from mas_trainer.engines import SamplingParams  # noqa: E402

TINY_RUN = [
    "--optim.warmstart_steps", "10",
    "--optim.warmstart_episodes", "32",
    "--optim.steps", "2",
    "--optim.mini_batch_size", "32",
    "--rollout.tasks_per_step", "3",
    "--eval.episodes", "4",
    "--run.threads", "1",
    "--run.progress", "false",
    "--run.log_transcripts", "0",
]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def cluster():
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _records(run_dir) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _rl(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("phase") == "rl"]


def test_ray_run_matches_single_process_run(tmp_path):
    """Same seed: the same samples (rollout metrics equal) and the same losses."""
    from mas_trainer.train import train

    local = build_config(overrides=[*TINY_RUN, "--run.out_dir", str(tmp_path), "--run.name", "a"])
    remote = build_config(
        overrides=[
            *TINY_RUN, "--run.out_dir", str(tmp_path), "--run.name", "b",
            "--run.backend", "ray", "--run.ray_env_workers", "2",
        ]
    )  # fmt: skip
    sa, sb = train(local), train(remote)
    assert sa["success_warmstart"] == sb["success_warmstart"]
    ra, rb = _rl(_records(tmp_path / "a")), _rl(_records(tmp_path / "b"))
    assert len(ra) == len(rb) == 2
    for a, b in zip(ra, rb, strict=True):
        for key in a:
            if key.startswith(("rollout/", "algo/")) and key != "rollout/other_share":
                assert a[key] == b[key], key
        assert b["loss/policy"] == pytest.approx(a["loss/policy"], abs=1e-5)
        assert b["perf/logprob_mismatch"] < 1e-5  # the rollout actor got the synced weights
    assert (tmp_path / "b" / "summary.json").is_file()


def _rollout(engines, env_pool=None, crash_engine_after=None):
    from mas_trainer.models import build_byte_tokenizer
    from mas_trainer.ray_backend import RayTreeRollout

    cfg = build_config()
    import mas_envs

    def make_env():
        return mas_envs.make(cfg.env.id, split="train", max_turns=2, **cfg.env.options)

    return RayTreeRollout(
        make_env,
        engines,
        build_byte_tokenizer(),
        {a: "shared" for a in make_env().possible_agents},
        k=3,
        params=SamplingParams(temperature=1.0, max_tokens=12),
        seed=7,
        env_pool=env_pool,
    )


def _samples_key(result) -> list[tuple]:
    return [
        (s.group, s.role, tuple(s.prompt_ids), tuple(s.completion_ids), s.reward)
        for s in result.samples
    ]


def test_dead_env_worker_and_rollout_actor_are_restarted_and_the_step_retried():
    from mas_trainer.ray_backend import (
        EngineActorBody,
        EnvWorkerBody,
        EnvWorkerPool,
        RemoteEngine,
        _remote,
    )

    cfg = build_config(overrides=["--run.threads", "1"])
    import dataclasses

    model_cfg = dataclasses.asdict(cfg.model)
    actor = _remote(EngineActorBody, num_cpus=0.25).remote(model_cfg, 0, None, 1)
    workers = [_remote(EnvWorkerBody, num_cpus=0.25).remote() for _ in range(2)]
    engine, pool = RemoteEngine(actor), EnvWorkerPool(workers)
    # Sync other weights first: a restarted actor must come back with them, not its init.
    from mas_trainer.models import build_tiny_model

    model, _ = build_tiny_model("tiny", seed=1)
    engine.load_weights(model.state_dict())
    tasks = [0, 1]
    clean = _rollout({"shared": engine}, pool).run(tasks, uid_prefix="s/")

    ray.get(actor.crash_on_call.remote(2))  # dies inside the 2nd generate call of the step
    ray.get(workers[1].crash_on_call.remote(3))  # dies inside its 3rd env step
    faulty = _rollout({"shared": engine}, pool).run(tasks, uid_prefix="s/")
    assert engine.restarts == 1 and pool.restarts == 1
    assert _samples_key(faulty) == _samples_key(clean)  # nothing lost, nothing twice
    assert [e.success for e in faulty.episodes] == [e.success for e in clean.episodes]
    # And the env pool steps exactly as the driver would.
    local = _rollout({"shared": engine}).run(tasks, uid_prefix="s/")
    assert _samples_key(local) == _samples_key(clean)


def test_data_parallel_learners_match_one_learner(tmp_path):
    """Two gloo ranks, one optimizer step over all samples == one learner on all samples."""
    import dataclasses

    import torch

    from mas_trainer.learner import Learner
    from mas_trainer.models import build_tiny_model, chat_prompt_ids
    from mas_trainer.ray_backend import (
        LearnerActorBody,
        RemoteLearner,
        RemoteModel,
        _free_port,
        _remote,
    )
    from mas_trainer.samples import TrainSample

    cfg = build_config()
    model_cfg = dataclasses.asdict(cfg.model)
    master = f"127.0.0.1:{_free_port()}"
    ranks = [
        _remote(LearnerActorBody, num_cpus=0.25).remote(model_cfg, 0, None, 1, r, 2, master)
        for r in range(2)
    ]
    ray.get([a.init_group.remote() for a in ranks])
    model, tok = build_tiny_model("tiny", seed=0)
    kwargs = dict(lr=1e-2, mini_batch_size=8, pad_token_id=tok.pad_token_id)
    remote = RemoteLearner(ranks, kwargs)
    local = Learner(model, **kwargs)
    gen = torch.Generator().manual_seed(0)
    samples = []
    for i in range(8):
        prompt = chat_prompt_ids(tok, [{"role": "user", "content": f"task {i}"}])
        completion = torch.randint(0, 256, (3 + i % 4,), generator=gen).tolist()
        samples.append(
            TrainSample(
                prompt, completion, [-5.5] * len(completion), reward=0.0, advantage=(-1.0) ** i
            )
        )
    m_local, m_remote = local.update(samples), remote.update(samples)
    assert m_remote["optim/grad_norm"] == pytest.approx(m_local["optim/grad_norm"], rel=1e-4)
    w0, w1 = ray.get([a.weights.remote() for a in ranks])
    init, _ = build_tiny_model("tiny", seed=0)
    for name, p in model.state_dict().items():
        assert torch.equal(w0[name], w1[name]), name  # the replicas stay identical
        # AdamW's first step is ~lr * sign(grad): where a gradient entry is ~0, summation order
        # may flip its sign, so compare elementwise with a tolerance of a few such entries.
        moved = (p - init.state_dict()[name]).abs()
        off = (w0[name] - p).abs()
        assert float(moved.max()) > 5e-3, name  # the step moved every tensor by ~lr
        assert float(off.max()) < 1e-2 * float(moved.max()), name
        assert float((off > 1e-5).float().mean()) < 1e-3, name
    rm = RemoteModel(ranks)
    assert set(rm.state_dict()) == set(model.state_dict())
