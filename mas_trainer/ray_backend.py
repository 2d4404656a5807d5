"""The Ray backend (``mas-train --run.backend ray``): policies and env workers as Ray actors.

Layout (DESIGN.md section 4, the paper's system):

* **One resource pool per policy** (a Ray placement group): the policy's rollout actor
  (:class:`EngineActor`, a transformers or vLLM engine) and its ``run.ray_learners``
  data-parallel learner actors (:class:`LearnerActor`). ``run.ray_gpus_per_policy`` GPUs per pool;
  ``run.ray_colocate`` puts the engine and learner rank 0 in the same bundle (they time-share the
  GPU, vLLM sleeping during updates), otherwise the engine gets a bundle of its own (half the
  pool's GPUs).
* **Data-parallel learners** through ``torch.distributed`` (gloo on CPU, NCCL on GPU): each rank
  trains on its shard of the step's samples, and gradients are all-reduced (weighted by completion
  tokens, so the result is the token-mean of the whole mini-batch) before every optimizer step;
  every rank takes the same number of optimizer steps, so the replicas stay identical.
* **Env workers** (:class:`EnvWorker`): a pool of CPU actors that step the K clones of a turn
  (code execution runs there, not in the driver; a worker prefetches its share of the texts, so a
  code env runs them in one pooled sandbox call). :class:`RayTreeRollout` is the tree rollout
  with its branch stepping sent to the pool.

The driver runs the same loop as the single-process path (``mas_trainer/train.py``): every
policy is a ``Policy`` whose ``engine`` is a :class:`RemoteEngine` and whose ``model`` is a
:class:`RemoteModel` handle; ``extra["learner_factory"]`` makes a :class:`RemoteLearner`.

Fault tolerance: actors are created with ``max_restarts=-1``. When a rollout actor or an env
worker dies mid-call, the call is retried on the restarted actor; a restarted rollout actor first
reloads the latest synced weights (kept in Ray's object store). Both calls are pure given their
inputs (the engine call carries its seed; an env worker's prefetch only fills a cache), so a
retried step returns exactly what the first try would have: no sample is lost or counted twice.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mas_trainer.rollout import TreeRollout, _prefetch

__all__ = [
    "EngineActor",
    "EnvWorker",
    "LearnerActor",
    "RayTreeRollout",
    "RemoteEngine",
    "RemoteLearner",
    "RemoteModel",
    "build_policies",
]

INSTALL_HINT = "pip install 'mas-rl[ray]'"

#: Seconds to wait for a restarted actor before giving up.
RESTART_TIMEOUT_S = 120.0


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise ImportError(f"the ray backend needs ray ({e}); run: {INSTALL_HINT}") from e
    return ray


def _dead_actor_errors() -> tuple[type[BaseException], ...]:
    ray = _ray()
    errors: list[type[BaseException]] = [ray.exceptions.RayActorError]
    for name in ("ActorDiedError", "ActorUnavailableError"):
        if hasattr(ray.exceptions, name):
            errors.append(getattr(ray.exceptions, name))
    return tuple(errors)


def _call_with_restart(actor: Any, method: str, *args: Any, on_restart: Any = None) -> Any:
    """``actor.method(*args)``, retried on the restarted actor when the actor dies mid-call.

    Args:
        actor: A Ray actor handle created with ``max_restarts != 0``.
        method: The method name.
        *args: Its arguments (object refs are fine).
        on_restart: Called with the actor after a restart, before the retry (e.g. reload weights).
    """
    ray = _ray()
    dead = _dead_actor_errors()
    deadline = time.monotonic() + RESTART_TIMEOUT_S
    while True:
        try:
            return ray.get(getattr(actor, method).remote(*args))
        except dead as err:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"actor call {method} kept failing for {RESTART_TIMEOUT_S:.0f} s: {err}"
                ) from err
            _wait_alive(actor, deadline)
            if on_restart is not None:
                on_restart(actor)


def _wait_alive(actor: Any, deadline: float) -> None:
    ray = _ray()
    dead = _dead_actor_errors()
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=10)
            return
        except (*dead, ray.exceptions.GetTimeoutError):
            time.sleep(0.2)
    raise RuntimeError("a Ray actor did not come back after a restart")


# --------------------------------------------------------------------------------- actor bodies


class _ChaosMixin:
    """Fault injection for tests: ``crash_on_call(n)`` makes the n-th later call kill the process.

    The restarted actor starts clean (no armed crash), so the retried call succeeds.
    """

    _crash_at: int | None = None
    _calls: int = 0

    def crash_on_call(self, n: int = 1) -> None:
        self._crash_at = self._calls + n

    def _maybe_crash(self) -> None:
        self._calls += 1
        if self._crash_at is not None and self._calls >= self._crash_at:
            os._exit(1)  # a hard death, as an OOM kill or a segfault would be

    def ping(self) -> bool:
        return True


def _setup_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads or 1)


def _load(model_cfg: dict[str, Any], seed: int, path: str | None) -> tuple[Any, Any]:
    import torch

    from mas_trainer.models import load_model

    return load_model(
        path or model_cfg["name"],
        device=model_cfg["device"],
        dtype=getattr(torch, model_cfg["dtype"]),
        seed=seed,
    )


class EngineActorBody(_ChaosMixin):
    """The rollout actor of one policy: a transformers (or vLLM) engine with its own weights.

    Args:
        model_cfg: ``dataclasses.asdict`` of the run's ``model`` section.
        seed: The run seed (model init of ``tiny:`` models, engine seed).
        path: A checkpoint folder to load instead of ``model_cfg["name"]`` (resume).
        threads: torch CPU threads.
    """

    def __init__(
        self, model_cfg: dict[str, Any], seed: int, path: str | None = None, threads: int = 1
    ) -> None:
        _setup_threads(threads)
        self.model, self.tokenizer = _load(model_cfg, seed, path)
        if model_cfg.get("engine") == "vllm":
            import tempfile

            from mas_trainer.vllm_engine import VLLMEngine, build_llm, save_for_vllm, set_vllm_env

            set_vllm_env(model_cfg["device"])
            self._dir = tempfile.TemporaryDirectory(prefix="mas-ray-vllm-")
            llm = build_llm(
                save_for_vllm(self.model, self.tokenizer, self._dir.name),
                dtype=model_cfg["dtype"],
                seed=seed,
                gpu_memory_utilization=model_cfg["engine_memory"],
                max_num_seqs=model_cfg["engine_batch_size"],
                enable_sleep_mode=str(model_cfg["device"]).startswith("cuda"),
            )
            self.engine: Any = VLLMEngine(llm, self.tokenizer, seed=seed)
            self.model = None  # vLLM holds the weights
        else:
            from mas_trainer.engines import TransformersEngine

            self.engine = TransformersEngine(
                self.model, self.tokenizer, batch_size=model_cfg["engine_batch_size"]
            )

    def generate(self, prompts: list[list[int]], params: Any, seed: int | None) -> list[Any]:
        self._maybe_crash()
        return self.engine.generate(prompts, params, seed=seed)

    def load_weights(self, state_dict: Mapping[str, Any]) -> None:
        self.engine.load_weights(state_dict)

    def sleep(self) -> None:
        if hasattr(self.engine, "sleep"):
            self.engine.sleep()


class LearnerActorBody(_ChaosMixin):
    """One data-parallel learner rank of one policy (it holds a full replica of the model).

    Args:
        model_cfg: ``dataclasses.asdict`` of the run's ``model`` section.
        seed: The run seed (same init on every rank).
        path: A checkpoint folder to load (resume).
        threads: torch CPU threads.
        rank: This rank.
        world: Number of ranks.
        master: ``host:port`` of rank 0's rendezvous (ignored when ``world == 1``).
    """

    def __init__(
        self,
        model_cfg: dict[str, Any],
        seed: int,
        path: str | None,
        threads: int,
        rank: int,
        world: int,
        master: str,
    ) -> None:
        _setup_threads(threads)
        self.model, self.tokenizer = _load(model_cfg, seed, path)
        self.rank, self.world, self.master = rank, world, master
        self.learner: Any = None
        self._group_ready = False

    def init_group(self) -> None:
        """Join the policy's torch.distributed group (gloo on CPU, NCCL on CUDA)."""
        if self.world == 1 or self._group_ready:
            return
        import torch
        import torch.distributed as dist

        backend = "nccl" if next(self.model.parameters()).is_cuda else "gloo"
        dist.init_process_group(
            backend, init_method=f"tcp://{self.master}", rank=self.rank, world_size=self.world
        )
        self._group_ready = True
        # Replicas start identical, but make sure (a resumed rank could differ).
        with torch.no_grad():
            for p in self.model.parameters():
                dist.broadcast(p.data, src=0)

    def make_learner(self, kwargs: dict[str, Any]) -> None:
        from mas_trainer.learner import Learner

        cls = Learner if self.world == 1 else _dp_learner_class()
        self.learner = cls(self.model, **kwargs)

    def update(self, samples: list[Any], steps: int) -> dict[str, float]:
        self._maybe_crash()
        if self.world > 1:
            self.learner.dp_steps = steps
        return self.learner.update(samples)

    def sft_update(self, samples: list[Any], lr: float | None, steps: int) -> dict[str, float]:
        if self.world > 1:
            self.learner.dp_steps = steps
        return self.learner.sft_update(samples, lr=lr)

    def logprobs(self, samples: list[Any]) -> list[list[float]]:
        return self.learner.logprobs(samples)

    def state_dict(self) -> dict[str, Any]:
        return self.learner.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state)

    def weights(self) -> dict[str, Any]:
        """The model's tensors on the CPU (what the rollout actor loads)."""
        return {k: v.detach().to("cpu").clone() for k, v in self.model.state_dict().items()}

    def save_pretrained(self, folder: str) -> None:
        self.model.save_pretrained(folder)


