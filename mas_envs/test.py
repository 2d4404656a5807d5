"""The text-env contract as a check any env author can run, the way PettingZoo ships ``api_test``.

::

    from mas_envs.test import text_env_test

    text_env_test(lambda **kwargs: MyEnv(**kwargs))  # raises ContractError naming the broken rule

PettingZoo's ``api_test`` checks the AEC API; :func:`text_env_test` checks what an LLM trainer
relies on beyond it (docs/architecture.md, "The env contract"), one rule at a time
(:data:`RULES`). It needs from the env, besides the AEC API: ``clone()``, ``task_ids(split)``,
``alpha`` (the weight in
``r = alpha * team + local``), a ``split=`` keyword of ``env_fn``, and ``str`` actions. It uses
``oracle_action()`` and ``random_action(rng)`` where the env has them (as every
:class:`~mas_envs.base.TextEnv` does), so the episodes it plays reach states past a format error.
It imports no torch and takes about a second per env.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from mas_envs.base import SPLITS, NoOracleError

__all__ = [
    "BAD_ACTIONS",
    "HOSTILE_TEXTS",
    "RULES",
    "ContractError",
    "first_observations",
    "observable_state",
    "text_env_test",
]

RULES: dict[str, str] = {
    "action-type": "an action that is not a str (bytes, an int, None for a live agent, a list, a "
    "float) raises TypeError saying that a str was expected, and changes nothing",
    "hostile-text": "any str action (empty, huge, unicode, control characters, malformed "
    "answers) steps without an exception, keeps the observations inside their space, and text "
    "that does not parse gets a negative local reward and a reason",
    "infos": "after each step, infos[agent] holds team_reward, local_reward, success, turn, "
    "parsed and reason, and rewards[agent] == alpha * team_reward + local_reward",
    "clone-exact": "a clone is in the same state as its env: the same action on both gives the "
    "same rewards, observations, infos and termination, and the next unseeded reset draws the "
    "same task (the generator is cloned too)",
    "clone-independent": "stepping or resetting a clone never changes its env, and stepping an env "
    "never changes its clones",
    "seeding": "reset(seed=s), and reset(options={'task_id': t}), give the same episode for the "
    "same actions, on one env or two, whatever the env did before",
    "global-rng": "the env never touches the global generators of `random` and `numpy.random`",
    "splits": "the task ids of train, validation and test are disjoint, and a reset serves a task "
    "of the env's split whose content is not that of a task of a later split (train, then "
    "validation, then test), whichever way the task is chosen: reset(seed=s) or "
    "reset(options={'task_id': t}) with t an id of the split",
}
"""The rules :func:`text_env_test` checks, by name (a :class:`ContractError` names one)."""

HOSTILE_TEXTS: tuple[str, ...] = (
    "",
    " ",
    "x" * 1_000_000,
    "U" * 1_000_000,
    "\u4e2d\u6587 \U0001f600 \u202e\u0000\u0007\x1b[31m",
    "```\n```",
    "####",
    "#### " + "[" * 10_000,
    "\ud800",  # a lone surrogate: not encodable as UTF-8
    "1" * 100_000,
    "<think>" + "\n" * 5000,
    "#### [[1, 1, " + "9" * 5000 + "]]",  # int() of it raises ValueError
    "\\boxed{" * 9000,  # unclosed boxes: a box parser must stay linear
    "```python\nprint(\n```",  # a program that does not compile
    "\x00\x01\x02\x7f\r\n\t",
)
"""Text that models write (or that an attacker would): each must step without an exception."""

_SHORT_HOSTILE = tuple(t for t in HOSTILE_TEXTS if len(t) < 100)

BAD_ACTIONS: tuple[Any, ...] = (b"#### U, R", 3, None, ["U"], 1.5)
"""Actions of a wrong type: each must raise ``TypeError`` while the agent is alive."""


class ContractError(AssertionError):
    """An env broke a rule of :data:`RULES`.

    Attributes:
        rule: The rule's name, a key of :data:`RULES`.
        env_name: The env, as :func:`text_env_test` names it.
    """

    def __init__(self, env_name: str, rule: str, detail: str) -> None:
        super().__init__(f"{env_name} breaks rule {rule!r}: {detail}\n  rule: {RULES[rule]}")
        self.rule = rule
        self.env_name = env_name


def observable_state(env: Any) -> dict[str, Any]:
    """Everything a user of an AEC env can observe now (two equal states act the same)."""
    agents = list(env.agents)
    return {
        "agents": agents,
        "agent_selection": env.agent_selection if agents else None,
        "rewards": dict(env.rewards),
        "cumulative_rewards": dict(getattr(env, "_cumulative_rewards", {})),
        "terminations": dict(env.terminations),
        "truncations": dict(env.truncations),
        "infos": {a: dict(i) for a, i in env.infos.items()},
        "observations": {a: env.observe(a) for a in agents},
        "render": env.render() if getattr(env, "render_mode", None) == "ansi" else None,
    }


def first_observations(env: Any) -> Hashable:
    """The default content of a task: every agent's observation right after ``reset``.

    Two tasks whose agents see the same text are the same task to a model, whatever their ids.
    """
    return tuple((a, _freeze(env.observe(a))) for a in env.agents)


def text_env_test(
    env_fn: Callable[..., Any],
    *,
    num_episodes: int = 2,
    max_steps: int = 12,
    split_tasks: int = 300,
    split_draws: int = 100,
    hostile_texts: Sequence[str] = HOSTILE_TEXTS,
    content_key: Callable[[Any], Hashable] = first_observations,
    rules: Collection[str] = tuple(RULES),
    seed: int = 0,
    name: str | None = None,
) -> None:
    """Check that the env made by ``env_fn`` keeps the text-env contract; raise on a violation.

    Args:
        env_fn: Makes a fresh env: ``env_fn()``, and ``env_fn(split=s)`` for each split.
        num_episodes: Seeded episodes played for the clone and seeding rules.
        max_steps: Most steps of each of those episodes.
        split_tasks: Tasks of each of validation and test whose content is compared: the first
            ``split_tasks`` of ``task_ids(split)``.
        split_draws: Resets per split, and per way of choosing a task (by seed, by a random id of
            the split), whose task is checked against the later splits.
        hostile_texts: The texts every agent writes in turn (default :data:`HOSTILE_TEXTS`).
        content_key: What makes a task the task it is, read right after ``reset`` (default
            :func:`first_observations`).
        rules: The rules to check (default: all of :data:`RULES`).
        seed: Seeds the episodes and the checker's own generator.
        name: The env's name in messages (default: its ``metadata["name"]`` and class).

    Raises:
        ContractError: The first rule broken (an ``AssertionError``); its message names the env,
            the rule and what happened.
        ValueError: ``rules`` names an unknown rule.
    """
    unknown = sorted(set(rules) - set(RULES))
    if unknown:
        raise ValueError(f"unknown rules {unknown}; choose from {list(RULES)}")
    before = _global_rng_state()
    env = env_fn()
    ctx = _Checker(_name_of(env, name), np.random.default_rng(seed), before, rules)
    ctx.guard("constructing the env")
    checks: list[tuple[set[str], Callable[[], None]]] = [
        ({"action-type"}, lambda: _check_action_types(ctx, env, seed)),
        ({"hostile-text"}, lambda: _check_hostile_text(ctx, env, seed, hostile_texts)),
        (
            {"seeding"},
            lambda: _check_seeding(ctx, env_fn, seed, num_episodes, max_steps, content_key),
        ),
        (
            {"clone-exact", "clone-independent"},
            lambda: _check_clone(ctx, env, seed, num_episodes, max_steps),
        ),
        (
            {"splits"},
            lambda: _check_splits(ctx, env_fn, seed, split_tasks, split_draws, content_key),
        ),
    ]
    for names, check in checks:
        if names & ctx.rules:
            check()
            ctx.guard(f"the {' and '.join(sorted(names))} checks ran")


class _Checker:
    """What the checks share: the env's name, the checker's generator, the infos rule."""

    def __init__(
        self, name: str, rng: np.random.Generator, rng_before: tuple, rules: Collection[str]
    ) -> None:
        self.name = name
        self.rng = rng
        self._rng_before = rng_before
        self.rules = frozenset(rules)

    def fail(self, rule: str, detail: str) -> ContractError:
        return ContractError(self.name, rule, detail)

    def same(
        self, rule: str, a: dict[str, Any], b: dict[str, Any], what: str, hint: str = ""
    ) -> None:
        """Raise ``rule``'s error, when it is checked, if the states ``a`` and ``b`` differ."""
        diff = _diff(a, b)
        if diff and rule in self.rules:
            raise self.fail(rule, f"{what}: {diff}{hint}")

    def guard(self, during: str) -> None:
        """The global generators are as they were before the checker started."""
        if "global-rng" in self.rules and _global_rng_state() != self._rng_before:
            which = [
                m
                for m, a, b in zip(
                    ("random", "numpy.random"), _global_rng_state(), self._rng_before, strict=True
                )
                if a != b
            ]
            raise self.fail(
                "global-rng",
                f"the global {' and '.join(which)} state changed "
                f"while {during}; draw from the env's own seeded generator",
            )

    # ---------------------------------------------------------------- one step, checked

    def step(self, env: Any, text: Any, turns: dict[str, int] | None = None) -> None:
        """Step ``env`` with ``text`` (``None`` for a finished agent) and check the step."""
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
            return
        try:
            env.step(text)
        except Exception as exc:
            if "hostile-text" not in self.rules:
                raise
            raise self.fail(
                "hostile-text",
                f"step({_short(text)}) by {agent!r} raised {type(exc).__name__}: {exc}",
            ) from exc
        if "infos" in self.rules:
            self.check_infos(env, agent, turns)

    def check_infos(self, env: Any, agent: str, turns: dict[str, int] | None) -> None:
        problem = _infos_problem(env, agent, turns)
        if problem:
            raise self.fail("infos", problem)

    # ---------------------------------------------------------------- the actions it plays

    def text_for(self, env: Any, rng: np.random.Generator) -> str | None:
        """An action for ``env.agent_selection``: the oracle's, a random one, or hostile text."""
        agent = env.agent_selection
        if not env.agents or env.terminations[agent] or env.truncations[agent]:
            return None
        kind = int(rng.integers(5))
        if kind < 2 and hasattr(env, "oracle_action"):
            text = _optional(lambda: env.oracle_action(agent))
        elif kind < 4 and hasattr(env, "random_action"):
            text = _optional(lambda: env.random_action(rng, agent))
        else:
            text = None
        if text is None:
            text = _SHORT_HOSTILE[int(rng.integers(len(_SHORT_HOSTILE)))]
        return text


