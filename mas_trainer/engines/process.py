"""Engines in processes of their own, behind the same :class:`~mas_trainer.engines.Engine` protocol.

vLLM's sleep mode keeps one ``CuMemAllocator`` per process, so a second sleep-mode ``vllm.LLM`` in
one process fails an assert (docs/scale_out.md): every policy's vLLM engine runs in its own
worker process (as verl and OpenRLHF run theirs). :class:`EngineProcess` starts the worker
(``spawn``), builds the engines there with a picklable builder (e.g. :func:`functools.partial` of
:func:`mas_trainer.engines.vllm.start_vllm_engines`) and serves method calls over a pipe;
:class:`ProcessEngine` is the protocol for one engine of that process (``per_role_lora`` serves
one adapter engine per role on one ``LLM``).

Weights travel as CPU tensors through ``torch.multiprocessing``'s pickler: the storages go to shared
memory once, so the worker reads them without another copy through the pipe. A call waits for the
worker and raises with its traceback when the call fails there, or names the exit code when the
worker died. Calls to one process are serialised by a lock; calls to two processes may run at once
(the rollout's threads generate with several policies concurrently).

The worker process gets the environment variables the placement gives it (e.g.
``CUDA_VISIBLE_DEVICES``): a process never sees a GPU it was not given.
"""

from __future__ import annotations

import contextlib
import os
import threading
import traceback
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mas_trainer.engines.base import Completion, SamplingParams

if TYPE_CHECKING:
    import torch

__all__ = ["EngineProcess", "EngineProcessError", "ProcessEngine"]

#: Seconds between liveness checks while a call waits on its worker.
_POLL_S = 1.0


class EngineProcessError(RuntimeError):
    """An engine process failed a call, or died."""


def _serve(conn: Any, build: Callable[[], Mapping[str, Any]], env: Mapping[str, str]) -> None:
    """The worker's loop: build the engines, then answer ``(name, method, args, kwargs)`` calls
    with ``("ok", result)`` or ``("error", traceback text)`` until the pipe closes or ``None``."""
    os.environ.update(env)
    try:
        engines = dict(build())
    except BaseException:  # the driver shows why, then the worker ends
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ok", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        name, method, args, kwargs = msg
        try:
            conn.send(("ok", getattr(engines[name], method)(*args, **kwargs)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))


def _stop(proc: Any, conn: Any) -> None:
    """Ask the worker to end, then make sure it does (a finalizer: no reference to the handle)."""
    with contextlib.suppress(OSError, ValueError):  # the worker is gone already
        conn.send(None)
    proc.join(timeout=30)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=10)
    conn.close()


class EngineProcess:
    """A worker process that holds engines and runs their calls.

    Args:
        build: Called in the worker (so it must pickle: a module-level function or a partial of
            one); returns ``name -> engine``. It runs before the constructor returns, and an
            exception there is raised here with the worker's traceback.
        env: Environment variables set in the worker before ``build`` runs (the placement:
            ``CUDA_VISIBLE_DEVICES``, vLLM's settings).
        label: Names the process in errors (the policy).
        keep: Objects to keep alive as long as the process (the folder the engine was started
            from).

    Attributes:
        pid: The worker's process id.
    """

    def __init__(
        self,
        build: Callable[[], Mapping[str, Any]],
        *,
        env: Mapping[str, str] | None = None,
        label: str = "engine",
        keep: Any = None,
    ) -> None:
        import torch.multiprocessing as mp  # registers the pickler's tensor reductions

        ctx = mp.get_context("spawn")
        self.label = label
        self.keep = keep
        self._lock = threading.Lock()
        self._conn, child = ctx.Pipe()
        # Not a daemon: vLLM's tensor-parallel executor starts processes of its own.
        self._proc = ctx.Process(
            target=_serve, args=(child, build, dict(env or {})), name=f"mas-engine-{label}"
        )
        self._proc.start()
        child.close()
        self._finalizer = weakref.finalize(self, _stop, self._proc, self._conn)
        self.pid: int = self._result("starting")

    def call(self, name: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """``engines[name].method(*args, **kwargs)`` in the worker; its result."""
        with self._lock:
            if not self._proc.is_alive():
                raise self._died(method)
            self._conn.send((name, method, args, kwargs))
            return self._result(method)

    def _result(self, what: str) -> Any:
        while not self._conn.poll(_POLL_S):
            if not self._proc.is_alive():
                raise self._died(what)
        try:
            status, value = self._conn.recv()
        except EOFError:
            raise self._died(what) from None
        if status == "error":
            raise EngineProcessError(f"engine process {self.label!r} failed {what}:\n{value}")
        return value

    def _died(self, what: str) -> EngineProcessError:
        self._proc.join(timeout=5)
        return EngineProcessError(
            f"engine process {self.label!r} (pid {self._proc.pid}) died during {what} "
            f"(exit code {self._proc.exitcode}); its output above says why"
        )

    def close(self) -> None:
        """End the worker (also when the handle is garbage-collected or at exit)."""
        self._finalizer()


class ProcessEngine:
    """The :class:`~mas_trainer.engines.Engine` protocol for one engine of an
    :class:`EngineProcess`, plus the engine's ``sleep`` / ``wake_up``.

    Args:
        process: The process the engine runs in.
        name: The engine's name there.
        adapter: The engine serves a LoRA adapter (``per_role_lora``): a sync sends only the
            adapter tensors (names with ``lora_``), not the frozen base.

    Attributes:
        model: None: the engine holds its own weights, so the train loop syncs them.
    """

    model = None

    def __init__(self, process: EngineProcess, name: str, *, adapter: bool = False) -> None:
        self.process = process
        self.name = name
        self.adapter = adapter

    @property
    def pid(self) -> int:
        """The process the engine runs in."""
        return self.process.pid

    def generate(
        self, prompts: list[list[int]], params: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        return self.process.call(self.name, "generate", prompts, params, seed=seed)

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Send the weights as CPU tensors (a GPU learner's tensors are copied to the host; the
        engine's process may not see the learner's GPU)."""
        cpu = {
            k: v.detach().to("cpu", copy=True)
            for k, v in state_dict.items()
            if not self.adapter or "lora_" in k
        }
        self.process.call(self.name, "load_weights", cpu)

    def sleep(self, level: int = 1) -> None:
        self.process.call(self.name, "sleep", level)

    def wake_up(self, tags: list[str] | None = None) -> None:
        self.process.call(self.name, "wake_up", tags)
