"""Fault injection for the Ray backend tests: actor bodies that kill their own process.

``crash_on_call(n)`` makes the n-th later call die the hard way (``os._exit``, as an OOM kill or a
segfault would); the restarted actor starts clean (no armed crash), so the retried call succeeds.
The shipped actor bodies (:mod:`mas_trainer.distributed.actors`) know nothing of this.
"""

from __future__ import annotations

import os
from typing import Any

from mas_trainer.distributed.actors import EngineActorBody, EnvWorkerBody, LearnerActorBody


class _Chaos:
    _crash_at: int | None = None
    _calls: int = 0

    def crash_on_call(self, n: int = 1) -> None:
        self._crash_at = self._calls + n

    def _maybe_crash(self) -> None:
        self._calls += 1
        if self._crash_at is not None and self._calls >= self._crash_at:
            os._exit(1)


class ChaosEngineActor(_Chaos, EngineActorBody):
    """A rollout actor that can die inside ``generate``."""

    def generate(self, prompts: list[list[int]], params: Any, seed: int | None) -> list[Any]:
        self._maybe_crash()
        return super().generate(prompts, params, seed)


class ChaosEnvWorker(_Chaos, EnvWorkerBody):
    """An env worker that can die after its prefetch, before stepping: a retried call (on a fresh
    process, with the driver's env again) must redo the prefetch and give the same clones."""

    def step_texts(self, env: Any, texts: list[str]) -> list[bytes]:
        self._maybe_crash()
        return super().step_texts(env, texts)


class ChaosLearnerActor(_Chaos, LearnerActorBody):
    """A learner rank that can die inside ``update``."""

    def update(self, samples: list[Any], steps: int) -> dict[str, float]:
        self._maybe_crash()
        return super().update(samples, steps)
