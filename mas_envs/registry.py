"""The one registry: the table of env ids, their splits, and their registration.

Importing :mod:`mas_envs` registers every id below in PettingZoo's registry (``"aec"``, and
``"parallel"`` through PettingZoo's turn-based converter) and, as a single-agent view
(``mode="single"``), in Gymnasium's registry.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ENVS",
    "GAME_SPLITS",
    "NUMERIC_ENVS",
    "EnvEntry",
    "entry",
    "list_envs",
    "load_entry_point",
    "make",
    "make_numeric",
    "make_numeric_parallel",
    "make_parallel",
    "register_all",
]

GAME_SPLITS: dict[str, range] = {
    "train": range(0, 1_000_000_000),
    "validation": range(1_000_000_000, 1_000_001_000),
    "test": range(2_000_000_000, 2_000_001_000),
}
"""Level ids of the generated game envs (Sokoban, Plan-Path, Sudoku) per split; disjoint.

A level id seeds the level generator, so a level id is one level for a given difficulty. Evaluate
on ``GAME_SPLITS["test"]`` in order (the first N ids), train on ``"train"``. Small boards repeat
levels across ids; ``reset`` on the train split therefore redraws any level that is also a
validation or test level (and on validation, any test level), whether the level was drawn by
``reset(seed=...)`` or chosen by ``reset(options={"task_id": ...})``: the splits are disjoint in
content.
"""


@dataclass(frozen=True)
class EnvEntry:
    """One registered env id.

    Attributes:
        id: Versioned id, ``mas/<Name>-v<N>``.
        entry_point: ``"module:Class"`` of the AEC env.
        summary: One line for ``list_envs`` and the docs.
        kwargs: Constructor defaults of this id.
    """

    id: str
    entry_point: str
    summary: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def load(self) -> type:
        return load_entry_point(self.entry_point)


def load_entry_point(spec: str) -> type:
    """The class named by ``"package.module:Class"`` (the one ``module:Class`` loader).

    Raises:
        ValueError: ``spec`` is not of the form ``module:Class``, or the module has no such name.
        ModuleNotFoundError: The module does not exist.
    """
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"entry point {spec!r} is not of the form 'package.module:Class'")
    try:
        return getattr(importlib.import_module(module), name)
    except AttributeError:
        raise ValueError(f"entry point {spec!r}: module {module!r} has no {name!r}") from None


ENVS: dict[str, EnvEntry] = {
    e.id: e
    for e in [
        EnvEntry(
            "mas/Sokoban-v0",
            "mas_envs.sokoban.env:SokobanEnv",
            "Sokoban (6x6, 1 box): a tool agent proposes moves, a planner makes them.",
        ),
        EnvEntry(
            "mas/PlanPath-v0",
            "mas_envs.planpath.env:PlanPathEnv",
            "Grid path planning (10x10, ~20% walls): a tool agent proposes, a planner moves.",
        ),
        EnvEntry(
            "mas/PlanPath-v1",
            "mas_envs.planpath.env:PlanPathEnv",
            "Plan-Path v1: as v0, and the tool's reward has its team term (alpha * team + local).",
            {"version": 1},
        ),
        EnvEntry(
            "mas/Sudoku-v0",
            "mas_envs.sudoku.env:SudokuEnv",
            "Sudoku (4x4 or 9x9, unique solution): a tool agent proposes a grid, a planner fills.",
        ),
        EnvEntry(
            "mas/SokobanCode-v0",
            "mas_envs.sokoban.env:SokobanEnv",
            "Sokoban (6x6, 1 box): the tool agent writes a program that prints its plan (sandbox).",
            {"tool_mode": "code"},
        ),
        EnvEntry(
            "mas/PlanPathCode-v0",
            "mas_envs.planpath.env:PlanPathEnv",
            "Plan-Path (10x10): the tool agent writes a program that prints its moves (sandbox).",
            {"tool_mode": "code"},
        ),
        EnvEntry(
            "mas/PlanPathCode-v1",
            "mas_envs.planpath.env:PlanPathEnv",
            "Plan-Path code v1: short prompts, a stdin-reading tool program, output last for the "
            "planner.",
            {"tool_mode": "code", "version": 1},
        ),
        EnvEntry(
            "mas/PlanPathCode-v2",
            "mas_envs.planpath.env:PlanPathEnv",
            "Plan-Path code v2: as v1, but the tool's program gets no input, so it must hold the "
            "grid (one text cannot solve every level).",
            {"tool_mode": "code", "version": 2},
        ),
        EnvEntry(
            "mas/SudokuCode-v0",
            "mas_envs.sudoku.env:SudokuEnv",
            "Sudoku (4x4): the tool agent writes a program that prints its grid (sandbox).",
            {"tool_mode": "code"},
        ),
        EnvEntry(
            "mas/Math-v0",
            "mas_envs.math.env:MathEnv",
            "Math: a tool agent runs Python in the sandbox, a reasoner answers in \\boxed{}.",
        ),
        EnvEntry(
            "mas/Math-v1",
            "mas_envs.math.env:MathEnv",
            "Math v1: as v0, with every generated topic and level in every split.",
            {"version": 1},
        ),
        EnvEntry(
            "mas/Code-v0",
            "mas_envs.code.env:CodeEnv",
            "Coding problems (v0's judge: a float within 1e-6 of an expected integer passes).",
            {"version": 0},
        ),
        EnvEntry(
            "mas/Code-v1",
            "mas_envs.code.env:CodeEnv",
            "Coding problems: a coder writes a program, a tester writes cases; hidden tests judge.",
            {"version": 1},
        ),
    ]
}


NUMERIC_ENVS: dict[str, EnvEntry] = {
    e.id: e
    for e in [
        EnvEntry(
            "mas/PlanPathNumeric-v0",
            "mas_envs.planpath.env:PlanPathEnv",
            "Plan-Path for classic MARL libraries: 4 discrete moves, (4, rows, cols) planes.",
            {"max_turns": 50},
        ),
        EnvEntry(
            "mas/SokobanNumeric-v0",
            "mas_envs.sokoban.env:SokobanEnv",
            "Sokoban for classic MARL libraries: 4 discrete moves, board planes.",
            {"max_turns": 50},
        ),
        EnvEntry(
            "mas/SudokuNumeric-v0",
            "mas_envs.sudoku.env:SudokuEnv",
            "Sudoku for classic MARL libraries: size**3 discrete fills, digit planes.",
            {"max_turns": 30},
        ),
    ]
}
"""Numeric views (:class:`mas_envs.numeric.NumericView`) of the game envs, registered in
PettingZoo's registry only. One discrete action is one move or one fill, so these ids allow more
turns than the text ids (``max_turns``; pass it to override)."""


def list_envs() -> list[str]:
    """The registered env ids, sorted."""
    return sorted(ENVS)


def entry(env_id: str) -> EnvEntry:
    """The registry entry of ``env_id``, with a did-you-mean error for unknown ids."""
    try:
        return ENVS[env_id]
    except KeyError:
        close = difflib.get_close_matches(env_id, list(ENVS), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise KeyError(
            f"unknown env id {env_id!r}; {hint}(mas_envs.list_envs() lists them)"
        ) from None


def make(env_id: str, **kwargs: Any) -> Any:
    """Create the AEC env ``env_id``; ``kwargs`` override the id's defaults."""
    e = entry(env_id)
    return e.load()(**{**e.kwargs, **kwargs})