# -------------------------------------------------------------------- the rules

_INFO_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "team_reward": (lambda x: _is_real(x), "a finite number"),
    "local_reward": (lambda x: _is_real(x), "a finite number"),
    "success": (lambda x: isinstance(x, bool | np.bool_), "a bool"),
    "parsed": (lambda x: isinstance(x, bool | np.bool_), "a bool"),
    "reason": (lambda x: isinstance(x, str), "a str"),
    "turn": (
        lambda x: isinstance(x, int | np.integer) and not isinstance(x, bool) and bool(x >= 0),
        "an int >= 0",
    ),
}


def _infos_problem(env: Any, agent: str, turns: dict[str, int] | None) -> str | None:
    """What is wrong with ``agent``'s infos and reward right after its step, or ``None``.

    ``turns`` holds each agent's last ``turn`` in this episode (updated here), or is ``None``.
    """
    info = env.infos.get(agent)
    if not isinstance(info, dict):
        return f"infos[{agent!r}] after its step is {_short(info)}"
    missing = [k for k in _INFO_TYPES if k not in info]
    if missing:
        return f"infos[{agent!r}] after its step lacks {missing}"
    for key, (ok, what) in _INFO_TYPES.items():
        if not ok(info[key]):
            return f"infos[{agent!r}][{key!r}] = {_short(info[key])}, not {what}"
    if not info["parsed"] and not info["reason"]:
        return f"infos[{agent!r}]: parsed is False and reason is empty (say why)"
    if turns is not None:
        if info["turn"] < turns.get(agent, 0):
            return f"infos[{agent!r}]['turn'] went back from {turns[agent]} to {info['turn']}"
        turns[agent] = int(info["turn"])
    alpha = getattr(env, "alpha", None)
    if not _is_real(alpha):
        return f"env.alpha is {_short(alpha)}; expose the weight alpha of r = alpha * team + local"
    team, local, reward = info["team_reward"], info["local_reward"], env.rewards.get(agent)
    want = alpha * team + local
    if not _is_real(reward) or not math.isclose(reward, want, rel_tol=1e-9, abs_tol=1e-9):
        return (
            f"rewards[{agent!r}] = {_short(reward)}, but alpha * team_reward + local_reward = "
            f"{alpha!r} * {team!r} + {local!r} = {want!r}"
        )
    if "reward" in info and info["reward"] != reward:
        return f"infos[{agent!r}]['reward'] = {info['reward']!r}, rewards[{agent!r}] = {reward!r}"
    return None


