"""What runs inside the Ray actors: a policy's rollout engine, its learner ranks, env workers.

These are plain classes (importing this module needs neither ray nor torch);
:func:`mas_trainer.distributed.handles.remote_class` turns one into a Ray actor class, and
:mod:`mas_trainer.distributed.build` starts them. Each has ``ping`` (the driver's liveness check
after a restart).
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from typing import Any

from mas_trainer.config import ModelConfig
from mas_trainer.policy import free_cached_memory
from mas_trainer.rollout import prefetch_texts

__all__ = ["EngineActorBody", "EnvWorkerBody", "LearnerActorBody", "load_device"]


def _setup_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads or 1)


def _load(model_cfg: ModelConfig, seed: int, source: str, device: str) -> tuple[Any, Any]:
    import torch

    from mas_trainer.models import load_model

    return load_model(source, device=device, dtype=getattr(torch, model_cfg.dtype), seed=seed)


def _gpu_ids() -> list[Any]:
    """The GPUs Ray gave this actor (none outside Ray)."""
    try:
        import ray
    except ImportError:  # no Ray installed: a body run in a plain process (tests)
        return []

    return list(ray.get_gpu_ids()) if ray.is_initialized() else []


def load_device(requested: str, gpu_ids: Sequence[Any], *, staging: bool = False) -> str:
    """Where an actor loads its model: never on a GPU it was not given.

    Args:
        requested: ``model.device``.
        gpu_ids: The GPUs Ray gave the actor (``ray.get_gpu_ids()``; Ray's
            ``CUDA_VISIBLE_DEVICES`` shows it these only, so the first is ``cuda:0``).
        staging: The model is only passed on from here (written out for vLLM, which loads it onto
            its own GPUs; or sharded by FSDP2 onto the rank's GPU): the CPU.

    Raises:
        ValueError: A CUDA model for an actor given no GPU.
    """
    if not requested.startswith("cuda") or staging:
        return "cpu"
    if not gpu_ids:
        raise ValueError(
            f"model.device {requested} on the ray backend, but this actor was given no GPU: "
            "set run.ray_gpus_per_policy (GPUs per policy's pool), or model.device cpu"
        )
    return "cuda:0"


class EngineActorBody:
    """The rollout actor of one policy: a transformers (or vLLM) engine with its own weights.

    Args:
        model_cfg: The run's ``model`` section.
        seed: The run seed (model init of ``tiny:`` models, engine seed).
        path: A checkpoint folder to load instead of ``model_name`` (resume).
        threads: torch CPU threads.
        model_name: The policy's base model (``model_cfg.model_for(role)``; default
            ``model_cfg.name``).
        vllm_env: Environment variables vLLM reads in this actor (tensor parallelism across the
            pool's bundles: ``VLLM_RAY_BUNDLE_INDICES``, ``VLLM_RAY_PER_WORKER_GPUS``).
    """

    def __init__(
        self,
        model_cfg: ModelConfig,
        seed: int,
        path: str | None = None,
        threads: int = 1,
        model_name: str | None = None,
        vllm_env: Mapping[str, str] | None = None,
    ) -> None:
        import torch

        _setup_threads(threads)
        vllm = model_cfg.engine == "vllm"
        device = load_device(model_cfg.device, _gpu_ids(), staging=vllm)
        model, tokenizer = _load(model_cfg, seed, path or model_name or model_cfg.name, device)
        if vllm:
            import os
            import tempfile

            from mas_trainer.engines.vllm import llm_options, save_for_vllm, start_vllm_engines

            os.environ.update(vllm_env or {})
            self._folder = tempfile.TemporaryDirectory(prefix="mas-ray-vllm-")
            save_for_vllm(model, tokenizer, self._folder.name)
            del model  # vLLM holds the weights; this process keeps no copy
            options = llm_options(
                dtype=model_cfg.engine_weights_dtype,
                seed=seed,
                device=model_cfg.device,
                tensor_parallel_size=model_cfg.engine_tp,
                gpu_memory_utilization=model_cfg.engine_memory,
                max_num_seqs=model_cfg.engine_batch_size,
            )
            if model_cfg.engine_tp > 1:
                # TP workers as Ray actors on this policy's bundles (vLLM finds the placement
                # group it runs in); one GPU's worth of TP stays in this process.
                options["distributed_executor_backend"] = "ray"
            engines = start_vllm_engines(
                self._folder.name, options, device=model_cfg.device, seed=seed
            )
            self.engine: Any = engines[""]
        else:
            from mas_trainer.engines.transformers import TransformersEngine

            self.engine = TransformersEngine(
                model,
                tokenizer,
                batch_size=model_cfg.engine_batch_size,
                autocast=getattr(torch, model_cfg.engine_weights_dtype),
            )

    def ping(self) -> bool:
        return True

    def generate(self, prompts: list[list[int]], params: Any, seed: int | None) -> list[Any]:
        return self.engine.generate(prompts, params, seed=seed)

    def load_weights(self, state_dict: Mapping[str, Any]) -> None:
        self.engine.load_weights(state_dict)

    def sleep(self) -> None:
        if hasattr(self.engine, "sleep"):
            self.engine.sleep()


class LearnerActorBody:
    """One learner rank of one policy: a full replica (data-parallel) or an FSDP2 shard.

    Args:
        model_cfg: The run's ``model`` section.
        seed: The run seed (same init on every rank).
        path: A checkpoint folder to load (resume).
        threads: torch CPU threads.
        rank: This rank.
        world: Number of ranks.
        master: ``host:port`` of rank 0's rendezvous (ignored when ``world == 1``).
        sharding: ``replicate`` or ``fsdp`` (``run.ray_sharding``; :mod:`mas_trainer.
            distributed.learners`).
        model_name: The policy's base model (default ``model_cfg.name``).
    """

    def __init__(
        self,
        model_cfg: ModelConfig,
        seed: int,
        path: str | None,
        threads: int,
        rank: int,
        world: int,
        master: str,
        sharding: str = "replicate",
        model_name: str | None = None,
    ) -> None:
        _setup_threads(threads)
        self.rank, self.world, self.master = rank, world, master
        self.sharded = sharding == "fsdp" and world > 1
        # The rank's own GPU. FSDP: rank 0 loads the whole model on the CPU and the other ranks
        # build it on the meta device (no weights); all shard onto their GPUs and rank 0 sends
        # the weights (make_learner). No GPU holds the whole fp32 model, and one host does.
        self.device = load_device(model_cfg.device, _gpu_ids())
        staged = load_device(model_cfg.device, _gpu_ids(), staging=self.sharded)
        if self.sharded and rank > 0:
            staged = "meta"
        source = path or model_name or model_cfg.name
        self.model, self.tokenizer = _load(model_cfg, seed, source, staged)
        self.learner: Any = None
        self._group_ready = False

    def ping(self) -> bool:
        return True

    def init_group(self) -> None:
        """Join the policy's torch.distributed group (gloo on CPU, NCCL on CUDA)."""
        if self.world == 1 or self._group_ready:
            return
        import torch
        import torch.distributed as dist

        backend = "nccl" if self.device.startswith("cuda") else "gloo"
        dist.init_process_group(
            backend, init_method=f"tcp://{self.master}", rank=self.rank, world_size=self.world
        )
        self._group_ready = True
        if self.sharded:  # rank 0's weights reach the others as they shard (make_learner)
            return
        # Replicas start identical, but make sure (a resumed rank could differ).
        with torch.no_grad():
            for p in self.model.parameters():
                dist.broadcast(p.data, src=0)

    def make_learner(self, kwargs: dict[str, Any]) -> None:
        """Build this rank's learner (an FSDP learner shards the model in place, once)."""
        from mas_trainer.learner import Learner

        if self.world == 1:
            self.learner = Learner(self.model, **kwargs)
            return
        from mas_trainer.distributed.learners import DataParallelLearner, FSDPLearner

        if not self.sharded:
            self.learner = DataParallelLearner(self.model, **kwargs)
        elif self.learner is None:
            self.learner = FSDPLearner(self.model, device=self.device, from_rank0=True, **kwargs)
        else:  # the model is sharded already: a new learner (fresh optimizer) on the same shards
            self.learner = FSDPLearner(self.model, root=self.learner.root, **kwargs)

    def update(self, samples: list[Any], steps: int) -> dict[str, float]:
        if self.world > 1:
            self.learner.dp_steps = steps
        try:
            return self.learner.update(samples)
        finally:  # before a colocated engine wakes on this GPU
            free_cached_memory(self.device)

    def sft_update(self, samples: list[Any], lr: float | None, steps: int) -> dict[str, float]:
        if self.world > 1:
            self.learner.dp_steps = steps
        try:
            return self.learner.sft_update(samples, lr=lr)
        finally:
            free_cached_memory(self.device)

    def logprobs(self, samples: list[Any]) -> list[list[float]]:
        return self.learner.logprobs(samples)

    def save(self, folder: str) -> None:
        self.learner.save(folder)

    def load(self, folder: str, lr: float | None, weight_decay: float | None) -> None:
        self.learner.load(folder, lr=lr, weight_decay=weight_decay)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state)

    def reset_reference(self) -> None:
        self.learner.reset_reference()

    def weights(self, dtype: str | None = None) -> dict[str, Any] | None:
        """The model's tensors on the CPU, cast to ``dtype`` (what the rollout actor loads). With
        FSDP every rank must call it (the shards are gathered); only rank 0 returns them."""
        import torch

        target = None if dtype is None else getattr(torch, dtype)
        if self.sharded and self.learner is not None:
            return self.learner.full_weights(target)
        state = self.model.state_dict().items()
        return {k: v.detach().to("cpu", dtype=target or v.dtype).clone() for k, v in state}

    def save_pretrained(self, folder: str) -> None:
        """Save the model as a Hugging Face folder (fp32 master weights; rank 0 writes; with FSDP
        every rank must call it)."""
        if self.sharded and self.learner is not None:
            state = self.learner.full_weights()
            if state is not None:
                self.model.save_pretrained(folder, state_dict=state)
            return
        self.model.save_pretrained(folder)


class EnvWorkerBody:
    """An env worker: steps clones of a pickled env, one per text, and returns them."""

    def ping(self) -> bool:
        return True

    def step_branches(
        self, env_bytes: bytes, texts: list[str], prefetch: bool = True
    ) -> list[bytes]:
        """Step one clone of the env per text; the pickled clones, in text order.

        With ``prefetch`` and several texts, the env's ``prefetch(texts, agent)`` (when its class
        has one: the code-running envs) first runs their programs in one pooled sandbox call, so
        the steps only read the cache the clones share, as :class:`~mas_trainer.rollout.
        TreeRollout` does in the driver.
        """
        env = pickle.loads(env_bytes)
        if prefetch and len(texts) > 1:
            prefetch_texts(env, texts, env.agent_selection)
        return self.step_texts(env, texts)

    def step_texts(self, env: Any, texts: list[str]) -> list[bytes]:
        """Step one clone of ``env`` per text (``env`` itself takes the last); pickled clones."""
        out = []
        for i, text in enumerate(texts):
            branch = env if i == len(texts) - 1 else env.clone()
            branch.step(text)
            out.append(pickle.dumps(branch))
        return out
