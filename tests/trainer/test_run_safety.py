"""Run safety: checkpoints survive a kill at any instant; resume refuses, rewinds, applies.

The checkpoint tests kill a real process: a child that saves checkpoints (re-saving a step,
pruning old ones) is SIGKILLed at its N-th file-system operation, for every N, and at random
moments; then the run folder is opened again (which repairs it) and must hold a complete newest
checkpoint, with every file of it intact, and no leftovers. The resume tests train a tiny model
on the digit-copying env (``tests/helpers/digit_env.py``).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import time

import pytest

from mas_trainer.outputs import RunDir

SAVES = [2, 2, 3, 4, 4]
"""The child's saves: a new step, the same step again (as Ctrl-C right after a save does), more
steps (the oldest are pruned: two are kept)."""


def _save_in_a_child(path, kill_at: int = 0, slow: float = 0.0) -> int:
    """Fork a child that opens the run folder and saves :data:`SAVES`, files naming each save.

    Every operation that changes the folder counts; at operation ``kill_at`` (if > 0) the child
    SIGKILLs itself: the file system sees a kill at that very instant. Returns the child's pid.
    """
    pid = os.fork()
    if pid:
        return pid
    try:
        from mas_trainer import outputs

        count = [0]

        def counted(fn):
            def wrapper(*args, **kwargs):
                count[0] += 1
                if count[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                if slow:
                    time.sleep(slow)
                return fn(*args, **kwargs)

            return wrapper

        for name in ("replace", "rename", "unlink", "rmdir", "mkdir", "fsync", "truncate"):
            setattr(os, name, counted(getattr(os, name)))
        outputs.Path.write_text = counted(outputs.Path.write_text)
        run = outputs.RunDir(path, tensorboard=False)
        for attempt, step in enumerate(SAVES):
            token = f"step {step} save {attempt}"

            def write(folder, token=token):
                for i in range(3):
                    (folder / f"part{i}.txt").write_text(token)
                (folder / "sub").mkdir()
                (folder / "sub" / "weights.bin").write_text(token * 50)

            run.save_checkpoint(step, write)
        (path / "ops").write_bytes(str(count[0]).encode())
    finally:
        os._exit(0)


def _wait(pid: int) -> int:
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _fresh_run(path):
    """A run folder with one complete checkpoint (step 1), as a real run would have."""
    run = RunDir(path, tensorboard=False)

    def write(folder):
        for i in range(3):
            (folder / f"part{i}.txt").write_text("step 1 save first")
        (folder / "sub").mkdir()
        (folder / "sub" / "weights.bin").write_text("step 1 save first" * 50)

    run.save_checkpoint(1, write)
    run.close()


def _check_after_a_kill(path) -> str:
    """Open the run folder (it repairs itself); its newest checkpoint must be whole."""
    run = RunDir(path, tensorboard=False)
    run.close()
    root = path / "checkpoints"
    ckpt = run.latest_checkpoint()
    assert ckpt is not None, sorted(p.name for p in root.iterdir())
    tokens = {(ckpt / f"part{i}.txt").read_text() for i in range(3)}
    assert len(tokens) == 1, tokens  # every file from one and the same save
    (token,) = tokens
    assert (ckpt / "sub" / "weights.bin").read_text() == token * 50
    assert token.startswith(f"step {int(ckpt.name[5:])} ")
    leftovers = [p.name for p in root.iterdir() if p.name.startswith(".")]
    assert not leftovers, leftovers
    for folder in root.glob("step-*"):  # every checkpoint there is whole, none half deleted
        tokens = {(folder / f"part{i}.txt").read_text() for i in range(3)}
        assert len(tokens) == 1 and (folder / "sub" / "weights.bin").is_file(), folder
    return ckpt.name


def test_a_checkpoint_is_whole_after_a_kill_at_every_operation(tmp_path):
    probe = tmp_path / "probe"
    _fresh_run(probe)
    assert _wait(_save_in_a_child(probe)) == 0
    total = int((probe / "ops").read_bytes())
    assert total > 40  # the saves are many operations: each one is a moment to be killed at
    seen = set()
    for kill_at in range(1, total + 1):
        path = tmp_path / f"k{kill_at}"
        _fresh_run(path)
        assert _wait(_save_in_a_child(path, kill_at)) == -signal.SIGKILL, kill_at
        seen.add(_check_after_a_kill(path))
    assert seen >= {"step-000001", "step-000002", "step-000004"}, seen  # kills before/after


def test_a_checkpoint_is_whole_after_a_kill_at_random_moments(tmp_path):
    # The same saves, slowed down (5 ms per operation), killed from outside at 20 moments.
    for i in range(20):
        path = tmp_path / f"r{i}"
        _fresh_run(path)
        pid = _save_in_a_child(path, slow=0.005)
        time.sleep(0.02 + 0.025 * i)
        os.kill(pid, signal.SIGKILL)
        _wait(pid)
        _check_after_a_kill(path)


# ---------------------------------------------------------------------------- resume

try:
    import torch
    import transformers  # noqa: F401
except ImportError:  # the env-only install: the checkpoint tests above still run
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs the train extra (torch)")


def _crash_at(monkeypatch, prefix: str) -> None:
    """The rollout of the RL step whose uids start with ``prefix`` dies (a crash, a kill)."""
    from mas_trainer import rollout as rollout_mod

    real_run = rollout_mod.TreeRollout.run

    def run(self, task_ids, *, uid_prefix=""):
        if uid_prefix == prefix:
            raise RuntimeError("the machine went down")
        return real_run(self, task_ids, uid_prefix=uid_prefix)

    monkeypatch.setattr(rollout_mod.TreeRollout, "run", run)


def _resume(run, *extra):
    from test_train import FAST

    from mas_trainer.config import build_config

    return build_config(overrides=[*FAST, "--run.resume", str(run), *extra])


@needs_torch
def test_resume_refuses_a_folder_without_a_complete_checkpoint(tmp_path, monkeypatch, capsys):
    from test_train import FAST, fast_config

    from mas_trainer.cli import train_main
    from mas_trainer.outputs import read_metrics
    from mas_trainer.train import train

    train_module = importlib.import_module("mas_trainer.train")

    def crash(*args, **kwargs):  # in the warm start, before its first checkpoint
        raise RuntimeError("the machine went down")

    monkeypatch.setattr(train_module, "warm_start", crash)
    with pytest.raises(RuntimeError, match="went down"):
        train(fast_config(tmp_path, "--run.name", "r", "--run.save_every", "1"))
    monkeypatch.undo()
    run = tmp_path / "r"
    logged = (run / "metrics.jsonl").read_bytes()
    n = len(read_metrics(run / "metrics.jsonl"))
    # (a ResumeError, a ValueError: mas-train prints it and exits with 2)
    with pytest.raises(ValueError, match=rf"no complete checkpoint.*metrics.jsonl \({n} records"):
        train(_resume(run))
    assert train_main(["--run.resume", str(run), *FAST]) == 2
    assert "--run.fresh true" in capsys.readouterr().err
    assert (run / "metrics.jsonl").read_bytes() == logged  # nothing appended
    # Asked for: the run starts over there, its old logs kept aside.
    summary = train(_resume(run, "--run.fresh", "true"))
    assert summary["steps"] == 2
    (aside,) = run.glob("restarted-*")
    assert (aside / "metrics.jsonl").read_bytes() == logged
    records = read_metrics(run / "metrics.jsonl")
    assert [r["phase"] for r in records].count("init") == 1
    assert [r["step"] for r in records if r["phase"] == "rl"] == [1, 2]


def _tb_steps(run, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


@needs_torch
def test_a_resumed_run_logs_as_if_it_had_never_stopped(tmp_path, monkeypatch):
    # Checkpoint at step 2, step 3 logged (an eval and its transcripts too), then a crash in
    # step 4. The resumed run's logs hold every step once, and the same numbers as a run that
    # never stopped.
    from test_train import fast_config

    from mas_trainer.outputs import read_metrics
    from mas_trainer.train import train

    args = ("--optim.steps", "4", "--run.save_every", "2", "--eval.every", "3")
    _crash_at(monkeypatch, "3/")
    with pytest.raises(RuntimeError):
        train(fast_config(tmp_path, "--run.name", "r", *args))
    monkeypatch.undo()
    run = tmp_path / "r"
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl") if r["phase"] == "rl"] == [
        1,
        2,
        3,
    ]
    train(_resume(run, *args))
    train(fast_config(tmp_path, "--run.name", "straight", *args))
    resumed, straight = (
        [r for r in read_metrics(tmp_path / name / "metrics.jsonl") if r["phase"] != "warmstart"]
        for name in ("r", "straight")
    )
    assert [(r["phase"], r["step"]) for r in resumed] == [
        ("init", 0),
        ("rl", 1),
        ("rl", 2),
        ("rl", 3),
        ("rl", 4),
        ("final", 4),
    ]
    for a, b in zip(resumed, straight, strict=True):
        for key in ("loss/policy", "rollout/reward/echo", "eval/success"):
            assert a.get(key) == b.get(key), (a["step"], key)
    tags = [
        json.loads(line)["tag"] for line in (run / "transcripts.jsonl").read_text().splitlines()
    ]
    assert tags.count("step-3") == tags.count("final") == tags.count("init") > 0, tags
    assert _tb_steps(run, "loss/policy") == [1, 2, 3, 4]
    assert _tb_steps(run, "eval/success") == [0, 3, 4]


@needs_torch
def test_overrides_on_resume_take_effect_or_are_refused(tmp_path):
    from test_train import fast_config

    from mas_trainer.config import ConfigError
    from mas_trainer.learner import read_checkpoint
    from mas_trainer.train import train

    train(fast_config(tmp_path, "--run.name", "r", "--optim.steps", "1"))
    run = tmp_path / "r"
    train(_resume(run, "--optim.steps", "2", "--optim.lr", "5e-4", "--optim.weight_decay", "0.1"))
    ckpt = RunDir(run, tensorboard=False).latest_checkpoint()
    state = read_checkpoint(ckpt / "learner-shared")
    (group,) = state["optimizer"]["param_groups"]
    assert (group["lr"], group["weight_decay"]) == (5e-4, 0.1)  # not the saved 1e-3 and 0.01
    assert json.loads((run / "config.json").read_text())["optim"]["lr"] == 5e-4
    # What the checkpoint fixes is refused, with the reason, before anything is written.
    logged = (run / "metrics.jsonl").read_bytes()
    with pytest.raises(ConfigError, match=r"run.seed 0 -> 7: the run's generators"):
        train(_resume(run, "--run.seed", "7"))
    with pytest.raises(ConfigError, match=r"optim.warmstart_lr .* warm start is done"):
        train(_resume(run, "--optim.warmstart_lr", "0.5"))
    assert (run / "metrics.jsonl").read_bytes() == logged


def _without_time(records):
    return [{k: v for k, v in r.items() if k != "time"} for r in records]


@needs_torch
def test_resuming_a_finished_run_does_not_evaluate_it_again(tmp_path, monkeypatch):
    # The last checkpoint of a finished run is its final step. Resumed as it is, the run logs its
    # final evaluation once (kept in the checkpoint) and plays no episode; resumed with more
    # steps, it trains on and the final row is the new last step's only.
    from test_train import fast_config

    train_module = importlib.import_module("mas_trainer.train")
    from mas_trainer.outputs import read_metrics
    from mas_trainer.train import train

    first = train(fast_config(tmp_path, "--run.name", "r"))
    run = tmp_path / "r"
    logged = read_metrics(run / "metrics.jsonl")
    played = []
    real = train_module.evaluate_engines
    monkeypatch.setattr(
        train_module, "evaluate_engines", lambda *a, **k: played.append(a[4]) or real(*a, **k)
    )
    again = train(_resume(run))
    assert played == []
    assert _without_time(read_metrics(run / "metrics.jsonl")) == _without_time(logged)
    assert again["success_final"] == first["success_final"] and again["steps"] == 2
    train(_resume(run, "--optim.steps", "3"))
    records = read_metrics(run / "metrics.jsonl")
    assert [(r["phase"], r["step"]) for r in records if r["phase"] in ("rl", "final")] == [
        ("rl", 1),
        ("rl", 2),
        ("rl", 3),
        ("final", 3),
    ]


@needs_torch
def test_a_run_killed_in_its_warm_start_resumes_there(tmp_path, monkeypatch):
    # A warm start of 6 steps, checkpointed every 2, dies in its 5th step: the run resumes from
    # warm-start step 4 and ends with the same numbers as a run that never stopped.
    from test_train import fast_config

    from mas_trainer.learner import Learner
    from mas_trainer.outputs import TrainState, latest_checkpoint, read_metrics
    from mas_trainer.train import train

    args = ("--optim.warmstart_steps", "6", "--run.warmstart_save_every", "2")
    real_sft = Learner.sft_update
    calls = []

    def sft_update(self, *a, **k):
        calls.append(1)
        if len(calls) == 5:
            raise RuntimeError("the machine went down")
        return real_sft(self, *a, **k)

    monkeypatch.setattr(Learner, "sft_update", sft_update)
    with pytest.raises(RuntimeError, match="went down"):
        train(fast_config(tmp_path, "--run.name", "r", *args))
    monkeypatch.undo()
    run = tmp_path / "r"
    ckpt = latest_checkpoint(run)
    assert ckpt is not None and ckpt.name == "step-000000"
    state = TrainState.load(ckpt)
    assert (state.warmstart_step, state.warmstart_done) == (4, False)
    train(_resume(run, *args))
    train(fast_config(tmp_path, "--run.name", "straight", *args))
    resumed, straight = (read_metrics(tmp_path / n / "metrics.jsonl") for n in ("r", "straight"))
    assert [(r["phase"], r["step"]) for r in resumed] == [(r["phase"], r["step"]) for r in straight]
    assert [r["phase"] for r in resumed].count("init") == 1
    for a, b in zip(resumed, straight, strict=True):
        for key in ("warmstart/loss/sft", "eval_warmstart/success", "loss/policy", "eval/success"):
            assert a.get(key) == b.get(key), (a["phase"], a["step"], key)
    assert any("warmstart/loss/sft" in r for r in resumed)
