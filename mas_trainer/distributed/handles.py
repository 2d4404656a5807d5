"""What the driver holds on the Ray backend: handles on a policy's actors and on the env workers.

* :class:`RemoteEngine`: the :class:`~mas_trainer.engines.Engine` protocol over a rollout actor;
* :class:`RemoteLearner` and :class:`RemoteModel`: the learner API and the model handle over a
  policy's learner ranks (``Policy.learner`` and ``Policy.model``);
* :class:`EnvWorkerPool` and :class:`RayTreeRollout`: branch stepping on env-worker actors;
* :func:`call_with_restart`: an actor call retried on the restarted actor when the actor dies
  (rollout actors and env workers: their calls are pure given their inputs);
* :class:`LearnerRankDied`: a learner rank died. Learner ranks are not restarted: a fresh rank
  would have lost its optimizer state and could not rejoin its group's collectives, so the run
  stops and says how to resume from its last complete checkpoint.

Importing this module does not need ray; using a handle does (:func:`ray_module`).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mas_envs.optional import require
from mas_trainer.rollout import TreeRollout

__all__ = [
    "EnvWorkerPool",
    "LearnerRankDied",
    "RayTreeRollout",
    "RemoteEngine",
    "RemoteLearner",
    "RemoteModel",
    "WeightsRef",
    "call_with_restart",
    "ray_module",
    "remote_class",
    "shard_samples",
]

#: Seconds a restarted actor gets to come back and answer, counted from the death.
RESTART_TIMEOUT_S = 120.0

#: Restarts one call may go through before it is given up (a call that kills its actor every
#: time is a bug to show, not to retry forever).
MAX_RESTARTS_PER_CALL = 3


class LearnerRankDied(RuntimeError):
    """A learner rank's process died: the policy's learner state is gone from that rank.

    Attributes:
        policy: The policy the rank belongs to.
        rank: The rank.
    """

    def __init__(self, policy: str, rank: int, cause: BaseException) -> None:
        self.policy, self.rank = policy, rank
        super().__init__(f"learner rank {rank} of policy {policy!r} died: {cause}")


def ray_module() -> Any:
    """``import ray``, or an ImportError that names the install command."""
    return require("ray", purpose="the ray backend (run.backend=ray)")


def remote_class(cls: type, *, restart: bool = True, **options: Any) -> Any:
    """``cls`` as a Ray actor class (options: resources, scheduling) that Ray restarts when its
    process dies (``restart``), or leaves dead (learner ranks: :class:`LearnerRankDied`)."""
    restarts = -1 if restart else 0
    return ray_module().remote(max_restarts=restarts, max_task_retries=0, **options)(cls)


def _dead_actor_errors() -> tuple[type[BaseException], ...]:
    ray = ray_module()
    errors: list[type[BaseException]] = [ray.exceptions.RayActorError]
    for name in ("ActorDiedError", "ActorUnavailableError"):
        if hasattr(ray.exceptions, name):
            errors.append(getattr(ray.exceptions, name))
    return tuple(errors)


def call_with_restart(actor: Any, method: str, *args: Any, on_restart: Any = None) -> Any:
    """``actor.method(*args)``, retried on the restarted actor when the actor dies mid-call.

    Each death gives the restarted actor :data:`RESTART_TIMEOUT_S` from that moment to answer a
    ping (a call may run for longer than that before its actor dies: a long generation), and one
    call is retried after at most :data:`MAX_RESTARTS_PER_CALL` deaths.

    Args:
        actor: A Ray actor handle created with ``max_restarts != 0``.
        method: The method name.
        *args: Its arguments (object refs are fine).
        on_restart: Called with the actor after a restart, before the retry (e.g. reload weights).

    Raises:
        RuntimeError: The actor did not come back in time, or died on every try.
    """
    ray = ray_module()
    dead = _dead_actor_errors()
    deaths = 0
    while True:
        try:
            return ray.get(getattr(actor, method).remote(*args))
        except dead as err:
            deaths += 1
            if deaths > MAX_RESTARTS_PER_CALL:
                raise RuntimeError(
                    f"actor call {method} failed {deaths} times, its actor dying each time: {err}"
                ) from err
            _wait_alive(actor, time.monotonic() + RESTART_TIMEOUT_S)
            if on_restart is not None:
                on_restart(actor)


def _wait_alive(actor: Any, deadline: float) -> None:
    ray = ray_module()
    dead = _dead_actor_errors()
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=10)
            return
        except (*dead, ray.exceptions.GetTimeoutError):
            time.sleep(0.2)
    raise RuntimeError(
        f"a Ray actor did not come back within {RESTART_TIMEOUT_S:.0f} s of its restart"
    )


class WeightsRef(Mapping[str, Any]):
    """A policy's weights in Ray's object store; a Mapping only so it fits ``load_weights``."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def _get(self) -> dict[str, Any]:
        return ray_module().get(self.ref)

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