def _check_action_types(ctx: _Checker, env: Any, seed: int) -> None:
    env.reset(seed=seed)
    for bad in BAD_ACTIONS:
        before = observable_state(env)
        try:
            env.step(bad)
        except TypeError as exc:
            if not _says_str(str(exc)):
                raise ctx.fail(
                    "action-type",
                    f"step({bad!r}) raised TypeError({str(exc)!r}), "
                    "which does not say that a str was expected",
                ) from exc
        except Exception as exc:
            raise ctx.fail(
                "action-type", f"step({bad!r}) raised {type(exc).__name__}: {exc}, not TypeError"
            ) from exc
        else:
            raise ctx.fail(
                "action-type",
                f"step({bad!r}) accepted a {type(bad).__name__} "
                "action; raise TypeError saying a str was expected",
            )
        what = f"the rejected step({bad!r}) changed the env"
        ctx.same("action-type", before, observable_state(env), what)


def _check_hostile_text(ctx: _Checker, env: Any, seed: int, texts: Iterable[str]) -> None:
    for text in texts:
        env.reset(seed=seed)
        # Every agent writes it in turn: each may have its own parser, and a later agent's
        # prompt may echo what an earlier one wrote.
        for agent in list(env.possible_agents):
            if not env.agents or env.agent_selection != agent:
                break
            if env.terminations[agent] or env.truncations[agent]:
                break
            ctx.step(env, text)
            info = env.infos[agent]
            local = info.get("local_reward")
            if info.get("parsed") is False and not (_is_real(local) and local < 0):
                raise ctx.fail(
                    "hostile-text",
                    f"{_short(text)} by {agent!r} did not parse but "
                    f"got local reward {local!r}; text that does not parse gets a "
                    "format penalty (< 0)",
                )
            for a in env.agents:
                obs = env.observe(a)
                space = env.observation_space(a)
                if not space.contains(obs):
                    raise ctx.fail(
                        "hostile-text",
                        f"after {_short(text)} by {agent!r}, the observation of {a!r} is outside "
                        f"its space: {_outside(space, obs)}",
                    )


