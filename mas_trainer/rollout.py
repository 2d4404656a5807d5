"""Tree rollouts (AT-GRPO; docs/algorithm.md) and the parallel-sampling baseline.

Tree mode: for every root env, at turn t, for the agent i whose move it is, the root is cloned K
times, K candidate texts are sampled from agent i's policy, each clone is stepped with one
candidate and agent i's immediate reward ``env.rewards[i]`` is read right away. All K candidates
become :class:`~mas_trainer.samples.TrainSample` s with the group key ``(root uid, t, i)``: the K
samples of a key saw the exact same prompt, so their rewards are comparable. The root then
continues from the best clone (argmax reward; ties: the first, or a seeded random pick), whose
whole state (termination included) replaces it. Cost per root: K x agents x turns generations.

Parallel mode (the paper's "parallel sampling" baseline): K independent episodes per task, one
sample per (episode, turn, agent). A group of one sample carries no signal, so samples are grouped
by ``(task uid, turn, agent)`` across the K episodes; unlike the tree, their histories differ after
the first move, which is exactly why the tree's groups are better. ``parallel-prompt`` is the same
sampling with GRPO's own rule for groups: only samples whose prompts are identical (token for
token) share a group, so a group never compares answers to different questions, and once the
histories part the groups shrink (a group of one carries no signal).

Single-agent mode is not a mode here: an env made with ``mode="single"`` has one role, and the same
code runs it.

Generation is batched: at each (turn, agent) step every live root's K candidates of one policy go
to the engine in a single ``generate`` call. Everything else (prompt encoding, decoding, clones,
env steps) is bookkeeping whose share of the time :class:`RolloutResult` reports.

Cohorts (``rollout.cohorts``): the roots can be split into cohorts that each play in a thread of
their own, so that while one cohort waits on one policy's engine another generates with another
policy's engine (per-role engines in processes of their own, or Ray actors, on separate GPUs) or
steps its envs (the code envs' sandboxed programs run while engines generate). Each cohort seeds
and batches its own generate calls: the samples depend on the number of cohorts, not on timing.

Prefetch: an env whose class has ``prefetch(texts, agent)`` (the code-running envs: Code, Math and
the ``*Code`` games) gets the K texts of one state before they are stepped, so it can run their K
programs in one pooled sandbox call and fill the cache its clones share; the K steps then only read
that cache. In tree mode that is each root's K candidates; in parallel mode, the texts of the
episodes of one task whose agent sees the same prompt (they start as clones of one env, so share
its cache). Prefetching never changes a result (the cache is keyed by program and input), only
when the programs run.
"""

from __future__ import annotations

import hashlib
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mas_envs.base import TextEnv
from mas_envs.registry import entry, load_entry_point, make
from mas_trainer.samples import TrainSample

__all__ = [
    "MODES",
    "Episode",
    "RolloutResult",
    "Tokenizers",
    "TreeRollout",
    "encode_prompt",
    "env_factory",
    "episode_ended",
    "policy_tokenizers",
    "prefetch_texts",
]


MODES = ("tree", "parallel", "parallel-prompt")
"""Rollout modes: AT-GRPO's tree, and the parallel-sampling baseline with two group rules."""


def env_factory(env_id: str, **kwargs: Any) -> Callable[[], TextEnv]:
    """A factory of fresh envs: ``env_id`` is a registered id or ``package.module:Class``.

    The entry-point form runs any ``TextEnv`` subclass of your own through the trainer and
    ``mas-eval`` without registering it (loaded by :func:`mas_envs.registry.load_entry_point`,
    as the registry loads its own ids). One env is made at once, so a bad id or option fails here.

    Raises:
        KeyError: An unknown registered id (with a did-you-mean).
        ValueError: The env rejected ``kwargs`` (an unknown option).
    """
    if ":" in env_id and not env_id.startswith("mas/"):
        env_cls = load_entry_point(env_id)

        def make_env() -> TextEnv:
            return env_cls(**kwargs)

    else:
        entry(env_id)  # an unknown id fails here, with a did-you-mean

        def make_env() -> TextEnv:
            return make(env_id, **kwargs)

    try:
        make_env()
    except TypeError as err:  # an unknown env option
        raise ValueError(f"env {env_id!r} rejected its options {kwargs}: {err}") from err
    return make_env