class RemoteModel:
    """What ``Policy.model`` holds on the Ray backend: a handle on the learner ranks.

    ``engine_weights(dtype)`` / ``state_dict()`` return a :class:`WeightsRef` (rank 0's tensors,
    kept in the object store, so the rollout actor reads them without a copy through the driver;
    sharded ranks all take part in gathering them); ``save_pretrained(folder)`` writes rank 0's
    model (the folder must be reachable from that node: a shared filesystem on a multi-node
    cluster).

    Args:
        learners: The policy's learner actors, rank 0 first.
        sharded: The ranks hold FSDP shards (every call goes to every rank: it is a collective).
    """

    def __init__(self, learners: list[Any], sharded: bool = False) -> None:
        self.learners = learners
        self.sharded = sharded

    def _ranks(self) -> list[Any]:
        return self.learners if self.sharded else self.learners[:1]

    def engine_weights(self, dtype: str | None = None) -> WeightsRef:
        """The weights cast to ``dtype`` on the learner ranks (bf16 copies for the engine)."""
        refs = [a.weights.remote(dtype) for a in self._ranks()]
        return WeightsRef(refs[0])

    def state_dict(self) -> WeightsRef:
        return self.engine_weights(None)

    def save_pretrained(self, folder: Any, **kwargs: Any) -> None:
        ray_module().get([a.save_pretrained.remote(str(folder)) for a in self._ranks()])