def _check_clone(ctx: _Checker, env: Any, seed: int, episodes: int, max_steps: int) -> None:
    if not callable(getattr(env, "clone", None)):
        raise ctx.fail("clone-exact", "the env has no clone() method")
    exact, independent = "clone-exact" in ctx.rules, "clone-independent" in ctx.rules
    for episode in range(episodes):
        env.reset(seed=seed + 1000 + episode)
        turns: dict[str, int] = {}
        for step in range(max_steps + 1):
            where = f"at step {step} of episode {episode}"
            twin = _exact_clone(ctx, env, where) if exact else env.clone()
            if independent and (step % 4 == 0 or not env.agents):
                _check_independent(ctx, env, where)
            if not env.agents:
                break
            text = ctx.text_for(env, ctx.rng)
            ctx.step(env, text, turns)
            ctx.step(twin, text)
            what = f"step({_short(text)}) on an env and on its clone made {where} differ"
            ctx.same("clone-exact", observable_state(env), observable_state(twin), what)
        # The generator: the next unseeded reset of a clone draws what its env draws ...
        twin = env.clone()
        env.reset()
        twin.reset()
        what = f"after episode {episode}, an unseeded reset() of an env and of its clone differ"
        hint = "; clone the generator too"
        ctx.same("clone-exact", observable_state(env), observable_state(twin), what, hint)
        # ... and resetting one clone does not advance another's generator.
        ref, other = env.clone(), env.clone()
        other.reset()
        other.reset()
        env.reset()
        ref.reset()
        what = "unseeded resets of a clone changed what its env's next reset() draws"
        hint = "; the clones share a generator"
        ctx.same("clone-independent", observable_state(env), observable_state(ref), what, hint)


