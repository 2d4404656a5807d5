"""What runs inside the Ray actors: a policy's rollout engine, its learner ranks, env workers.

These are plain classes (importing this module needs neither ray nor torch);
:func:`mas_trainer.distributed.handles.remote_class` turns one into a Ray actor class, and
:mod:`mas_trainer.distributed.build` starts them. Each has ``ping`` (the driver's liveness check
after a restart).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mas_trainer.config import ModelConfig
from mas_trainer.rollout import prefetch_texts

__all__ = ["EngineActorBody", "EnvWorkerBody", "LearnerActorBody"]


def _setup_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads or 1)


def _load(model_cfg: ModelConfig, seed: int, path: str | None) -> tuple[Any, Any]:
    import torch

    from mas_trainer.models import load_model

    return load_model(
        path or model_cfg.name,
        device=model_cfg.device,
        dtype=getattr(torch, model_cfg.dtype),
        seed=seed,
    )


class EngineActorBody:
    """The rollout actor of one policy: a transformers (or vLLM) engine with its own weights.

    Args:
        model_cfg: The run's ``model`` section.
        seed: The run seed (model init of ``tiny:`` models, engine seed).
        path: A checkpoint folder to load instead of ``model_cfg.name`` (resume).
        threads: torch CPU threads.
    """

    def __init__(
        self, model_cfg: ModelConfig, seed: int, path: str | None = None, threads: int = 1
    ) -> None:
        _setup_threads(threads)
        self.model, self.tokenizer = _load(model_cfg, seed, path)
        if model_cfg.engine == "vllm":
            import tempfile

            from mas_trainer.engines.vllm import VLLMEngine, build_llm, save_for_vllm, set_vllm_env

            set_vllm_env(model_cfg.device)
            folder = tempfile.TemporaryDirectory(prefix="mas-ray-vllm-")
            llm = build_llm(
                save_for_vllm(self.model, self.tokenizer, folder.name),
                dtype=model_cfg.dtype,
                seed=seed,
                gpu_memory_utilization=model_cfg.engine_memory,
                max_num_seqs=model_cfg.engine_batch_size,
                enable_sleep_mode=str(model_cfg.device).startswith("cuda"),
            )
            self.engine: Any = VLLMEngine(llm, self.tokenizer, seed=seed, model_dir=folder)
            self.model = None  # vLLM holds the weights
        else:
            from mas_trainer.engines.transformers import TransformersEngine

            self.engine = TransformersEngine(
                self.model, self.tokenizer, batch_size=model_cfg.engine_batch_size
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
    """One data-parallel learner rank of one policy (it holds a full replica of the model).

    Args:
        model_cfg: The run's ``model`` section.
        seed: The run seed (same init on every rank).
        path: A checkpoint folder to load (resume).
        threads: torch CPU threads.
        rank: This rank.
        world: Number of ranks.
        master: ``host:port`` of rank 0's rendezvous (ignored when ``world == 1``).
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
    ) -> None:
        _setup_threads(threads)
        self.model, self.tokenizer = _load(model_cfg, seed, path)
        self.rank, self.world, self.master = rank, world, master
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