def shard_samples(
    samples: Sequence[Any], world: int, mini_batch_size: int
) -> tuple[list[list[Any]], int]:
    """Contiguous, near-equal shards of a step's samples (one per rank) and the optimizer steps
    every rank takes (``ceil(n / mini_batch_size)``, at most the smallest shard's size)."""
    n = len(samples)
    if n < world:
        raise ValueError(f"{n} samples cannot feed {world} learner ranks; lower run.ray_learners")
    shards = [list(samples[r * n // world : (r + 1) * n // world]) for r in range(world)]
    steps = -(-n // mini_batch_size)
    return shards, max(1, min(steps, min(len(s) for s in shards)))


class RemoteLearner:
    """The :class:`~mas_trainer.learner.Learner` API over a policy's learner actors.

    Args:
        learners: The policy's learner actors, rank 0 first.
        kwargs: The learner's arguments (as :class:`~mas_trainer.learner.Learner`'s).
        sleeping_engine: A colocated vLLM rollout actor to put to sleep before each update.
        sharded: The ranks hold FSDP shards: scoring and state calls go to every rank.
        policy: The policy's name (in :class:`LearnerRankDied`).

    Raises:
        LearnerRankDied: From any call during which a rank's process died.
    """

    def __init__(
        self,
        learners: list[Any],
        kwargs: dict[str, Any],
        sleeping_engine: Any = None,
        sharded: bool = False,
        policy: str = "shared",
    ) -> None:
        self.policy = policy
        self.learners = learners
        self.sharded = sharded
        # A colocated vLLM rollout actor to put to sleep before each update (GPU memory).
        self.sleeping_engine = sleeping_engine
        self.mini_batch_size = int(kwargs["mini_batch_size"])
        self._get([a.make_learner.remote(kwargs) for a in learners])

    def _get(self, refs: list[Any]) -> list[Any]:
        """The results of one call per rank (``refs[r]`` is rank r's), or :class:`LearnerRankDied`
        for the first rank whose process died (the others' calls are left to fail or finish)."""
        ray = ray_module()
        dead = _dead_actor_errors()
        out = []
        for rank, ref in enumerate(refs):
            try:
                out.append(ray.get(ref))
            except dead as err:
                raise LearnerRankDied(self.policy, rank, err) from err
        return out

    def _shards(self, samples: Sequence[Any]) -> tuple[list[list[Any]], int]:
        return shard_samples(samples, len(self.learners), self.mini_batch_size)

    def _ranks(self) -> list[Any]:
        return self.learners if self.sharded else self.learners[:1]

    def update(self, samples: Sequence[Any]) -> dict[str, float]:
        ray = ray_module()
        if self.sleeping_engine is not None:
            ray.get(self.sleeping_engine.sleep.remote())
        shards, steps = self._shards(samples)
        out = self._get(
            [a.update.remote(s, steps) for a, s in zip(self.learners, shards, strict=True)]
        )
        return _mean_metrics(out, shards)

    def sft_update(self, samples: Sequence[Any], lr: float | None = None) -> dict[str, float]:
        shards, steps = self._shards(samples)
        out = self._get(
            [a.sft_update.remote(s, lr, steps) for a, s in zip(self.learners, shards, strict=True)]
        )
        return _mean_metrics(out, shards)

    def logprobs(self, samples: Sequence[Any]) -> list[list[float]]:
        return self._get([a.logprobs.remote(list(samples)) for a in self._ranks()])[0]

    def save(self, folder: Any) -> None:
        """Every rank writes its own shards into ``folder`` (:meth:`Learner.save`); nothing
        passes through the driver. The folder must be reachable from every learner's node (a
        shared filesystem on a multi-node cluster)."""
        self._get([a.save.remote(str(folder)) for a in self.learners])

    def load(
        self, folder: Any, *, lr: float | None = None, weight_decay: float | None = None
    ) -> None:
        """Every rank reads its own shards from ``folder`` (:meth:`Learner.load`)."""
        self._get([a.load.remote(str(folder), lr, weight_decay) for a in self.learners])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._get([a.load_state_dict.remote(state) for a in self.learners])

    def reset_reference(self) -> None:
        self._get([a.reset_reference.remote() for a in self.learners])


_SAMPLE_MEANS = ("algo/advantage_abs_mean",)
"""Learner metrics that are means over samples (the others are means over tokens, or equal on
every rank)."""


def _mean_metrics(per_rank: list[dict[str, float]], shards: list[list[Any]]) -> dict[str, float]:
    """Each metric over the ranks, as one learner on all of ``shards`` logs it: token-weighted
    (a rank's losses, log-prob mismatch and entropy are token means over its shard),
    sample-weighted for :data:`_SAMPLE_MEANS`; rank 0's value where one rank lacks it. The
    supervised losses come back the same from every rank (the ranks combine them).
    """
    if len(per_rank) == 1:
        return per_rank[0]
    tokens = [sum(len(s.completion_ids) for s in shard) for shard in shards]
    samples = [len(shard) for shard in shards]
    out = {}
    for key in per_rank[0]:
        if all(key in m for m in per_rank):
            weights = samples if key in _SAMPLE_MEANS else tokens
            total = max(sum(weights), 1)
            out[key] = sum(m[key] * w for m, w in zip(per_rank, weights, strict=True)) / total
        else:
            out[key] = per_rank[0][key]
    return out


class RemoteEngine:
    """The :class:`~mas_trainer.engines.Engine` protocol over a policy's rollout actor.

    Attributes:
        model: None (the actor holds its own weights: the train loop syncs them after updates).
    """

    model = None

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self._weights: Any = None  # the latest synced weights (an object ref), for restarts
        self.restarts = 0

    def _reload(self, actor: Any) -> None:
        self.restarts += 1
        if self._weights is not None:
            ray_module().get(actor.load_weights.remote(self._weights))

    def generate(self, prompts: list[list[int]], params: Any, seed: int | None = None) -> list[Any]:
        return call_with_restart(
            self.actor, "generate", prompts, params, seed, on_restart=self._reload
        )

    def load_weights(self, state_dict: Mapping[str, Any]) -> None:
        ref = (
            state_dict.ref
            if isinstance(state_dict, WeightsRef)
            else ray_module().put(dict(state_dict))
        )
        self._weights = ref
        call_with_restart(self.actor, "load_weights", ref, on_restart=self._reload)


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
        ray = ray_module()
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
                results[i] = call_with_restart(worker, "step_branches", env_ref, chunk, prefetch)
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

    def step_branches(self, env: Any, texts: list[str]) -> list[Any]:
        if self.env_pool is None:
            return super().step_branches(env, texts)
        return self.env_pool.step_branches(env, texts, prefetch=self.prefetch)

    def prefetch_lanes(self, items: Sequence[Any], texts: list[str]) -> None:
        if self.env_pool is None:
            super().prefetch_lanes(items, texts)
