"""Starting a run's Ray actors: one resource pool per policy, and the env-worker pool.

:func:`build_ray_policies` is what ``train`` calls on ``run.backend=ray`` instead of
:func:`mas_trainer.policy.build_policies`; the layout it builds is described in
:mod:`mas_trainer.distributed`.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mas_trainer.config import TrainConfig
from mas_trainer.distributed.actors import EngineActorBody, EnvWorkerBody, LearnerActorBody
from mas_trainer.distributed.handles import (
    EnvWorkerPool,
    RayTreeRollout,
    RemoteEngine,
    RemoteLearner,
    RemoteModel,
    ray_module,
    remote_class,
)
from mas_trainer.plan import check_cluster, ray_request
from mas_trainer.policy import Placement, Policy, learner_kwargs, restore_learner

__all__ = ["RayPolicies", "build_ray_policies", "free_port"]


@dataclass
class RayPolicies:
    """The policies of a run on Ray, and the actors and pools that back them.

    Attributes:
        policies: ``name -> Policy`` (``engine``: :class:`RemoteEngine`, ``model``:
            :class:`RemoteModel`, ``learner``: :class:`RemoteLearner`).
        env_pool: The env-worker pool (None: branches step in the driver).
        placement_groups: One resource pool per policy, by name.
    """

    policies: dict[str, Policy]
    env_pool: EnvWorkerPool | None = None
    placement_groups: dict[str, Any] = field(default_factory=dict)

    @property
    def rollout_class(self) -> Callable[..., RayTreeRollout]:
        """:class:`RayTreeRollout` bound to the env-worker pool (``TreeRollout``'s arguments)."""
        return functools.partial(RayTreeRollout, env_pool=self.env_pool)

    def shutdown(self) -> None:
        """Kill every actor and free every resource pool (the cluster stays up). ``train`` calls
        it when the run ends; a second call does nothing."""
        ray = ray_module()
        for pol in self.policies.values():
            assert isinstance(pol.engine, RemoteEngine) and isinstance(pol.model, RemoteModel)
            for actor in [pol.engine.actor, *pol.model.learners]:
                ray.kill(actor)
        if self.env_pool is not None:
            for worker in self.env_pool.workers:
                ray.kill(worker)
        for pg in self.placement_groups.values():
            ray.util.remove_placement_group(pg)
        self.policies, self.env_pool, self.placement_groups = {}, None, {}


def free_port() -> int:
    """A TCP port free on this host now (rank 0's rendezvous of a learner group)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def build_ray_policies(cfg: TrainConfig, names: list[str], load_from: Path | None) -> RayPolicies:
    """Start the Ray actors of every policy, for ``train``.

    Args:
        cfg: The run config (``run.backend == "ray"``; ``run.ray_*`` fields size the pools).
        names: Policy names.
        load_from: A checkpoint folder to resume from (per-policy subfolders), or None.
    """
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from mas_trainer.models import load_tokenizer

    ray = ray_module()
    if cfg.algo.policy_map == "per_role_lora":
        raise ValueError(
            "run.backend=ray supports algo.policy_map shared and per_role; per_role_lora "
            "(one base shared by the roles' adapters) runs on run.backend=local"
        )
    started = not ray.is_initialized()
    if started:
        ray.init(address=cfg.run.ray_address or None, log_to_driver=False)
    # A placement group the cluster cannot hold waits forever: refuse at once instead.
    try:
        check_cluster(ray_request(cfg, len(names)), ray.cluster_resources())
    except Exception:
        if started:  # leave Ray as it was found
            ray.shutdown()
        raise
    threads = cfg.run.threads or 1
    world = cfg.run.ray_learners
    gpus = cfg.run.ray_gpus_per_policy
    tp = cfg.model.engine_tp if cfg.model.engine == "vllm" else 1
    sharded = cfg.run.ray_sharding == "fsdp" and world > 1
    cpu = 0.25  # actors mostly wait on each other; a small CPU claim keeps small clusters usable
    out = RayPolicies({})
    for name in names:
        path = str(load_from / name) if load_from else None
        source = path or cfg.model.model_for(name)
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

        # Colocated: the engine shares the learners' bundles (half of each GPU, time-shared):
        # bundle 0, or with tensor parallelism one vLLM worker in each of bundles 0..tp-1.
        share = 0.5 if cfg.run.ray_colocate else 1.0
        engine_bundle = 0 if cfg.run.ray_colocate else world
        engine_gpu = (learner_gpu if cfg.run.ray_colocate else gpus / 2) * share
        vllm_env: dict[str, str] = {}
        if tp > 1 and gpus > 0:
            if cfg.run.ray_colocate:
                if tp > world:
                    raise ValueError(
                        f"model.engine_tp {tp} on a colocated pool of {world} GPU bundles: set "
                        f"run.ray_learners >= {tp} or a smaller engine_tp"
                    )
                # vLLM's TP workers become Ray actors in this pool, one per bundle.
                vllm_env = {
                    "VLLM_RAY_BUNDLE_INDICES": ",".join(str(b) for b in range(tp)),
                    "VLLM_RAY_PER_WORKER_GPUS": str(engine_gpu),
                }
                engine_gpu = 0.0
            elif gpus / 2 < tp:
                raise ValueError(
                    f"model.engine_tp {tp} needs {tp} GPUs in the engine's half of the pool: set "
                    f"run.ray_gpus_per_policy >= {2 * tp} (or run.ray_colocate true)"
                )
        engine_actor = remote_class(
            EngineActorBody,
            num_cpus=cpu,
            num_gpus=engine_gpu,
            scheduling_strategy=where(engine_bundle),
        ).remote(cfg.model, cfg.run.seed, path, threads, source, vllm_env)
        master = f"{ray.util.get_node_ip_address()}:{free_port()}"
        # A learner rank whose bundle also runs the engine (or one of its TP workers) gets half.
        shared_bundles = (range(tp) if tp > 1 else range(1)) if cfg.run.ray_colocate else ()
        learners = [
            remote_class(
                LearnerActorBody,
                restart=False,  # a dead rank stops the run (handles.LearnerRankDied)
                num_cpus=cpu,
                num_gpus=learner_gpu * (share if r in shared_bundles else 1.0),
                scheduling_strategy=where(r),
            ).remote(
                cfg.model,
                cfg.run.seed,
                path,
                threads,
                r,
                world,
                master,
                cfg.run.ray_sharding,
                source,
            )
            for r in range(world)
        ]
        ray.get([a.init_group.remote() for a in learners])

        sleeper = engine_actor if cfg.run.ray_colocate and gpus > 0 else None
        tokenizer = load_tokenizer(source)
        learner = RemoteLearner(
            learners,
            learner_kwargs(cfg, name, tokenizer, None),
            sleeping_engine=sleeper,
            sharded=sharded,
            policy=name,
        )
        restore_learner(cfg, name, learner, load_from)
        out.policies[name] = Policy(
            name,
            RemoteModel(learners, sharded=sharded),
            RemoteEngine(engine_actor),
            learner,
            tokenizer,
            placement=Placement(
                learner_device=cfg.model.device,
                engine_memory=cfg.model.engine_memory,
                engine_sleeps=sleeper is not None,
            ),
        )
        out.placement_groups[name] = pg
    if cfg.run.ray_env_workers:
        out.env_pool = EnvWorkerPool(
            [
                remote_class(EnvWorkerBody, num_cpus=cpu).remote()
                for _ in range(cfg.run.ray_env_workers)
            ]
        )
    return out