def _exact_clone(ctx: _Checker, env: Any, where: str) -> Any:
    state = observable_state(env)
    twin = env.clone()
    if type(twin) is not type(env):
        raise ctx.fail(
            "clone-exact", f"clone() returned a {type(twin).__name__}, not a {type(env).__name__}"
        )
    ctx.same("clone-exact", state, observable_state(twin), f"a clone made {where} differs")
    return twin


def _check_independent(ctx: _Checker, env: Any, where: str) -> None:
    """Play a clone on (and reset it): its env must not move; and the other way round."""
    parent = env.clone()
    pairs = (
        (env.clone(), env, "a clone", "its env"),
        (parent, parent.clone(), "an env", "its clone"),
    )
    for moved, still, who, other in pairs:
        before = observable_state(still)
        rng = np.random.default_rng(int(ctx.rng.integers(2**32)))
        for _ in range(4):
            if not moved.agents:
                break
            ctx.step(moved, ctx.text_for(moved, rng))
        moved.reset()
        what = f"stepping and resetting {who} (cloned {where}) changed {other}"
        ctx.same("clone-independent", before, observable_state(still), what)


def _check_seeding(
    ctx: _Checker,
    env_fn: Callable[..., Any],
    seed: int,
    episodes: int,
    max_steps: int,
    content_key: Callable[[Any], Hashable],
) -> None:
    a, b = env_fn(), env_fn()
    ids = a.task_ids() if callable(getattr(a, "task_ids", None)) else ()
    task_id = ids[int(ctx.rng.integers(len(ids)))] if len(ids) else None
    for episode in range(episodes):
        s = seed + 2000 + episode
        kwargs: dict[str, Any] = {"seed": s}
        if episode % 2 and task_id is not None:  # every other episode on a chosen task
            kwargs["options"] = {"task_id": task_id}
        how = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        a.reset(**kwargs)
        start = observable_state(a)
        texts: list[Any] = []
        rng = np.random.default_rng(s)
        for _ in range(max_steps):
            if not a.agents:
                break
            texts.append(ctx.text_for(a, rng))
            ctx.step(a, texts[-1])
        end = observable_state(a)
        for env, what in ((b, "a second env"), (a, "the same env again")):
            env.reset(**kwargs)
            started = f"reset({how}) of {what} started another episode"
            ctx.same("seeding", start, observable_state(env), started)
            for text in texts:
                ctx.step(env, text)
            ended = f"after reset({how}) and the same {len(texts)} actions, {what} differs"
            ctx.same("seeding", end, observable_state(env), ended)
    if task_id is not None:
        # A chosen task does not depend on the env's generator (trainers choose tasks so).
        fresh = env_fn()
        fresh.reset(options={"task_id": task_id})
        a.reset(options={"task_id": task_id})
        if content_key(fresh) != content_key(a):
            raise ctx.fail(
                "seeding",
                f"reset(options={{'task_id': {task_id!r}}}) served one task on a fresh env and "
                "another on an env that had played before: a chosen task must not depend on the "
                "env's generator",
            )