def _dp_learner_class() -> type:
    """A :class:`Learner` whose optimizer steps all-reduce gradients across ranks."""
    import torch
    import torch.distributed as dist

    from mas_trainer.learner import Learner

    class DataParallelLearner(Learner):
        """Every rank takes exactly ``dp_steps`` optimizer steps per update; before each, the
        gradients are averaged with weights = each rank's completion tokens in the mini-batch, so
        the step follows the token-mean loss of the union of the ranks' mini-batches."""

        dp_steps: int = 1
        _samples: Sequence[Any] = ()
        _mini_tokens: int = 0

        def update(self, samples: Sequence[Any]) -> dict[str, float]:
            self._samples = samples
            return super().update(samples)

        def sft_update(self, samples: Sequence[Any], lr: float | None = None) -> dict[str, float]:
            self._samples = samples
            return super().sft_update(samples, lr=lr)

        def _mini_batches(self, *args: Any) -> Iterator[list[int]]:
            # The learner's own order (shuffled, a prompt's samples adjacent), cut into exactly
            # `dp_steps` mini-batches (the driver makes every shard hold >= dp_steps samples).
            order = [i for mini in super()._mini_batches(*args) for i in mini]
            n, steps = len(order), self.dp_steps
            for i in range(steps):
                mini = order[i * n // steps : (i + 1) * n // steps]
                self._mini_tokens = sum(len(self._samples[j].completion_ids) for j in mini)
                yield mini

        def _optimizer_step(self) -> float:
            tokens = torch.tensor([float(self._mini_tokens)], device=self.device)
            dist.all_reduce(tokens)
            share = self._mini_tokens / max(float(tokens.item()), 1.0)
            for p in self._params.values():
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                p.grad.mul_(share)
                dist.all_reduce(p.grad)
            return super()._optimizer_step()

    return DataParallelLearner


class EnvWorkerBody(_ChaosMixin):
    """An env worker: steps clones of a pickled env, one per text, and returns them."""

    def step_branches(
        self, env_bytes: bytes, texts: list[str], prefetch: bool = True
    ) -> list[bytes]:
        """Step one clone of the env per text; the pickled clones, in text order.

        With ``prefetch`` and several texts, the env's ``prefetch(texts, agent)`` (when its class
        has one: the code-running envs) first runs their programs in one pooled sandbox call, so
        the steps only read the cache the clones share, as :class:`TreeRollout` does in the driver.
        """
        env = pickle.loads(env_bytes)
        if prefetch and len(texts) > 1:
            _prefetch(env, texts, env.agent_selection)
        # A crash armed by a test lands after the prefetch: a retried call (on a fresh process,
        # with the driver's env again) must redo it and give the same clones.
        self._maybe_crash()
        out = []
        for i, text in enumerate(texts):
            branch = env if i == len(texts) - 1 else env.clone()
            branch.step(text)
            out.append(pickle.dumps(branch))
        return out


def _remote(cls: type, **options: Any) -> Any:
    return _ray().remote(max_restarts=-1, max_task_retries=0, **options)(cls)


# Actor classes are made lazily (importing this module must not need ray).
EngineActor = EngineActorBody
LearnerActor = LearnerActorBody
EnvWorker = EnvWorkerBody


# ----------------------------------------------------------------------------- driver handles


class WeightsRef(Mapping[str, Any]):
    """A policy's weights in Ray's object store; a Mapping only so it fits ``load_weights``."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def _get(self) -> dict[str, Any]:
        return _ray().get(self.ref)

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


class RemoteModel:
    """What ``Policy.model`` holds on the Ray backend: a handle on the learner replicas.

    ``state_dict()`` returns a :class:`WeightsRef` (rank 0's tensors, kept in the object store, so
    the rollout actor reads them without a copy through the driver); ``save_pretrained(folder)``
    writes rank 0's model (the folder must be reachable from that node: a shared filesystem on a
    multi-node cluster).
    """

    def __init__(self, learners: list[Any]) -> None:
        self.learners = learners

    def state_dict(self) -> WeightsRef:
        return WeightsRef(self.learners[0].weights.remote())

    def save_pretrained(self, folder: Any, **kwargs: Any) -> None:
        _ray().get(self.learners[0].save_pretrained.remote(str(folder)))


class RemoteLearner:
    """The :class:`~mas_trainer.learner.Learner` API over a policy's learner actors."""

    def __init__(
        self, learners: list[Any], kwargs: dict[str, Any], sleeping_engine: Any = None
    ) -> None:
        ray = _ray()
        self.learners = learners
        # A colocated vLLM rollout actor to put to sleep before each update (GPU memory).
        self.sleeping_engine = sleeping_engine
        self.mini_batch_size = int(kwargs["mini_batch_size"])
        ray.get([a.make_learner.remote(kwargs) for a in learners])

    def _shards(self, samples: Sequence[Any]) -> tuple[list[list[Any]], int]:
        """Contiguous, near-equal shards (one per rank) and the optimizer steps every rank takes."""
        world = len(self.learners)
        n = len(samples)
        if n < world:
            raise ValueError(
                f"{n} samples cannot feed {world} data-parallel learners; lower run.ray_learners"
            )
        shards = [list(samples[r * n // world : (r + 1) * n // world]) for r in range(world)]
        steps = -(-n // self.mini_batch_size)
        return shards, max(1, min(steps, min(len(s) for s in shards)))

    def update(self, samples: Sequence[Any]) -> dict[str, float]:
        ray = _ray()
        if self.sleeping_engine is not None:
            ray.get(self.sleeping_engine.sleep.remote())
        shards, steps = self._shards(samples)
        out = ray.get(
            [a.update.remote(s, steps) for a, s in zip(self.learners, shards, strict=True)]
        )
        return _mean_metrics(out, [len(s) for s in shards])

    def sft_update(self, samples: Sequence[Any], lr: float | None = None) -> dict[str, float]:
        ray = _ray()
        shards, steps = self._shards(samples)
        out = ray.get(
            [a.sft_update.remote(s, lr, steps) for a, s in zip(self.learners, shards, strict=True)]
        )
        return _mean_metrics(out, [len(s) for s in shards])

    def logprobs(self, samples: Sequence[Any]) -> list[list[float]]:
        return _ray().get(self.learners[0].logprobs.remote(list(samples)))

    def state_dict(self) -> dict[str, Any]:
        return _ray().get(self.learners[0].state_dict.remote())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _ray().get([a.load_state_dict.remote(state) for a in self.learners])


def _mean_metrics(per_rank: list[dict[str, float]], weights: list[int]) -> dict[str, float]:
    """Sample-weighted mean of each metric over the ranks (rank 0's value where one lacks it)."""
    if len(per_rank) == 1:
        return per_rank[0]
    total = float(sum(weights))
    out = {}
    for key in per_rank[0]:
        if all(key in m for m in per_rank):
            out[key] = sum(m[key] * w for m, w in zip(per_rank, weights, strict=True)) / total
        else:
            out[key] = per_rank[0][key]
    return out


class RemoteEngine:
    """The :class:`~mas_trainer.engines.Engine` protocol over a policy's rollout actor.

    Attributes:
        model: None (the actor holds its own weights: the train loop syncs them after updates).
        is_remote: True (``attach_vllm_engines`` leaves remote engines alone).
    """

    model = None
    is_remote = True

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self._weights: Any = None  # the latest synced weights (an object ref), for restarts
        self.restarts = 0

    def _reload(self, actor: Any) -> None:
        self.restarts += 1
        if self._weights is not None:
            _ray().get(actor.load_weights.remote(self._weights))

    def generate(self, prompts: list[list[int]], params: Any, seed: int | None = None) -> list[Any]:
        return _call_with_restart(
            self.actor, "generate", prompts, params, seed, on_restart=self._reload
        )

    def load_weights(self, state_dict: Mapping[str, Any]) -> None:
        ref = state_dict.ref if isinstance(state_dict, WeightsRef) else _ray().put(dict(state_dict))
        self._weights = ref
        _call_with_restart(self.actor, "load_weights", ref, on_restart=self._reload)


class EnvWorkerPool:
    """Round-robin over env-worker actors; a call whose worker died is retried on it."""

    def __init__(self, workers: list[Any]) -> None:
        self.workers = workers
        self._next = 0
        self.restarts = 0

    def step_branches(self, env: Any, texts: list[str], prefetch: bool = True) -> list[Any]:
        """Step one clone of ``env`` per text, split across the workers; clones in text order.

        Args:
            env: The env (pickled once, unpickled by each worker).
            texts: One text per clone.
            prefetch: Let each worker hand its share of the texts to the env's ``prefetch``
                before stepping them (see :meth:`EnvWorkerBody.step_branches`).
        """
        ray = _ray()
        env_ref = ray.put(pickle.dumps(env))
        n = len(self.workers)
        chunks = [texts[i::n] for i in range(n)]
        jobs = []
        for i, chunk in enumerate(chunks):
            if chunk:
                worker = self.workers[(self._next + i) % n]
                jobs.append((i, worker, chunk))
        self._next = (self._next + len(jobs)) % n
        futures = [w.step_branches.remote(env_ref, c, prefetch) for _, w, c in jobs]
        results: dict[int, list[bytes]] = {}
        for (i, worker, chunk), fut in zip(jobs, futures, strict=True):
            try:
                results[i] = ray.get(fut)
            except _dead_actor_errors():
                self.restarts += 1
                results[i] = _call_with_restart(worker, "step_branches", env_ref, chunk, prefetch)
        out: list[Any] = [None] * len(texts)
        for i, blobs in results.items():
            for j, blob in enumerate(blobs):
                out[i + j * n] = pickle.loads(blob)
        return out


class RayTreeRollout(TreeRollout):
    """:class:`~mas_trainer.rollout.TreeRollout` with branch stepping on an env-worker pool.

    ``prefetch`` (a :class:`TreeRollout` argument, ``rollout.prefetch``) reaches the workers: each
    hands its share of a state's texts to the env's ``prefetch`` before stepping them, so the
    programs of code envs run pooled on the worker, not in the driver. Parallel mode, whose steps
    are one text each, prefetches nothing with a pool: its pooled prefetch of a task's episodes
    would run in the driver, and a cache kept per process (Code-v0's) would not reach the workers,
    so they would run every program again.

    Args:
        *args: As :class:`TreeRollout`.
        env_pool: The pool (None steps in the driver, as the base class does).
        **kwargs: As :class:`TreeRollout`.
    """

    def __init__(self, *args: Any, env_pool: EnvWorkerPool | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.env_pool = env_pool

    def _step_branches(self, env: Any, texts: list[str]) -> list[Any]:
        if self.env_pool is None:
            return super()._step_branches(env, texts)
        return self.env_pool.step_branches(env, texts, prefetch=self.prefetch)

    def _prefetch_lanes(self, items: Sequence[Any], texts: list[str]) -> None:
        if self.env_pool is None:
            super()._prefetch_lanes(items, texts)


# ------------------------------------------------------------------------------------- builder


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _tokenizer(cfg: Any, load_from: Any, name: str) -> Any:
    """The policies' tokenizer, loaded in the driver without loading a model."""
    from mas_trainer.models import build_byte_tokenizer

    source = str(load_from / name) if load_from else cfg.model.name
    if source.startswith("tiny:"):
        return build_byte_tokenizer()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(source)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def build_policies(cfg: Any, names: list[str], load_from: Any) -> tuple[dict[str, Any], Any, Any]:
    """Start the Ray actors of every policy, for ``train``.

    Args:
        cfg: The run config (``run.backend == "ray"``; ``run.ray_*`` fields size the pools).
        names: Policy names.
        load_from: A checkpoint folder to resume from (per-policy subfolders), or None.

    Returns:
        ``name -> Policy`` (``engine``: :class:`RemoteEngine`, ``model``: :class:`RemoteModel`,
        ``extra["learner_factory"]``), the tokenizer, and the rollout class to use
        (:class:`RayTreeRollout` bound to the env-worker pool).
    """
    import dataclasses
    import functools

    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from mas_trainer.train import Policy

    ray = _ray()
    if cfg.algo.policy_map == "per_role_lora":
        raise ValueError(
            "run.backend=ray supports algo.policy_map shared and per_role; per_role_lora "
            "(one base shared by the roles' adapters) runs on run.backend=local"
        )
    if not ray.is_initialized():
        ray.init(address=cfg.run.ray_address or None, log_to_driver=False)
    model_cfg = dataclasses.asdict(cfg.model)
    threads = cfg.run.threads or 1
    world = cfg.run.ray_learners
    gpus = cfg.run.ray_gpus_per_policy
    cpu = 0.25  # actors mostly wait on each other; a small CPU claim keeps small clusters usable
    tokenizer = _tokenizer(cfg, load_from, names[0])
    policies: dict[str, Any] = {}
    for name in names:
        path = str(load_from / name) if load_from else None
        # One pool per policy: `world` learner bundles (+ one engine bundle when split).
        learner_gpu = gpus / world if cfg.run.ray_colocate else gpus / 2 / world
        bundles = [{"CPU": 2 * cpu, "GPU": learner_gpu} for _ in range(world)]
        if not cfg.run.ray_colocate:
            bundles.append({"CPU": cpu, "GPU": gpus / 2})
        bundles = [{k: v for k, v in b.items() if v > 0} for b in bundles]
        pg = placement_group(bundles, strategy="PACK")
        ray.get(pg.ready())

        def where(bundle: int, pg: Any = pg) -> Any:
            return PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=bundle
            )

        # Colocated: engine and learner rank 0 share bundle 0 (half its GPU each, time-shared).
        share = 0.5 if cfg.run.ray_colocate else 1.0
        engine_bundle = 0 if cfg.run.ray_colocate else world
        engine_gpu = (learner_gpu if cfg.run.ray_colocate else gpus / 2) * share
        engine_actor = _remote(
            EngineActorBody,
            num_cpus=cpu,
            num_gpus=engine_gpu,
            scheduling_strategy=where(engine_bundle),
        ).remote(model_cfg, cfg.run.seed, path, threads)
        master = f"{ray.util.get_node_ip_address()}:{_free_port()}"
        learners = [
            _remote(
                LearnerActorBody,
                num_cpus=cpu,
                num_gpus=learner_gpu * (share if r == 0 else 1.0),
                scheduling_strategy=where(r),
            ).remote(model_cfg, cfg.run.seed, path, threads, r, world, master)
            for r in range(world)
        ]
        ray.get([a.init_group.remote() for a in learners])

        sleeper = engine_actor if cfg.run.ray_colocate and gpus > 0 else None

        def factory(
            _model: Any, learners: list[Any] = learners, sleeper: Any = sleeper, **kwargs: Any
        ) -> RemoteLearner:
            return RemoteLearner(learners, kwargs, sleeping_engine=sleeper)

        policies[name] = Policy(
            name,
            RemoteModel(learners),
            RemoteEngine(engine_actor),
            extra={"learner_factory": factory, "placement_group": pg},
        )
    pool = None
    if cfg.run.ray_env_workers:
        pool = EnvWorkerPool(
            [_remote(EnvWorkerBody, num_cpus=cpu).remote() for _ in range(cfg.run.ray_env_workers)]
        )
    for pol in policies.values():
        pol.extra["env_pool"] = pool
    return policies, tokenizer, functools.partial(RayTreeRollout, env_pool=pool)
