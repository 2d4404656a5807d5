"""``mas/Math-v0``: a tool agent computes with Python, reasoners give the team's answer.

Env card (also ``docs/envs/math.md``).

**Roles and turn order.** ``mode="mas"``: ``("tool", "reasoner")``; with ``n_reasoners=n > 1``:
``("tool", "reasoner_0", ..., "reasoner_{n-1}")``. ``mode="single"``: ``("reasoner",)`` alone, no
tool. The paper's agents act simultaneously; here turns are sequential (immediate rewards for tree
sampling), the tool first: it writes a program, the program runs in the sandbox
(:func:`mas_envs.sandbox.run_python`, never in this process), and each reasoner then sees the
program and what it printed in the same turn. From the second turn on, the tool sees the
reasoners' earlier answers and its own earlier program.

**Observation.** ``{"system": str, "prompt": str}``: the problem, earlier turns (the tool's
printed answers or failures, each reasoner's ``\\boxed{}`` answers), for reasoners the tool's
program and output of this turn and the other reasoners' latest answers, and the answer format.

**Actions.** tool: a reply with a fenced ```` ```python ```` block (the last block counts) whose
program prints the answer alone on its last line (``print(Fraction(3, 4))`` -> ``3/4``)::

    ```python
    import math
    print(math.comb(10, 3))
    ```

reasoner: free reasoning ending with ``\\boxed{answer}`` (the last box counts), e.g.
``C(10, 3) = 120. \\boxed{120}``.

**Rewards** (``r = alpha * team + local``, alpha a constructor kwarg, default 1):

| agent | situation | local reward |
|---|---|---|
| tool | its program printed the correct answer | +1 |
| tool | printed a wrong answer | 0 |
| tool | the program failed (error, timeout, memory/output limit) or printed nothing | -1 |
| tool | no ```` ```python ```` block (format penalty) | -1 |
| tool | the sandbox itself failed (not the agent's fault; not cached) | 0 |
| reasoner | its ``\\boxed{}`` answer is correct | 1 |
| reasoner | wrong | 0 |
| reasoner | no ``\\boxed{}`` answer (format penalty) | -1 |

team = 1 if the team's final answer (below) is correct after this action, else 0 (the paper:
"team reward = reasoner correctness"). Correctness is :func:`mas_envs.math.verify.answers_equal`
(math-verify, or a sympy fallback) against the hidden ground truth.

**Team answer.** Each reasoner's standing answer is its latest ``\\boxed{}`` answer (a reply without
one leaves the earlier answer standing). The team answer is the largest group of verified-equal
standing answers, ties going to the group whose first member comes earliest in turn order
(``reasoner_0`` first); with one reasoner it is that reasoner's answer.

**Success.** The team answer equals the ground truth. ``env.success`` / ``infos[a]["success"]``.

**Termination.** mas: at the end of a turn (after the last reasoner), when the tool's printed
answer of that turn and the team answer are verified equal (the agents agree). single: as soon as
the reasoner gives a ``\\boxed{}`` answer. Truncation after ``max_turns`` turns (default 3, the
paper's).

**Problems and splits.** ``problems="generated"`` (default): seeded generators
(:mod:`mas_envs.math.generators`; ``topics``, ``levels`` select them); a problem id
``"arith/3/12345"`` regenerates one problem; splits are disjoint seed ranges
(:data:`~mas_envs.math.generators.SEEDS`). ``problems=<path>``: a GSM8K, MATH, AIME or
OlympiadBench file or directory (:mod:`mas_envs.math.loaders`; ``problem_format`` forces the
layout); a directory with ``train``/``validation``/``test`` children uses them as splits, any other
path is split 80/10/10 by a stable hash of the problem id. ``problems={"train": p1, "test": p2}``
names each split's source. ``reset(seed=s)`` draws from ``split``;
``reset(options={"problem_id": id})`` (or ``"task_id"``) picks one problem.

Generated questions repeat across seeds; ``reset``, by seed or by problem id, never serves a
train question that is also a validation or test question (nor a validation question that is also
a test question). In v0, five (topic, level) pairs have so few questions that their train split
is empty
(:data:`~mas_envs.math.generators.EMPTY_V0`: algebra/3, numtheory/4, combinatorics/1, 2 and 4;
validation lacks the three combinatorics ones): the default config never trains on them, and a
config of only those raises a ``ValueError`` at construction. v1 fixes this: those five draw from
larger spaces, and the splits partition the questions by a hash of their text (80/10/10), so every
topic and level has problems in every split and no question is in two splits.

**Version history.** v0: first version. v1 (``mas/Math-v1``, ``version=1``): generated problems
only: larger spaces for the five small (topic, level) pairs and question-partitioned splits (same
ids, other questions); prompts, parsing and rewards unchanged. Within v0 and v1 (2026-12-01, judge
fixes): the sympy fallback grader no longer judges an infinite answer (``oo``) equal to every ground
truth; a tool program's MemoryError is a runtime_error, not memory_limit (same reward). v0, split
fix (no new version): ``reset(options={"problem_id": id})`` of a train or validation id whose
question is held out serves a redrawn problem, as seeded resets always did; prompts, parsing,
rewards, the test split and the golden transcripts are unchanged (``docs/envs/math.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mas_envs import programs
from mas_envs import spaces as text_spaces
from mas_envs.base import SPLITS, Outcome, TaskId, TextEnv
from mas_envs.math import prompts
from mas_envs.math.generators import (
    EMPTY_V0,
    LEVELS,
    SEEDS,
    TOPICS,
    VERSIONS,
    GeneratedIds,
    generate,
)
from mas_envs.math.loaders import hash_split, load_problems
from mas_envs.math.problem import Problem
from mas_envs.math.prompts import ToolRun, ToolTurn
from mas_envs.math.verify import answers_equal, majority_answer
from mas_envs.spaces import clean_text

__all__ = ["MathEnv"]

_SPLIT_NAMES = {"train": "train", "validation": "validation", "val": "validation", "test": "test"}


class MathEnv(TextEnv):
    """Math problems solved by a tool agent (Python in a sandbox) and ``n_reasoners`` reasoners.

    Args:
        problems: ``"generated"``, a path to a problem file/directory, or ``{split: path}``
            (a split's path may be a list of paths: ``{"train": [polaris, dapo]}``).
        problem_format: ``"gsm8k"``, ``"math"``, ``"aime"``, ``"olympiadbench"``, ``"dapo"``,
            ``"mas-rl"`` (a ``mas-data prepare`` file) or ``None`` (detected from the fields).
        topics: Generator topics to draw from (default: all of ``generators.TOPICS``).
        levels: Generator difficulty levels to draw from (default: 1 to 5).
        version: The env version whose generated problems and splits to serve: ``0``
            (``mas/Math-v0``) or ``1`` (``mas/Math-v1``: every topic and level in every split;
            see the module docstring). The id's registration sets it; only generated problems
            differ.
        n_reasoners: Reasoners in the team (``mode="mas"`` only).
        tool_timeout_s: Wall-clock limit of one tool program.
        tool_memory_mb: Memory limit of one tool program.
        mode, alpha, max_turns, split, render_mode, max_action_chars: see :class:`TextEnv`.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"],
        "name": "math_v0",
        "render_fps": 1,
        "is_parallelizable": True,
    }
    roles: ClassVar[dict[str, tuple[str, ...]]] = {
        "mas": ("tool", "reasoner"),
        "single": ("reasoner",),
    }
    format_penalty: ClassVar[float] = -1.0

    def __init__(
        self,
        *,
        problems: str | Path | Mapping[str, str | Path | Sequence[str | Path]] = "generated",
        problem_format: str | None = None,
        topics: Sequence[str] | None = None,
        levels: Sequence[int] | None = None,
        version: int = 0,
        n_reasoners: int = 1,
        tool_timeout_s: float = 5.0,
        tool_memory_mb: int = 512,
        mode: str = "mas",
        alpha: float = 1.0,
        max_turns: int = 3,
        split: str = "train",
        render_mode: str | None = None,
        max_action_chars: int = text_spaces.MAX_ACTION_CHARS,
    ) -> None:
        if isinstance(n_reasoners, bool) or not isinstance(n_reasoners, int) or n_reasoners < 1:
            raise ValueError(f"n_reasoners must be an int >= 1, got {n_reasoners!r}")
        if mode == "single" and n_reasoners != 1:
            raise ValueError(
                f"mode='single' has one reasoner and no tool; got n_reasoners={n_reasoners} "
                f"(use mode='mas' for a team)"
            )
        if not tool_timeout_s > 0:
            raise ValueError(f"tool_timeout_s must be > 0 seconds, got {tool_timeout_s!r}")
        if not isinstance(tool_memory_mb, int) or tool_memory_mb < 16:
            raise ValueError(f"tool_memory_mb must be an int >= 16, got {tool_memory_mb!r}")
        super().__init__(
            mode=mode,
            alpha=alpha,
            max_turns=max_turns,
            split=split,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
            agents=(
                ("tool", *(f"reasoner_{i}" for i in range(n_reasoners)))
                if n_reasoners > 1
                else None
            ),
        )
        self.n_reasoners = n_reasoners
        self.tool_timeout_s = float(tool_timeout_s)
        self.tool_memory_mb = tool_memory_mb
        self._reasoners = tuple(a for a in self.possible_agents if a != "tool")
        self._index = {a: i for i, a in enumerate(self._reasoners)}
        self._bank: dict[str, Problem] = {}
        self._generated_split = False
        self._ids: dict[str, Sequence[str]] = {}
        if version not in VERSIONS:
            raise ValueError(
                f"version must be one of {list(VERSIONS)} (mas/Math-v0, mas/Math-v1), "
                f"got {version!r}"
            )
        self.version = version
        self._setup_problems(problems, problem_format, topics, levels)
        # Shared with clones on purpose: a program's result depends only on its code.
        self._runner = programs.ProgramRunner(self.tool_timeout_s, tool_memory_mb)
        self.problem: Problem | None = None

    # ------------------------------------------------------------------ problems and splits

    def _setup_problems(
        self,
        problems: str | Path | Mapping[str, str | Path | Sequence[str | Path]],
        problem_format: str | None,
        topics: Sequence[str] | None,
        levels: Sequence[int] | None,
    ) -> None:
        if isinstance(problems, str) and problems == "generated":
            topics = tuple(TOPICS if topics is None else topics)
            levels = tuple(LEVELS if levels is None else levels)
            bad_topics = [t for t in topics if t not in TOPICS]
            if bad_topics or not topics:
                raise ValueError(
                    f"topics must be a non-empty subset of {list(TOPICS)}, got {list(topics)}"
                )
            if not levels or any(lvl not in LEVELS for lvl in levels):
                raise ValueError(
                    f"levels must be a non-empty subset of {list(LEVELS)}, got {list(levels)}"
                )
            empty = EMPTY_V0[self.split] if self.version == 0 else frozenset()
            if all((t, lvl) in empty for t in topics for lvl in levels):
                names = ", ".join(f"{t}/{lvl}" for t in topics for lvl in levels)
                raise ValueError(
                    f"mas/Math-v0's {self.split} split has no problems of {names}: these levels "
                    f"have so few distinct questions (33 to 300) that each is also a question of a "
                    f"later split, which {self.split} never serves. Use mas/Math-v1 (version=1), "
                    "which serves every topic and level in every split, or add other topics= "
                    "or levels="
                )
            self._ids = {s: GeneratedIds(topics, levels, SEEDS[s]) for s in SPLITS}
            self._source_key: tuple = ("generated", topics, levels, self.version)
            self._generated_split = self.version >= 1
            return
        if topics is not None or levels is not None:
            raise ValueError(
                "topics= and levels= select generated problems; they do not apply "
                "to problems read from files"
            )
        sources = self._split_sources(problems)
        by_split: dict[str, list[str]] = {s: [] for s in SPLITS}
        for split, path in sources:
            for problem in load_problems(path, problem_format):
                if problem.id in self._bank:
                    raise ValueError(
                        f"problem id {problem.id!r} appears in more than one split source; "
                        f"splits must be disjoint"
                    )
                self._bank[problem.id] = problem
                # The mapping's split, else the one a prepared file wrote, else the id's hash.
                by_split[split or problem.split or hash_split(problem.id)].append(problem.id)
        self._ids = {s: tuple(ids) for s, ids in by_split.items()}
        self._source_key = ("files", hash((self._ids["validation"], self._ids["test"])))

    @staticmethod
    def _split_sources(
        problems: str | Path | Mapping[str, str | Path | Sequence[str | Path]],
    ) -> list[tuple[str | None, Path]]:
        """``(split, path)`` pairs; split ``None`` means "the records' own split, else a hash"."""
        if isinstance(problems, Mapping):
            bad = [k for k in problems if k not in SPLITS]
            if bad:
                raise ValueError(f"problems= keys must be splits {list(SPLITS)}, got {bad}")
            pairs: list[tuple[str | None, Path]] = []
            for k, v in problems.items():
                paths = [v] if isinstance(v, (str, Path)) else v
                if not (
                    isinstance(paths, Sequence)
                    and paths
                    and all(isinstance(x, (str, Path)) for x in paths)
                ):
                    raise ValueError(
                        f"problems[{k!r}] must be a path or a non-empty list of paths, got {v!r}"
                    )
                pairs += [(str(k), Path(x)) for x in paths]
            return pairs
        if not isinstance(problems, (str, Path)):
            raise TypeError(
                f"problems must be 'generated', a path, or a {{split: path}} mapping, got "
                f"{type(problems).__name__}"
            )
        root = Path(problems)
        if not root.exists():
            raise FileNotFoundError(
                f"problems={str(problems)!r}: no such file or directory (use 'generated' for the "
                f"built-in generators, or a path to a GSM8K/MATH/AIME/OlympiadBench file)"
            )
        if root.is_dir():
            own: dict[str | None, Path] = {
                _SPLIT_NAMES[child.name.split(".")[0]]: child
                for child in sorted(root.iterdir())
                if child.name.split(".")[0] in _SPLIT_NAMES
                and (child.is_dir() or child.suffix in (".jsonl", ".json", ".csv", ".parquet"))
            }
            if own:
                return list(own.items())
        return [(None, root)]

    def _task_key(self) -> str | None:
        # Generated ids repeat questions (36% of raw train ids gave a validation or test question
        # at the default topics and levels) and datasets hold duplicates: key on the question.
        # Version 1's generated splits partition the questions themselves: nothing to redraw.
        if self.problem is None or (self._generated_split and self.problem.source == "generated"):
            return None
        return self.problem.question

    def _generator_key(self) -> tuple:
        return self._source_key

    def task_ids(self, split: str | None = None) -> Sequence[str]:
        """The problem ids of ``split`` (default: this env's split)."""
        return self._ids[split or self.split]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode; ``options={"problem_id": id}`` (or ``"task_id"``) picks the problem."""
        if options and "problem_id" in options:
            options = {**options, "task_id": options["problem_id"]}
        if not (options or {}).get("task_id") and not self.task_ids():
            raise ValueError(
                f"split {self.split!r} has no problems in this problem source; pass "
                f"problems={{{self.split!r}: path}} or another split="
            )
        super().reset(seed=seed, options=options)

    def _load_task(self, task_id: TaskId) -> None:
        if not isinstance(task_id, str):
            raise TypeError(f"a math problem id is a str such as 'arith/3/12345', got {task_id!r}")
        problem = self._bank.get(task_id)
        if problem is None:
            if task_id.split("/", 1)[0] not in TOPICS:
                raise KeyError(
                    f"unknown problem id {task_id!r}: not in the loaded problems and not a "
                    f"generated id like 'arith/3/12345' (env.task_ids(split) lists them)"
                )
            problem = generate(task_id, self.version)
        self.problem = problem
        self._question = clean_text(problem.question)
        self._tool: ToolTurn | None = None
        self._answers: tuple[str | None, ...] = (None,) * len(self._reasoners)
        self._team: str | None = None
        self._team_correct = False
        self._history: tuple[tuple[int, str], ...] = ()

    # ------------------------------------------------------------------ acting

    def _apply(self, agent: str, text: str) -> Outcome:
        if agent == "tool":
            return self._apply_tool(text)
        return self._apply_reasoner(agent, text)

    def _apply_tool(self, text: str) -> Outcome:
        assert self.problem is not None
        team = float(self._team_correct)
        parsed = prompts.parse_code(text)
        if parsed.value is None:
            self._tool = ToolTurn(self.turn, "", None, None)
            self._log("tool", "wrote no runnable program (no ```python block)")
            return Outcome(
                self.format_penalty,
                team,
                self._team_correct,
                parsed=False,
                reason=parsed.reason,
                info={"answer": None, "correct": False, "verdict": ""},
            )
        run = self._run(parsed.value)
        answer = run.answer
        tool = self._tool = ToolTurn(self.turn, parsed.value, run, answer)
        self._log("tool", prompts.printed(tool))
        correct = answer is not None and self._right(answer)
        if run.verdict == "sandbox_error":
            local, reason = 0.0, f"the sandbox failed, not the program: {run.error[-200:]}"
        elif run.verdict != "ok":
            local, reason = -1.0, f"the program failed ({run.verdict})"
        elif answer is None:
            local, reason = -1.0, "the program printed no answer on its last line"
        else:
            local, reason = (1.0 if correct else 0.0), ""
        return Outcome(
            local,
            team,
            self._team_correct,
            reason=reason,
            info={"answer": answer, "correct": correct, "verdict": run.verdict},
        )

    def _apply_reasoner(self, agent: str, text: str) -> Outcome:
        assert self.problem is not None
        parsed = prompts.parse_answer(text)
        answer = parsed.value
        if answer is None:
            local = self.format_penalty
            correct = False
            self._log(agent, "gave no \\boxed{} answer")
        else:
            answers = list(self._answers)
            answers[self._index[agent]] = answer
            self._answers = tuple(answers)
            correct = self._right(answer)
            local = 1.0 if correct else 0.0
            self._log(agent, prompts.answered(answer))
            team = self._team = majority_answer(self._answers)
            self._team_correct = team is not None and self._right(team)
        done = False
        if self.mode == "single":
            done = answer is not None
        elif agent == self._last_role:
            tool = self._tool
            done = (
                tool is not None
                and tool.turn == self.turn
                and tool.answer is not None
                and self._team is not None
                and answers_equal(tool.answer, self._team)
            )
        return Outcome(
            local,
            float(self._team_correct),
            self._team_correct,
            done=done,
            parsed=answer is not None,
            reason=parsed.reason,
            info={
                "answer": answer,
                "correct": correct,
                "team_answer": self._team,
                "agreed": done and self.mode == "mas",
            },
        )

    def _log(self, agent: str, event: str) -> None:
        self._history = (*self._history, (self.turn, prompts.history_line(self.turn, agent, event)))

    def _run(self, code: str) -> ToolRun:
        """Run the tool's program in the sandbox, once per distinct code string."""
        run = self._runner.run(code)
        answer = prompts.program_answer(run.stdout) if run.verdict == "ok" else None
        error = "\n".join(run.error.splitlines()[-5:])
        return ToolRun(run.verdict, run.stdout[-prompts.MAX_OUTPUT_KEEP :], error, answer)

    def prefetch(self, texts: Sequence[str], agent: str | None = None) -> None:
        """Run the programs that ``texts`` (candidate answers of ``agent``) would run, at once.

        A tree rollout samples K answers for the tool and steps K clones with them; each step
        would run its program on its own. ``prefetch`` runs the new ones in one pooled sandbox
        call (:meth:`mas_envs.programs.ProgramRunner.prefetch`) and fills the cache the clones
        share, so the K steps only read it. It changes no state; stepping without it gives the
        same results, later. Texts of other agents need no program and are ignored.
        """
        if (agent or self.agent_selection) != "tool":
            return
        codes = (
            prompts.parse_code(text).value
            for text in texts
            if isinstance(text, str) and len(text) <= self.max_action_chars
        )
        self._runner.prefetch((code, "") for code in codes if code is not None)

    # ------------------------------------------------------------------ text

    def _system(self, agent: str) -> str:
        if agent == "tool":
            return prompts.TOOL_SYSTEM
        return prompts.SINGLE_SYSTEM if self.mode == "single" else prompts.REASONER_SYSTEM

    def _earlier(self) -> tuple[str, ...]:
        return tuple(line for turn, line in self._history if turn < self.turn)

    def _prompt(self, agent: str) -> str:
        if agent == "tool":
            previous = self._tool if self._tool is not None and self._tool.run else None
            return prompts.tool_prompt(self._question, self.turn, self._earlier(), previous)
        if self.mode == "single":
            return prompts.single_prompt(self._question, self._earlier())
        tool = self._tool if self._tool is not None and self._tool.turn == self.turn else None
        mates = tuple((a, self._answers[i]) for a, i in self._index.items() if a != agent)
        return prompts.reasoner_prompt(self._question, tool, self._earlier(), mates)

    def _render_text(self) -> str:
        if self.problem is None:
            return "(call reset() first)"
        lines = [f"[{self.problem.id}] turn {self.turn}/{self.max_turns}", self._question]
        if self._tool is not None:
            lines.append(f"tool: {prompts.printed(self._tool)}")
        for agent, i in self._index.items():
            lines.append(f"{agent}: {prompts.show_answer(self._answers[i])}")
        lines.append(
            f"team answer: {prompts.show_answer(self._team)} "
            f"({'correct' if self._team_correct else 'not correct'})"
        )
        return "\n".join(lines)

    def _right(self, answer: str) -> bool:
        """Whether ``answer`` equals one the problem accepts (its ground truth, or another its
        source accepted as well)."""
        assert self.problem is not None
        return any(answers_equal(gold, answer) for gold in self.problem.accepted)

    # ------------------------------------------------------------------ reference policies

    def oracle_action(self, agent: str | None = None) -> str:
        """tool: a short program printing the answer; reasoner: brief reasoning + ``\\boxed{}``."""
        agent = agent or self.agent_selection
        assert self.problem is not None, "call reset() first"
        p = self.problem
        if agent == "tool":
            return f"```python\n{p.code or f'print({p.answer!r})'}\n```"
        work = f"{p.solution}\n\n" if p.solution else ""
        return f"{work}The answer is $\\boxed{{{p.answer}}}$."

    def random_action(self, rng: np.random.Generator, agent: str | None = None) -> str:
        """A well-formed wrong answer: a program printing, or a box holding, a wrong integer."""
        agent = agent or self.agent_selection
        assert self.problem is not None, "call reset() first"
        guess = int(rng.integers(-1000, 1000))
        while self._right(str(guess)):
            guess += 1
        if agent == "tool":
            return f"```python\nprint({guess})\n```"
        return f"A quick estimate gives {guess}. \\boxed{{{guess}}}"