class _Tokenizer(Protocol):
    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...
    def decode(self, token_ids: Any, **kwargs: Any) -> str: ...


Tokenizers = _Tokenizer | Mapping[str, _Tokenizer]
"""One tokenizer shared by every policy, or one per policy name (a team of different models)."""


def policy_tokenizers(tokenizers: Tokenizers, policies: Iterable[str]) -> dict[str, _Tokenizer]:
    """``{policy: tokenizer}`` for ``policies``: a shared tokenizer for each, or the mapping's own.

    Raises:
        KeyError: the mapping lacks a tokenizer for one of ``policies``.
    """
    names = sorted(set(policies))
    if not isinstance(tokenizers, Mapping):
        return dict.fromkeys(names, tokenizers)
    missing = [n for n in names if n not in tokenizers]
    if missing:
        raise KeyError(f"no tokenizer for policies {missing} (have {sorted(tokenizers)})")
    return {n: tokenizers[n] for n in names}


def encode_prompt(
    tokenizer: _Tokenizer,
    observation: Mapping[str, str],
    *,
    system: bool = True,
    enable_thinking: bool | None = False,
) -> list[int]:
    """Chat-format one agent observation (system text + user prompt) into prompt token ids.

    Each (agent, turn) call is one single-turn chat, as in the paper: the env writes the history
    the agent needs into its prompt. ``system=False`` leaves the system message out.
    ``enable_thinking`` goes to the chat template (``rollout.enable_thinking``): Qwen3's opens a
    thinking block unless it is false (then the prompt ends with an empty one); templates
    without the switch ignore it. None passes nothing (the template's own default).
    """
    messages = [{"role": "user", "content": observation["prompt"]}]
    if system:
        messages.insert(0, {"role": "system", "content": observation["system"]})
    switch = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    ids = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, **switch
    )
    if isinstance(ids, Mapping) or hasattr(
        ids, "input_ids"
    ):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


@dataclass
class Episode:
    """One played episode (the path of chosen branches).

    Attributes:
        uid: The root's uid (``<task uid>/<c>`` for the K episodes of a task in parallel modes).
        task_id: The env's task id.
        success: Solved at the end.
        turns: Turns played.
        returns: Sum of the chosen branches' rewards per role.
        format_errors: Chosen actions that did not parse.
        transcript: ``{"turn", "agent", "prompt", "action", "reward", "reason"}`` per chosen step,
            when the rollout keeps transcripts.
    """

    uid: str
    task_id: Any
    success: bool = False
    turns: int = 0
    returns: dict[str, float] = field(default_factory=dict)
    format_errors: int = 0
    transcript: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RolloutResult:
    """Samples and episode summaries of one rollout, with timing.

    Attributes:
        samples: Every candidate of every (root, turn, agent), in generation order.
        episodes: One per root (tree) or per independent episode (parallel modes).
        gen_seconds: Time inside ``engine.generate`` (summed over cohorts that overlap).
        total_seconds: Wall time of the whole rollout.
        gen_tokens: Completion tokens generated.
    """

    samples: list[TrainSample]
    episodes: list[Episode]
    gen_seconds: float
    total_seconds: float
    gen_tokens: int

    @property
    def other_share(self) -> float:
        """Share of rollout time spent outside generation (env, clones, encoding, bookkeeping)."""
        if self.total_seconds <= 0:
            return 0.0
        return max(0.0, self.total_seconds - self.gen_seconds) / self.total_seconds

    def metrics(self, roles: Sequence[str]) -> dict[str, float]:
        """The ``rollout/*`` and ``perf/*`` metrics of this rollout (mean reward and chosen-path
        return per role)."""
        eps = self.episodes
        m = {
            "rollout/success": float(np.mean([e.success for e in eps])),
            "rollout/turns_mean": float(np.mean([e.turns for e in eps])),
            "rollout/samples": float(len(self.samples)),
            "rollout/format_error_rate": float(
                np.mean([not s.info.get("parsed", True) for s in self.samples])
            ),
            "perf/tokens_per_s": self.gen_tokens / max(self.gen_seconds, 1e-9),
            "perf/gen_tokens": float(self.gen_tokens),
            "perf/gen_s": self.gen_seconds,
            "perf/rollout_s": self.total_seconds,
            "perf/rollout_other_share": self.other_share,
        }
        for role in roles:
            rewards = [s.reward for s in self.samples if s.role == role]
            if rewards:
                m[f"rollout/reward/{role}"] = float(np.mean(rewards))
            m[f"rollout/return/{role}"] = float(np.mean([e.returns.get(role, 0.0) for e in eps]))
        return m


