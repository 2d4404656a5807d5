"""Several policies' learners stepping together: one after another, or side by side in threads.

Per-role policies are independent models with independent optimisers and random generators, so
their supervised and PPO steps can run at the same time; torch releases the GIL inside its kernels,
so on a CPU each thread keeps a core busy, and Ray learner handles wait on their actors in
parallel. What each step computes does not change: a policy's calls run in the same order, on the
same data, with the same generator, whichever way they are scheduled
(``tests/trainer/test_lockstep.py`` checks a run bit for bit).

Only learners that share nothing may step side by side: ``per_role_lora`` adapters share one base
model (and the adapter switch is global to it), and two local learners on one GPU would hold both
activations at once, so the trainer steps those one after another (``run.learners_side_by_side``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

__all__ = ["lockstep", "once_each"]

T = TypeVar("T")


def lockstep(
    fn: Callable[[str, int], T], steps: Mapping[str, int], *, side_by_side: bool
) -> Iterator[tuple[int, dict[str, T]]]:
    """Call ``fn(name, step)`` for ``step`` 1 to ``steps[name]`` of every name; yield each step's
    results in step order.

    Args:
        fn: One step of one policy (a learner's ``sft_update`` or ``update``).
        steps: Steps of each policy; a policy with fewer steps stops first.
        side_by_side: Run each policy's steps in a thread of its own (its steps in order); else
            step ``s`` runs every policy in ``steps``' order before step ``s + 1``.

    Yields:
        ``(step, {name: fn(name, step)})`` for steps 1 to ``max(steps)``, names in ``steps``'
        order, as soon as every policy has finished that step. An exception in a policy's thread
        stops the others after their current step and is raised here; so is one from the caller
        (e.g. Ctrl-C while a step is logged) after the threads have stopped.
    """
    last = max(steps.values(), default=0)
    if not side_by_side or sum(1 for n in steps.values() if n > 0) < 2:
        for step in range(1, last + 1):
            yield step, {name: fn(name, step) for name, n in steps.items() if step <= n}
        return
    done: queue.Queue[tuple[str, int, Any, BaseException | None]] = queue.Queue()
    stop = threading.Event()

    def run(name: str) -> None:
        for step in range(1, steps[name] + 1):
            if stop.is_set():
                return
            try:
                done.put((name, step, fn(name, step), None))
            except BaseException as exc:  # raised again in the caller's thread
                done.put((name, step, None, exc))
                return

    threads = [
        threading.Thread(target=run, args=(name,), name=f"lockstep-{name}", daemon=True)
        for name, n in steps.items()
        if n > 0
    ]
    for t in threads:
        t.start()
    results: dict[int, dict[str, T]] = {}
    try:
        for step in range(1, last + 1):
            wanted = [name for name, n in steps.items() if step <= n]
            while any(name not in results.get(step, {}) for name in wanted):
                name, s, out, exc = done.get()
                if exc is not None:
                    raise exc
                results.setdefault(s, {})[name] = out
            mine = results.pop(step)
            yield step, {name: mine[name] for name in wanted}
    finally:
        stop.set()
        for t in threads:
            t.join()


def once_each(calls: Mapping[str, Callable[[], T]], *, side_by_side: bool) -> dict[str, T]:
    """``{name: call()}`` for every call, at the same time or in order (:func:`lockstep` with
    one step each): e.g. each policy's PPO update of an RL step."""
    steps = list(
        lockstep(lambda name, _: calls[name](), {n: 1 for n in calls}, side_by_side=side_by_side)
    )
    return steps[0][1] if steps else {}
