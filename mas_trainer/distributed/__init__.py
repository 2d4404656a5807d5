"""Scale-out on Ray (``mas-train --run.backend ray``): policies and env workers as Ray actors.

Layout (docs/scale_out.md; the paper's system):

* **One resource pool per policy** (a Ray placement group): the policy's rollout actor
  (:class:`~mas_trainer.distributed.actors.EngineActorBody`, a transformers or vLLM engine) and
  its ``run.ray_learners`` data-parallel learner actors
  (:class:`~mas_trainer.distributed.actors.LearnerActorBody`). ``run.ray_gpus_per_policy`` GPUs
  per pool; ``run.ray_colocate`` puts the engine and learner rank 0 in the same bundle (they
  time-share the GPU, vLLM sleeping during updates), otherwise the engine gets a bundle of its own
  (half the pool's GPUs).
* **Data-parallel learners** through ``torch.distributed`` (gloo on CPU, NCCL on GPU): each rank
  trains on its shard of the step's samples, and gradients are all-reduced (weighted by completion
  tokens, so the result is the token-mean of the whole mini-batch) before every optimizer step;
  every rank takes the same number of optimizer steps, so the replicas stay identical.
* **Env workers** (:class:`~mas_trainer.distributed.actors.EnvWorkerBody`): a pool of CPU actors
  that step the K clones of a turn (code execution runs there, not in the driver; a worker
  prefetches its share of the texts, so a code env runs them in one pooled sandbox call).
  :class:`~mas_trainer.distributed.handles.RayTreeRollout` is the tree rollout with its branch
  stepping sent to the pool.

Modules: :mod:`~mas_trainer.distributed.actors` (what runs inside the actors),
:mod:`~mas_trainer.distributed.handles` (what the driver holds: the engine, learner, model and
env-pool handles, and the retry on restarted actors), :mod:`~mas_trainer.distributed.build`
(starting the actors of a run).

The driver runs the same loop as the single-process path (:func:`mas_trainer.train.train`): every
policy is a :class:`~mas_trainer.policy.Policy` whose ``engine`` is a ``RemoteEngine``, whose
``model`` is a ``RemoteModel`` handle and whose ``learner`` is a ``RemoteLearner``.

Fault tolerance: rollout actors and env workers are created with ``max_restarts=-1``. When one
dies mid-call, the call is retried on the restarted actor; a restarted rollout actor first
reloads the latest synced weights (kept in Ray's object store). Both calls are pure given their
inputs (the engine call carries its seed; an env worker's prefetch only fills a cache), so a
retried step returns exactly what the first try would have: no sample is lost or counted twice.
A restarted actor gets ``RESTART_TIMEOUT_S`` (120 s) from its death to answer. Learner ranks are
not restarted (a fresh rank has lost its optimizer state and cannot rejoin its group's
collectives): a rank's death stops the run, which keeps its last complete checkpoint and prints
the ``mas-train --run.resume RUN_DIR`` command that continues it
(:class:`~mas_trainer.distributed.handles.LearnerRankDied`).
"""