def _check_splits(
    ctx: _Checker,
    env_fn: Callable[..., Any],
    seed: int,
    n_tasks: int,
    n_draws: int,
    content_key: Callable[[Any], Hashable],
) -> None:
    envs = {}
    for split in SPLITS:
        try:
            envs[split] = env_fn(split=split)
        except TypeError as exc:
            raise ctx.fail(
                "splits",
                f"env_fn(split={split!r}) raised TypeError: {exc}; env_fn must accept split=",
            ) from exc
    if not callable(getattr(envs["train"], "task_ids", None)):
        raise ctx.fail("splits", "the env has no task_ids(split) method")
    ids = {split: envs["train"].task_ids(split) for split in SPLITS}
    lookup = {split: _lookup(v) for split, v in ids.items()}
    for i, early in enumerate(SPLITS):
        for late in SPLITS[i + 1 :]:
            shared = _shared_id(ids[early], lookup[late], ids[late], lookup[early])
            if shared is not None:
                raise ctx.fail("splits", f"task id {shared!r} is in both {early!r} and {late!r}")
    held: dict[str, dict[Hashable, Any]] = {}
    for split in SPLITS[1:]:
        env, contents = envs[split], dict[Hashable, Any]()
        for task_id in _first(ids[split], n_tasks):
            env.reset(options={"task_id": task_id})
            contents.setdefault(content_key(env), task_id)
        held[split] = contents
    for split in SPLITS:
        env, later, n = envs[split], SPLITS[SPLITS.index(split) + 1 :], len(ids[split])
        # A task is chosen by seed (reset's own draw) or by id (as trainers and evaluations do).
        resets: list[tuple[str, dict[str, Any]]] = [
            (f"reset(seed={s})", {"seed": s}) for s in range(seed + 3000, seed + 3000 + n_draws)
        ]
        for i in ctx.rng.integers(n, size=n_draws if n else 0):
            task_id = ids[split][int(i)]
            resets.append(
                (f"reset(options={{'task_id': {task_id!r}}})", {"options": {"task_id": task_id}})
            )
        for how, kwargs in resets:
            env.reset(**kwargs)
            served = getattr(env, "task_id", None)
            if served is not None and served not in lookup[split]:
                raise ctx.fail(
                    "splits",
                    f"{how} of split {split!r} served task {served!r}, which is not one of "
                    f"task_ids({split!r})",
                )
            key = content_key(env)
            for late in later:
                if key in held[late]:
                    raise ctx.fail(
                        "splits",
                        f"{how} of split {split!r} served task {served!r}, whose content is "
                        f"that of {late!r} task {held[late][key]!r}",
                    )


# -------------------------------------------------------------------- helpers


def _name_of(env: Any, name: str | None) -> str:
    if name:
        return name
    meta = getattr(env, "metadata", None) or {}
    cls = type(getattr(env, "unwrapped", env)).__name__
    return f"{meta['name']} ({cls})" if meta.get("name") else cls


def _global_rng_state() -> tuple[Any, Any]:
    kind, keys, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    return random.getstate(), (kind, np.asarray(keys).tobytes(), pos, has_gauss, gauss)