@dataclass
class _Lane:
    env: TextEnv
    group_uid: str
    episode: Episode


@dataclass
class _Played:
    """What one cohort's play produced (:meth:`TreeRollout._play`)."""

    samples: list[TrainSample] = field(default_factory=list)
    gen_seconds: float = 0.0
    gen_tokens: int = 0


class TreeRollout:
    """Plays batches of episodes with one engine per policy and returns AT-GRPO samples.

    Args:
        make_env: Builds a fresh env (same id, mode, difficulty) for each root.
        engines: The generation engine of each policy name.
        tokenizer: Chat template and decoder: one shared by the policies, or one per policy name
            (each policy's prompts are encoded and its completions decoded by its own).
        policy_of: The policy name that plays each role (e.g. ``{"tool": "shared", ...}``).
        k: Candidates per (turn, agent) (tree) or episodes per task (parallel modes).
        params: Sampling settings (``mas_trainer.engines.SamplingParams``).
        mode: ``"tree"``, ``"parallel"`` (groups ``(task, turn, agent)``) or ``"parallel-prompt"``
            (groups ``(task, turn, agent, prompt)``: only identical prompts are compared).
        tie_break: ``"first"`` or ``"random"``: which best-reward branch a root continues from.
        seed: Seeds tie breaks and the engines' sampling.
        keep_transcripts: Record prompt and action texts of the chosen path in each
            :class:`Episode`.
        system_message: Send the env's system text as a system message (see
            :func:`encode_prompt`).
        enable_thinking: The chat template's thinking switch (see :func:`encode_prompt`).
        prefetch: Hand the texts about to be stepped from one state to the env's ``prefetch``
            when its class has one (see the module docstring). ``False`` steps without it; the
            results are the same (for benchmarks and tests).
        cohorts: Play the roots in this many cohorts, each in a thread of its own (see
            :meth:`run`): one cohort's generation overlaps another's generation with another
            engine, or its env steps (``rollout.cohorts``). Engines called from two cohorts at
            once must allow it (engine processes, Ray actors, HTTP; not a transformers engine
            on the learner's model).
    """

    def __init__(
        self,
        make_env: Callable[[], TextEnv],
        engines: Mapping[str, Any],
        tokenizer: Tokenizers,
        policy_of: Mapping[str, str],
        *,
        k: int,
        params: Any,
        mode: str = "tree",
        tie_break: str = "first",
        seed: int = 0,
        keep_transcripts: bool = False,
        system_message: bool = True,
        prefetch: bool = True,
        enable_thinking: bool = False,
        cohorts: int = 1,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown rollout mode {mode!r}; choose one of {', '.join(MODES)}")
        if tie_break not in ("first", "random"):
            raise ValueError(f"unknown tie_break {tie_break!r}; choose 'first' or 'random'")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if cohorts < 1:
            raise ValueError(f"cohorts must be >= 1, got {cohorts}")
        missing = sorted({p for p in policy_of.values() if p not in engines})
        if missing:
            raise ValueError(f"policy_of names policies without an engine: {missing}")
        self.make_env = make_env
        self.engines = engines
        self.tokenizers = policy_tokenizers(tokenizer, policy_of.values())
        self.policy_of = dict(policy_of)
        self.k = k
        self.params = params
        self.mode = mode
        self.tie_break = tie_break
        self.keep_transcripts = keep_transcripts
        self.system_message = system_message
        self.enable_thinking = enable_thinking
        self.prefetch = prefetch
        self.cohorts = cohorts
        self.rng = np.random.default_rng(seed)

    def _start(self, task_ids: Sequence[Any], uid_prefix: str) -> list[_Lane]:
        lanes = []
        copies = 1 if self.mode == "tree" else self.k
        for n, task_id in enumerate(task_ids):
            env = self.make_env()
            env.reset(options={"task_id": task_id})
            group_uid = f"{uid_prefix}{n}"
            for c in range(copies):
                uid = group_uid if copies == 1 else f"{group_uid}/{c}"
                lane_env = env if c == copies - 1 else env.clone()
                returns = dict.fromkeys(env.possible_agents, 0.0)
                lanes.append(_Lane(lane_env, group_uid, Episode(uid, task_id, returns=returns)))
        return lanes

    def run(self, task_ids: Sequence[Any], *, uid_prefix: str = "") -> RolloutResult:
        """Play one episode tree (or K parallel episodes) per task id; return samples and stats.

        With ``cohorts > 1`` the tasks are split into that many contiguous cohorts, each played
        in a thread of its own with its own generator (drawn from :attr:`rng` in cohort order),
        so the result depends on the number of cohorts and never on their timing; samples and
        episodes come back in task order.

        Args:
            task_ids: The tasks of the roots (``env.reset(options={"task_id": t})``).
            uid_prefix: Prefix of the root uids (e.g. the training step), so group keys are unique
                across calls.
        """
        start = time.perf_counter()
        lanes = self._start(task_ids, uid_prefix)
        n = max(1, min(self.cohorts, len(task_ids)))
        if n == 1:
            plays = [self._play(lanes, self.rng)]
        else:
            per_task = len(lanes) // len(task_ids)  # 1 (tree) or K (parallel modes)
            cut = [c * len(task_ids) // n * per_task for c in range(n + 1)]
            groups = [lanes[cut[c] : cut[c + 1]] for c in range(n)]
            rngs = [np.random.default_rng(int(self.rng.integers(2**63))) for _ in range(n)]
            with ThreadPoolExecutor(n, thread_name_prefix="mas-rollout-cohort") as pool:
                plays = list(pool.map(self._play, groups, rngs))
        for lane in lanes:
            lane.episode.success = bool(lane.env.success)
            lane.episode.turns = lane.env.turn
        return RolloutResult(
            samples=[s for play in plays for s in play.samples],
            episodes=[lane.episode for lane in lanes],
            gen_seconds=sum(play.gen_seconds for play in plays),
            total_seconds=time.perf_counter() - start,
            gen_tokens=sum(play.gen_tokens for play in plays),
        )

    def _play(self, lanes: list[_Lane], rng: np.random.Generator) -> _Played:
        """Play ``lanes`` to their ends in lockstep: at each turn one generate call per policy
        across every live lane's candidates. ``rng`` seeds the calls and breaks ties."""
        played = _Played()
        live = lanes[:]
        n_cand = self.k if self.mode == "tree" else 1
        while live:
            # 1. one prompt per live lane, batched by policy
            by_policy: dict[str, list[tuple[_Lane, str, dict[str, str], list[int]]]] = {}
            for lane in live:
                agent = lane.env.agent_selection
                obs = lane.env.observe(agent)
                policy = self.policy_of[agent]
                prompt_ids = encode_prompt(
                    self.tokenizers[policy],
                    obs,
                    system=self.system_message,
                    enable_thinking=self.enable_thinking,
                )
                by_policy.setdefault(policy, []).append((lane, agent, obs, prompt_ids))
            # 2. one generate call per policy across every lane's candidates
            for policy, items in by_policy.items():
                prompts = [ids for *_, ids in items for _ in range(n_cand)]
                t0 = time.perf_counter()
                completions = self.engines[policy].generate(
                    prompts, self.params, seed=int(rng.integers(2**31))
                )
                played.gen_seconds += time.perf_counter() - t0
                played.gen_tokens += sum(len(c.token_ids) for c in completions)
                decode = self.tokenizers[policy].decode
                texts = [decode(c.token_ids, skip_special_tokens=True) for c in completions]
                if self.prefetch and n_cand == 1:  # parallel mode (and k=1 trees)
                    self.prefetch_lanes(items, texts)
                for j, (lane, agent, obs, prompt_ids) in enumerate(items):
                    part = slice(j * n_cand, (j + 1) * n_cand)
                    played.samples.extend(
                        self._step_lane(
                            lane,
                            agent,
                            policy,
                            obs,
                            prompt_ids,
                            completions[part],
                            texts[part],
                            rng,
                        )
                    )
            live = [lane for lane in live if not episode_ended(lane.env)]
        return played

    def _step_lane(
        self,
        lane: _Lane,
        agent: str,
        policy: str,
        obs: dict[str, str],
        prompt_ids: list[int],
        cands: Sequence[Any],
        texts: list[str],
        rng: np.random.Generator,
    ) -> list[TrainSample]:
        """Step one clone per candidate, make the samples, continue the lane from the best.

        ``texts`` are the candidates' decoded texts, in order; ``rng`` breaks ties.
        """
        env = lane.env
        turn = env.turn
        group: tuple[Any, ...] = (lane.group_uid, turn, agent)
        if self.mode == "parallel-prompt":  # GRPO's rule: only identical prompts are compared
            group += (_digest(prompt_ids),)
        branches = self.step_branches(env, texts)
        out = []
        for branch, comp in zip(branches, cands, strict=False):
            info = branch.infos[agent]
            out.append(
                TrainSample(
                    prompt_ids=prompt_ids,
                    completion_ids=list(comp.token_ids),
                    logprobs=list(comp.logprobs),
                    reward=float(branch.rewards[agent]),
                    group=group,
                    role=agent,
                    policy=policy,
                    info={**info, "finish_reason": comp.finish_reason},
                )
            )
        best = self._best([s.reward for s in out], rng)
        lane.env = branches[best]
        ep = lane.episode
        ep.returns[agent] += out[best].reward
        ep.format_errors += not out[best].info.get("parsed", True)
        if self.keep_transcripts:
            ep.transcript.append(
                {
                    "turn": turn,
                    "agent": agent,
                    "prompt": obs["prompt"],
                    "action": texts[best],
                    "reward": out[best].reward,
                    "reason": out[best].info.get("reason", ""),
                }
            )
        return out

    def step_branches(self, env: TextEnv, texts: list[str]) -> list[TextEnv]:
        """Step one clone of ``env`` per text (``env`` itself when there is one text).

        Several texts are first handed to the env's ``prefetch`` (see the module docstring). The
        ray backend overrides this to step the clones on env-worker actors.
        """
        if self.prefetch and len(texts) > 1:
            prefetch_texts(env, texts, env.agent_selection)
        branches = [env] if len(texts) == 1 else [env.clone() for _ in texts]
        for branch, text in zip(branches, texts, strict=True):
            branch.step(text)
        return branches

    def prefetch_lanes(
        self, items: Sequence[tuple[_Lane, str, dict[str, str], list[int]]], texts: list[str]
    ) -> None:
        """Parallel mode: prefetch, per state, the texts of the lanes that are at that state.

        ``texts[j]`` is lane ``items[j]``'s text. The K episodes of a task start as clones of one
        env and share its program cache; lanes of one task whose agent sees the same prompt are
        taken to be at one state, and their texts go to the first one's env in one call. (Were
        two such states to differ in what a program reads, the cache keys would differ too: the
        cost is a wasted run, never a wrong result.)
        """
        at_state: dict[tuple[str, str, tuple[int, ...]], list[int]] = {}
        for j, (lane, agent, _obs, prompt_ids) in enumerate(items):
            at_state.setdefault((lane.group_uid, agent, tuple(prompt_ids)), []).append(j)
        for lane_ids in at_state.values():
            if len(lane_ids) > 1:
                lane, agent = items[lane_ids[0]][:2]
                prefetch_texts(lane.env, [texts[j] for j in lane_ids], agent)

    def _best(self, rewards: Sequence[float], rng: np.random.Generator) -> int:
        top = max(rewards)
        ties = [i for i, r in enumerate(rewards) if r == top]
        if self.tie_break == "random" and len(ties) > 1:
            return ties[int(rng.integers(len(ties)))]
        return ties[0]


def _digest(ids: Sequence[int]) -> str:
    """A short fingerprint of a token sequence (a group key part: equal only for equal ids)."""
    return hashlib.blake2b(array("q", ids).tobytes(), digest_size=16).hexdigest()


def prefetch_texts(env: TextEnv, texts: list[str], agent: str) -> None:
    """Call ``env.prefetch(texts, agent)`` when the env's class defines one (duck-typed; see the
    module docstring). The Ray backend's env workers call it for their share of the texts."""
    prefetch = getattr(type(env), "prefetch", None)
    if prefetch is not None:
        prefetch(env, texts, agent)


def episode_ended(env: TextEnv) -> bool:
    """True when the agent whose turn it is has terminated or been truncated (the episode is over:
    the envs end all agents together)."""
    agent = env.agent_selection
    return bool(env.terminations[agent] or env.truncations[agent])