def make_parallel(env_id: str, **kwargs: Any) -> Any:
    """Create ``env_id`` as a PettingZoo ``ParallelEnv`` (one agent acts per parallel step)."""
    from pettingzoo.utils.conversions import turn_based_aec_to_parallel

    return turn_based_aec_to_parallel(make(env_id, **kwargs))


def make_single(env_id: str, **kwargs: Any) -> Any:
    """Create ``env_id`` as a Gymnasium env: the single-agent view.

    ``gymnasium.make(env_id, **kwargs)`` calls this: every option of the id passes through,
    ``mode`` included (default ``"single"``, the mode with one agent).
    """
    from mas_envs.gym_view import SingleAgentEnv

    return SingleAgentEnv(make(env_id, **{"mode": "single", **kwargs}))


def make_numeric(env_id: str, **kwargs: Any) -> Any:
    """Create the numeric view ``env_id`` (a key of :data:`NUMERIC_ENVS`) as an AEC env."""
    from mas_envs.numeric import NumericView

    if env_id not in NUMERIC_ENVS:
        close = difflib.get_close_matches(env_id, list(NUMERIC_ENVS), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise KeyError(f"unknown numeric env id {env_id!r}; {hint}(see NUMERIC_ENVS)")
    e = NUMERIC_ENVS[env_id]
    return NumericView(e.load()(**{**e.kwargs, **kwargs}))


def make_numeric_parallel(env_id: str, **kwargs: Any) -> Any:
    """Create the numeric view ``env_id`` as a PettingZoo ``ParallelEnv``."""
    from pettingzoo.utils.conversions import turn_based_aec_to_parallel

    return turn_based_aec_to_parallel(make_numeric(env_id, **kwargs))


def register_all() -> None:
    """Register every id in PettingZoo's and Gymnasium's registries (idempotent)."""
    import functools

    import gymnasium
    import pettingzoo

    for env_id in ENVS:
        if env_id not in pettingzoo.aec_registry:
            pettingzoo.register("aec", env_id, functools.partial(make, env_id))
            pettingzoo.register("parallel", env_id, functools.partial(make_parallel, env_id))
        if env_id not in gymnasium.registry:
            gymnasium.register(
                env_id, entry_point="mas_envs.registry:make_single", kwargs={"env_id": env_id}
            )
    for env_id in NUMERIC_ENVS:
        if env_id not in pettingzoo.aec_registry:
            pettingzoo.register("aec", env_id, functools.partial(make_numeric, env_id))
            pettingzoo.register(
                "parallel", env_id, functools.partial(make_numeric_parallel, env_id)
            )