def _says_str(message: str) -> bool:
    return re.search(r"\bstr\b", message) is not None


def _optional(call: Callable[[], str]) -> str | None:
    """The reference action, or ``None`` where the env has none (or none for this task)."""
    try:
        return call()
    except (NotImplementedError, NoOracleError):
        return None


def _is_real(x: Any) -> bool:
    return (
        isinstance(x, int | float | np.integer | np.floating)
        and not isinstance(x, bool)
        and math.isfinite(x)
    )


def _short(x: Any, limit: int = 80) -> str:
    text = repr(x)
    return (
        text if len(text) <= limit else f"{text[: limit - 20]}...{text[-12:]} ({len(text)} chars)"
    )


def _outside(space: Any, obs: Any, path: str = "observation") -> str:
    """What of ``obs`` is outside ``space``: the key, and for text the first bad character."""
    if isinstance(space, spaces.Dict) and isinstance(obs, dict):
        for key, sub in space.spaces.items():
            if key not in obs:
                return f"{path} lacks {key!r}"
            if not sub.contains(obs[key]):
                return _outside(sub, obs[key], f"{path}[{key!r}]")
    if isinstance(space, spaces.Text) and isinstance(obs, str):
        if not space.min_length <= len(obs) <= space.max_length:
            allowed = f"{space.min_length} to {space.max_length}"
            return f"{path} has {len(obs)} characters, the space allows {allowed}"
        bad = next((c for c in obs if c not in space.character_set), None)
        if bad is not None:
            return (
                f"{path} holds {bad!r}, a character outside the space's charset (clean echoed text)"
            )
    return f"{path} = {_short(obs)}"


def _freeze(x: Any) -> Hashable:
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, list | tuple):
        return tuple(_freeze(v) for v in x)
    if isinstance(x, np.ndarray):
        return (x.dtype.str, x.shape, x.tobytes())
    return x


def _diff(a: Any, b: Any, path: str = "state") -> str | None:
    """Where ``a`` and ``b`` first differ (``None`` when equal), e.g. ``infos['tool']['turn']``."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path} has keys {sorted(map(str, a))} != {sorted(map(str, b))}"
        for k in a:
            d = _diff(a[k], b[k], f"{path}[{k!r}]" if path != "state" else str(k))
            if d:
                return d
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and type(a) is type(b):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = _diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        same = np.array_equal(np.asarray(a), np.asarray(b))
    elif isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        same = True
    else:
        same = type(a) is type(b) and a == b
    return None if same else f"{path}: {_short(a)} != {_short(b)}"


def _lookup(ids: Sequence[Any]) -> Collection[Any]:
    """A container answering ``id in it`` fast: ranges and lazy id lists answer it themselves."""
    return set(ids) if isinstance(ids, list | tuple) else ids


def _first(ids: Sequence[Any], n: int) -> list[Any]:
    return [ids[i] for i in range(min(n, len(ids)))]


def _shared_id(
    a: Sequence[Any], in_a: Collection[Any], b: Sequence[Any], in_b: Collection[Any]
) -> Any:
    """An id in both splits, or ``None``: ranges compared by their ends, others by membership of
    the smaller split's ids (all of them up to :data:`_MAX_ID_CHECKS`, else that many, spread)."""
    if isinstance(a, range) and isinstance(b, range) and a.step == b.step == 1:
        lo, hi = max(a.start, b.start), min(a.stop, b.stop)
        return lo if lo < hi else None
    small, other = (a, in_a) if len(a) <= len(b) else (b, in_b)
    for i in range(0, len(small), max(1, len(small) // _MAX_ID_CHECKS)):
        if small[i] in other:
            return small[i]
    return None


_MAX_ID_CHECKS = 5000
"""Ids of a split (not a range) that are looked up in another split to find a shared id."""
