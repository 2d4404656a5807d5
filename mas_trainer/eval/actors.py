"""Actors: what answers a batch of pending actions in an evaluation, and the one resolver of the
``--policy`` strings that ``mas-eval`` (both forms) and ``mas-leaderboard verify`` take.

Names: a *policy* is what an agent answers with (``mas_envs.policies``: ``(env, agent) -> text``;
``mas_trainer.policy``: the model, engine and learner of one trained policy; here: the thing a
``--policy`` string names); an *actor* plays a policy in batches, for the evaluation loop.

An :data:`Actor` answers a batch of pending actions (one per live episode) with one text each; the
play loop (:func:`mas_trainer.eval.play.play`) calls it once per lockstep step. Actors:

* :func:`reference_actor`: ``oracle`` (the env's solver) or ``random`` (well-formed random
  answers, one seeded generator per episode index, so a board's draws never depend on another's);
* :func:`engine_actor`: token-in/token-out engines (transformers, vLLM, the OpenAI client's token
  mode), one batched ``generate`` call per policy;
* :func:`chat_actor`: chat messages to an OpenAI-compatible chat endpoint, text back.

:func:`resolve_policy` turns a policy string into an actor with the metadata a result file
records about it. Policy strings: ``random``, ``oracle``, a model folder or hub id,
``tiny:<preset>``, a ``mas-train`` run folder or one of its checkpoints (each role played by the
policy that trained it), one policy's folder inside a checkpoint (a plain model folder), or
``openai:<served model>``. Model policies decode greedily: a score must be reproducible.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mas_envs.base import NoOracleError, TextEnv
from mas_trainer.engines import SamplingParams
from mas_trainer.outputs import find_run

__all__ = [
    "REFERENCE_POLICIES",
    "Actor",
    "Item",
    "PolicySetup",
    "chat_actor",
    "default_max_new_tokens",
    "engine_actor",
    "greedy",
    "parse_role_map",
    "reference_actor",
    "resolve_policy",
    "weights_hash",
]

Item = tuple[int, Any, str, dict[str, str]]
"""One pending action: (episode index, env, agent, observation)."""

Actor = Callable[[list[Item]], list[str]]
"""Answers a batch of pending actions (one per live episode) with one text each."""

REFERENCE_POLICIES = ("random", "oracle")

FALLBACK_MAX_NEW_TOKENS = {"tiny": 64, "chat": 2048}
"""Token limit per turn when neither a run nor a preset decides it: ``tiny:`` models (the old
default) and every other model (a chat model's answer; the GPU presets' value)."""


def greedy(max_new_tokens: int) -> SamplingParams:
    """The sampling settings of every evaluation: greedy, ``max_new_tokens`` per agent turn."""
    return SamplingParams(greedy=True, temperature=0.0, max_tokens=max_new_tokens)


def reference_actor(kind: str, seed: int) -> Actor:
    """``oracle`` (the solver) or ``random`` (one generator per episode, seeded by its index)."""
    rngs: dict[int, np.random.Generator] = {}

    def oracle(env: TextEnv, agent: str) -> str:
        try:
            return env.oracle_action(agent)
        except NoOracleError:
            # The task has no answer for this agent that hidden data does not give away (a code
            # tester without a public example): it passes its turn with an empty answer, and the
            # episode is scored on what the other agents' answers earn.
            return ""

    def act(items: list[Item]) -> list[str]:
        if kind == "oracle":
            return [oracle(env, agent) for _, env, agent, _ in items]
        out = []
        for i, env, agent, _ in items:
            rng = rngs.setdefault(i, np.random.default_rng([seed, i]))
            out.append(env.random_action(rng, agent))
        return out

    return act


def engine_actor(
    engines: Mapping[str, Any],
    tokenizer: Any,
    policy_of: Mapping[str, str],
    params: SamplingParams,
    *,
    system_message: bool,
    seed: int = 0,
    enable_thinking: bool | None = False,
) -> Actor:
    """Token-in/token-out engines, one ``generate`` call per policy (in order of first appearance
    among the pending actions), prompts in episode order. ``tokenizer`` is shared, or one per
    policy name (a team of different base models: each policy's prompts in its own tokens);
    ``enable_thinking`` goes to the chat template (off: the paper's setting, as in training;
    None: the template's default)."""
    from mas_trainer.rollout import encode_prompt, policy_tokenizers

    tokenizers = policy_tokenizers(tokenizer, policy_of.values())

    def act(items: list[Item]) -> list[str]:
        out = [""] * len(items)
        by_policy: dict[str, list[int]] = {}
        for j, (_, _, agent, _) in enumerate(items):
            by_policy.setdefault(policy_of[agent], []).append(j)
        for policy, rows in by_policy.items():
            tok = tokenizers[policy]
            prompts = [
                encode_prompt(
                    tok, items[j][3], system=system_message, enable_thinking=enable_thinking
                )
                for j in rows
            ]
            comps = engines[policy].generate(prompts, params, seed=seed)
            for j, c in zip(rows, comps, strict=True):
                out[j] = tok.decode(c.token_ids, skip_special_tokens=True)
        return out

    return act


def chat_actor(
    engine: Any,
    params: SamplingParams,
    *,
    system_message: bool,
    seed: int,
    enable_thinking: bool | None = False,
) -> Actor:
    """Text mode: chat messages to an OpenAI-compatible chat endpoint, text back; the server's
    chat template gets ``enable_thinking`` (None: its own default)."""

    def act(items: list[Item]) -> list[str]:
        convs = []
        for _, _, _, obs in items:
            msgs = [{"role": "user", "content": obs["prompt"]}]
            if system_message:
                msgs.insert(0, {"role": "system", "content": obs["system"]})
            convs.append(msgs)
        return engine.chat(convs, params, seed=seed, enable_thinking=enable_thinking)

    return act


def parse_role_map(items: Sequence[str]) -> dict[str, str]:
    """``["tool=planner"]`` -> ``{"tool": "planner"}``: ``tool`` plays with ``planner``'s policy."""
    out = {}
    for item in items:
        role, eq, source = item.partition("=")
        if not eq or not role or not source:
            raise ValueError(
                f"--role-map expects ROLE=POLICY_ROLE, e.g. tool=planner; got {item!r}"
            )
        out[role.strip()] = source.strip()
    return out


def default_max_new_tokens(policy: str, env_ids: Sequence[str]) -> tuple[int, str]:
    """The token limit per agent turn when the command line gives none, and where it came from.

    In order: a ``mas-train`` run's ``rollout.max_new_tokens`` (the policy is a run, one of its
    checkpoints or a policy folder in one); else the largest among the presets that train one of
    ``env_ids`` with the same kind of model (``tiny:`` models: the tiny presets; any other model:
    the others); else :data:`FALLBACK_MAX_NEW_TOKENS`.
    """
    from mas_trainer.config import PRESETS

    ref = find_run(policy)
    if ref is not None:
        return int(ref.config["rollout"]["max_new_tokens"]), f"the run's config ({ref.run_dir})"
    tiny = policy.startswith("tiny:")
    matching = [
        (cfg.rollout.max_new_tokens, name)
        for name, cfg in PRESETS.items()
        if cfg.env.id in env_ids and cfg.model.name.startswith("tiny:") == tiny
    ]
    if matching:
        value, name = max(matching)
        return value, f"preset {name}"
    kind = "tiny" if tiny else "chat"
    return FALLBACK_MAX_NEW_TOKENS[kind], f"the default for {'tiny' if tiny else 'chat'} models"


@dataclass
class PolicySetup:
    """A ready policy and what a result file records about it.

    Attributes:
        act: The actor.
        info: ``spec`` (the policy string), ``kind`` (``random``, ``oracle``, ``model``, ``run``,
            ``openai``), ``seed``, ``policy_of`` (role -> policy name) and, for ``openai``,
            ``openai_mode``.
        model: Model id, revision, weight and chat-template hashes (None for reference policies).
        sampling: The decoding settings.
    """

    act: Actor
    info: dict[str, Any]
    model: dict[str, Any] | None
    sampling: dict[str, Any]


def resolve_policy(
    policy: str,
    roles: Sequence[str],
    *,
    max_new_tokens: int | None = None,
    seed: int = 0,
    system_message: bool = True,
    enable_thinking: bool | None = False,
    role_map: Mapping[str, str] | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    hash_weights: bool = True,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    openai_mode: str = "chat",
    tokenizer: str | None = None,
    timeout: float = 120.0,
    concurrency: int = 8,
) -> PolicySetup:
    """Build the actor of a policy string, with its metadata (model hashes, sampling).

    Args:
        policy: A policy string (see the module docstring).
        roles: The env's roles (a run must have a policy for each).
        max_new_tokens: Token limit per agent turn, needed by model policies
            (:func:`default_max_new_tokens` picks one).
        seed: Seed of the random policy and of ``tiny:<preset>`` initialisation.
        system_message: Send the env's system text as a system message.
        enable_thinking: The chat template's thinking switch (Qwen3's), for local templates and
            an ``openai:`` server's alike (``chat_template_kwargs`` in chat mode); False is the
            paper's and the presets' setting; None passes nothing (the template's default).
        role_map: ``{role: policy_role}``: play ``role`` with the policy that plays
            ``policy_role`` (the paper's swapped-roles ablation; trained policies only).
        device: torch device of local models.
        dtype: torch dtype name of local models.
        hash_weights: Record the SHA-256 of every policy's weights (leaderboards need it).
        base_url: OpenAI-compatible server (``openai:``); None: ``$OPENAI_BASE_URL``, else
            OpenAI's API (as the OpenAI client does).
        api_key_env: Environment variable holding the API key (``openai:``).
        openai_mode: ``"chat"`` (text in, text out: any chat endpoint) or ``"tokens"`` (token ids
            through the completions endpoint, as vLLM's server allows; needs ``tokenizer``).
        tokenizer: Local tokenizer folder for ``openai_mode="tokens"``.
        timeout: Per-request timeout in seconds (``openai:``).
        concurrency: Requests in flight at once (``openai:``).

    Raises:
        ValueError: A bad combination (``role_map`` with a reference policy, a role the policy
            cannot play, ...).
        FileNotFoundError: A model path or run checkpoint that does not exist.
        OpenAIError: The server failed (``openai:``).
    """
    roles = list(roles)
    if policy in REFERENCE_POLICIES:
        if role_map:
            raise ValueError("--role-map applies to trained policies, not to random/oracle")
        return PolicySetup(
            reference_actor(policy, seed),
            {
                "spec": policy,
                "kind": policy,
                "seed": seed,
                "policy_of": dict.fromkeys(roles, policy),
            },
            None,
            {"greedy": policy == "oracle", "seed": seed},
        )
    if max_new_tokens is None:
        raise ValueError(f"policy {policy!r} needs max_new_tokens (default_max_new_tokens)")
    params = greedy(max_new_tokens)
    sampling = {
        "greedy": True,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": max_new_tokens,
        "system_message": system_message,
        "enable_thinking": enable_thinking,
        "seed": seed,
    }
    if policy.startswith("openai:"):
        return _openai_policy(
            policy,
            roles,
            params,
            sampling,
            role_map=role_map,
            seed=seed,
            system_message=system_message,
            enable_thinking=enable_thinking,
            base_url=base_url,
            api_key_env=api_key_env,
            openai_mode=openai_mode,
            tokenizer=tokenizer,
            timeout=timeout,
            concurrency=concurrency,
        )
    engines, tok, policy_of, kind = _local_engines(policy, device=device, dtype=dtype, seed=seed)
    policy_of = _play_roles(policy, roles, policy_of, role_map)
    model = {
        "id": policy,
        "revision": _revision(policy),
        "weights_sha256": {
            name: weights_hash(e.model, name if kind == "run" else None)
            for name, e in engines.items()
        }
        if hash_weights
        else None,
        "chat_template_sha256": _templates_hash(tok),
        "dtype": dtype,
        "device": device,
    }
    info = {"spec": policy, "kind": kind, "seed": seed, "policy_of": policy_of}
    act = engine_actor(
        engines, tok, policy_of, params, system_message=system_message, seed=seed,
        enable_thinking=enable_thinking,
    )  # fmt: skip
    return PolicySetup(act, info, model, sampling)


def _templates_hash(tokenizer: Any) -> str | None:
    """The chat template's hash; a run whose policies have their own tokenizers: of them all."""
    toks = tokenizer.values() if isinstance(tokenizer, Mapping) else [tokenizer]
    return _text_hash("\n".join(sorted({t.chat_template or "" for t in toks})) or None)


def _local_engines(
    policy: str, *, device: str, dtype: str, seed: int
) -> tuple[dict[str, Any], Any, dict[str, str], str]:
    """Engines of a local policy: every policy of a run checkpoint, or one model for all roles."""
    import torch

    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.models import load_model
    from mas_trainer.policy import load_checkpoint_engines

    torch_dtype = getattr(torch, dtype)
    ref = find_run(policy)
    if ref is not None and ref.policy is None:  # a run folder or one of its checkpoints
        if ref.checkpoint is None:
            raise FileNotFoundError(
                f"run folder {policy!r} has no checkpoint yet (checkpoints/latest is missing); "
                "evaluate it after mas-train saved one"
            )
        engines, tok, policy_of = load_checkpoint_engines(
            ref.checkpoint, device=device, dtype=torch_dtype
        )
        return engines, tok, policy_of, "run"
    # A model folder (one policy's folder of a checkpoint is one), a hub id or tiny:<preset>.
    model, tok = load_model(policy, device=device, dtype=torch_dtype, seed=seed)
    return {"shared": TransformersEngine(model, tok)}, tok, {}, "model"


def _play_roles(
    policy: str,
    roles: list[str],
    policy_of: Mapping[str, str],
    role_map: Mapping[str, str] | None,
) -> dict[str, str]:
    """Role -> policy name for this env: one model plays all, a run's roles their own policies
    (``role_map`` remapping them)."""
    if not policy_of:  # one model plays every role
        if role_map:
            raise ValueError(
                "--role-map needs a mas-train run or checkpoint with a policy per role; "
                f"{policy!r} is one model that plays every role"
            )
        return dict.fromkeys(roles, "shared")
    missing = sorted(set(roles) - set(policy_of) - set(role_map or {}))
    if missing:
        raise ValueError(f"policy {policy!r} has no policy for roles {missing} of this env")
    for role, source in (role_map or {}).items():
        if role not in roles or source not in policy_of:
            raise ValueError(
                f"--role-map {role}={source}: both sides must be roles of this env {roles}"
            )
    return {r: policy_of[(role_map or {}).get(r, r)] for r in roles}


def _openai_policy(
    policy: str,
    roles: list[str],
    params: SamplingParams,
    sampling: dict[str, Any],
    *,
    role_map: Mapping[str, str] | None,
    seed: int,
    system_message: bool,
    enable_thinking: bool | None,
    base_url: str | None,
    api_key_env: str,
    openai_mode: str,
    tokenizer: str | None,
    timeout: float,
    concurrency: int,
) -> PolicySetup:
    from mas_trainer.engines.openai import OpenAIEngine

    if openai_mode not in ("chat", "tokens"):
        raise ValueError(f"openai_mode must be 'chat' or 'tokens', got {openai_mode!r}")
    if openai_mode == "tokens" and not tokenizer:
        raise ValueError("openai_mode='tokens' needs --tokenizer PATH (the served model's)")
    if role_map:
        raise ValueError("--role-map applies to mas-train runs; an openai: model plays every role")
    engine = OpenAIEngine(
        base_url,
        policy.split(":", 1)[1],
        api_key_env=api_key_env,
        timeout=timeout,
        concurrency=concurrency,
    )
    served = engine.model_info()
    model = {"id": engine.model, "revision": served.get("root"), "served_by": engine.base_url}
    shared = dict.fromkeys(roles, "shared")
    info = {
        "spec": policy,
        "kind": "openai",
        "openai_mode": openai_mode,
        "seed": seed,
        "policy_of": shared,
    }
    if openai_mode == "chat":
        model.update(weights_sha256=None, chat_template_sha256=None)
        act = chat_actor(
            engine, params, system_message=system_message, seed=seed,
            enable_thinking=enable_thinking,
        )  # fmt: skip
        return PolicySetup(act, info, model, sampling)
    from mas_trainer.models import load_tokenizer

    served_tok = load_tokenizer(tokenizer or "")
    model.update(weights_sha256=None, chat_template_sha256=_text_hash(served_tok.chat_template))
    act = engine_actor(
        {"shared": engine}, served_tok, shared, params, system_message=system_message, seed=seed,
        enable_thinking=enable_thinking,
    )  # fmt: skip
    return PolicySetup(act, info, model, sampling)


def weights_hash(model: Any, adapter: str | None = None) -> str:
    """SHA-256 over a model's tensors (sorted names, raw bytes): identifies exact weights.

    For a LoRA model, ``adapter`` selects which adapter's tensors are hashed with the base's.
    """
    import torch

    h = hashlib.sha256()
    state = model.state_dict()
    for name in sorted(state):
        # Other adapters' tensors do not change this policy's outputs.
        if adapter and ".lora_" in name and f".{adapter}." not in name:
            continue
        t = state[name].detach().to("cpu").contiguous()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(t.view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _text_hash(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def _revision(policy: str) -> str | None:
    """The git commit of a hub snapshot folder (``.../snapshots/<sha>``), if the path is one."""
    m = re.search(r"snapshots/([0-9a-f]{40})", policy)
    return m.group(1) if m else None
