"""mas/Code-v1: a coder writes a program, a tester writes test cases; hidden tests decide.

Env card (also ``docs/envs/code.md``).

Roles and turns
    ``mode="mas"``: ``coder`` then ``tester`` each turn (sequential, immediate rewards).
    ``mode="single"``: one ``coder`` (the single-agent baseline).

Observation
    ``{"system": str, "prompt": str}``. The coder sees the problem statement (public examples
    included, hidden tests never), its current program and how that program did on the tester's
    latest cases (pass/fail per case, input, expected and actual output, error tail, for the first
    failing cases). The tester sees the statement, the coder's current program, its own previous
    cases and the program's results on them. In single mode the coder's feedback comes from the
    statement's public examples. Everything echoed is truncated and passes ``clean_text``.

Actions
    coder: a program in a ```` ```python ```` block (the last complete block counts; prose and
    ``<think>`` sections are ignored; a bare program without fences is accepted if it compiles).
    stdin/stdout problems read stdin and print; function problems define ``fn_name`` (a function,
    or a method of ``class Solution``). tester: ``**Test Input:**`` / ``**Test Output:**`` pairs of
    fenced blocks (stdin problems) or ``assert fn(<literals>) == <literal>`` lines (function
    problems); at most ``max_cases`` cases count. Example answers::

        ```python
        a, b = map(int, input().split())
        print(a + b)
        ```

        **Test Input:**
        ```
        2 3
        ```
        **Test Output:**
        ```
        5
        ```

Rewards (each agent's reward is ``alpha * team + local``)

    ==========  =====================================================================
    term        value
    ==========  =====================================================================
    team        ``p``: fraction of ALL hidden tests the coder's current program passes
    coder       ``p`` of the program just written (the paper's coder reward)
    tester      ``0.5 * valid + 0.5 * judge``; ``valid`` = fraction of its cases on which the
                reference solution's output equals the case's expected output; ``judge`` =
                fraction of right verdicts on the programs it judges: the coder's current
                program (right: a program passing all hidden tests passes every case, one
                failing some hidden test fails a VALID case) and the problem's known wrong
                programs (right: fails a valid case); 0 with nothing to judge. Invalid cases
                never earn a catch.
    format      ``-1`` local (no program found / no well-formed case), episode goes on
    ==========  =====================================================================

    Problems without a reference solution (LiveCodeBench): ``valid`` is judged only on cases
    whose input equals a ground-truth test's input; others are left out of the fraction
    (``valid`` = 0 when none can be judged) and cannot earn a catch.

    ``infos`` add ``pass_rate``, ``hidden_passed``/``hidden_total``, ``cases_passed``, ``valid``,
    ``agree`` (the verdict on the coder), ``known_caught``/``known_total``, ``judge`` and
    ``sandbox_errors`` (cases the sandbox itself failed to run: not the program's
    fault; a trainer may drop such samples).

Success
    The coder's current program passes every hidden test (``p == 1``).

Termination
    mas: terminated when, after the tester's step, the coder's current program passes all of the
    tester's current cases; single: when the program passes all public examples (at once, if the
    problem has none). Truncated after ``max_turns`` turns (default 3, as in the paper).

Problems, seeds and splits
    ``problems=`` ``"builtin"`` (default, 100+ problems written for this project, easy/medium/hard,
    stdin and function problems), ``"humaneval"`` (extra ``code``), or a path to an APPS /
    CodeContests / LiveCodeBench ``.jsonl`` / ``.parquet`` file (:mod:`mas_envs.code.problems`),
    or ``{split: source}`` (each split from its own file, e.g. APPS ``train.jsonl``/``test.jsonl``).
    ``reset(options={"problem_id": id})`` (or ``"task_id"``) picks a problem; otherwise the seed
    draws one from ``split``. Splits: the record's own split, else 80/10/10 by a stable hash of the
    id; ``task_ids(split)`` lists them.

Execution
    Programs run only in :mod:`mas_envs.sandbox`, one sandbox process per program and batch of
    cases (:mod:`mas_envs.code.harness`), ``timeout_s`` per case (default 2 s), ``memory_mb``
    (default 512); after ``max_timeouts`` (2) time-outs the batch's remaining cases fail
    unrun. The feedback cases (the tester's, or the examples) and the hidden tests never share a
    sandbox run, and the feedback runs finish first: nothing of a hidden test reaches a prompt.
    The cases of one sandbox run are isolated from each other (harness.py says how). Results
    are cached per (program, input) so clones and tree branches never rerun them;
    ``env.prefetch(texts, agent)`` runs a tree step's K candidate answers in one pooled call.

Version history
    v0 (``mas/Code-v0``, ``version=0``): first version; judge fixes within v0 are listed in
    ``docs/envs/code.md``.
    v1 (``mas/Code-v1``, ``version=1``, the default): the 1e-6 tolerance applies only where the
    EXPECTED value is a float (v0 also took a float within 1e-6 of an expected integer:
    ``print(float(n))`` for ``n + 1``, ``1000000006.0`` for ``1000000007``), both in the hidden
    tests and in the tester's validity check; the oracle tester writes no hidden test (with no
    public example it has no answer: ``NoOracleError``; v0's oracle copied the first hidden
    tests, which then showed in the coder's prompt). Prompts are unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mas_envs.base import SPLITS, NoOracleError, Outcome, TextEnv
from mas_envs.code import prompts
from mas_envs.code.judge import (
    Case,
    CaseResult,
    Limits,
    Request,
    outputs_match,
    run_requests,
    values_match,
)
from mas_envs.code.judge import literal as parse_literal
from mas_envs.code.problems import Problem, load_problems, split_of
from mas_envs.spaces import clean_text

__all__ = ["CodeEnv"]

VERSIONS = (0, 1)
"""Env versions (the card's version history)."""


@functools.lru_cache(maxsize=16)
def _problem_set(
    sources: tuple[tuple[str | None, str], ...],
) -> tuple[dict[str, Problem], dict[str, tuple[str, ...]]]:
    """Problems by id and ids by split; ``sources`` are (split or None, source) pairs."""
    problems = [p for split, src in sources for p in load_problems(src, file_split=split)]
    by_id: dict[str, Problem] = {}
    for p in problems:
        if p.id in by_id:
            raise ValueError(
                f"problem id {p.id!r} appears in more than one of the problems= sources; "
                "splits must not share problems"
            )
        by_id[p.id] = p
    splits = {
        s: tuple(p.id for p in problems if split_of(p) == s)
        for s in ("train", "validation", "test")
    }
    return by_id, splits


def _source_list(value: Any, split: str) -> list[Any]:
    """One split's sources: a source, or a non-empty list of them."""
    if isinstance(value, (str, Path)):
        return [value]
    if isinstance(value, Sequence) and value and all(isinstance(v, (str, Path)) for v in value):
        return list(value)
    raise ValueError(
        f"problems[{split!r}] must be a source or a non-empty list of sources, got {value!r}"
    )


class CodeEnv(TextEnv):
    """Coder + tester on a coding problem, judged on hidden tests (card: module docstring).

    Args:
        problems: ``"builtin"``, ``"humaneval"``, a path to an APPS, CodeContests or
            LiveCodeBench file or to a file ``mas-data prepare`` wrote, or ``{split: source}`` to
            take each split from its own source (e.g. ``{"train": "apps/train.jsonl", "test":
            "apps/test.jsonl"}``); a split's source may be a list of sources (``{"train":
            ["data/apps/train.jsonl", "data/codecontests/train.jsonl"]}``).
        timeout_s: Wall-clock seconds per test case.
        memory_mb: Memory limit of a sandboxed run.
        max_cases: Most tester cases that count per answer (more are ignored).
        max_known_wrong: Known wrong programs of a problem that the tester's cases must catch.
        version: ``1`` (``mas/Code-v1``, the default) or ``0`` (``mas/Code-v0``: a float within
            1e-6 of an expected integer passes; the card's version history).
        mode, alpha, max_turns, split, render_mode, max_action_chars: see :class:`TextEnv`.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"],
        "name": "code_v0",
        "render_fps": 1,
        "is_parallelizable": True,
    }
    roles: ClassVar[dict[str, tuple[str, ...]]] = {
        "mas": ("coder", "tester"),
        "single": ("coder",),
    }

    def __init__(
        self,
        *,
        problems: str | Path | Mapping[str, str | Path | Sequence[str | Path]] = "builtin",
        timeout_s: float = 2.0,
        memory_mb: int = 512,
        max_cases: int = 8,
        max_known_wrong: int = 2,
        version: int = 1,
        mode: str = "mas",
        alpha: float = 1.0,
        max_turns: int = 3,
        split: str = "train",
        render_mode: str | None = None,
        max_action_chars: int = 65_536,
    ) -> None:
        super().__init__(
            mode=mode,
            alpha=alpha,
            max_turns=max_turns,
            split=split,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
        )
        if not (0 < timeout_s <= 60):
            raise ValueError(f"timeout_s must be in (0, 60] seconds, got {timeout_s!r}")
        if not (32 <= memory_mb <= 65_536):
            raise ValueError(f"memory_mb must be in [32, 65536], got {memory_mb!r}")
        if not (isinstance(max_cases, int) and 1 <= max_cases <= 50):
            raise ValueError(f"max_cases must be an int in [1, 50], got {max_cases!r}")
        if not (isinstance(max_known_wrong, int) and 0 <= max_known_wrong <= 10):
            raise ValueError(f"max_known_wrong must be an int in [0, 10], got {max_known_wrong!r}")
        if version not in VERSIONS:
            raise ValueError(
                f"version must be one of {list(VERSIONS)} (mas/Code-v0, mas/Code-v1), "
                f"got {version!r}"
            )
        self.version = version
        if isinstance(problems, Mapping):
            bad = sorted(set(problems) - set(SPLITS))
            if bad or not problems:
                raise ValueError(
                    f"problems= as a dict maps splits {list(SPLITS)} to sources, got keys {bad}"
                )
            # A split may take several sources: {"train": [apps, codecontests]}.
            sources: tuple[tuple[str | None, str], ...] = tuple(
                (s, str(src))
                for s in SPLITS
                if s in problems
                for src in _source_list(problems[s], s)
            )
        else:
            sources = ((None, str(problems)),)
        self.problems_source = str(problems)
        self._by_id, self._splits = _problem_set(sources)
        self.limits = Limits(timeout_s=float(timeout_s), memory_mb=int(memory_mb))
        self.max_cases = max_cases
        self.max_known_wrong = max_known_wrong
        self.problem: Problem | None = None
        self._clear()

    def _clear(self) -> None:
        # Episode state: immutable values only, so clone() needs no _copy_state.
        self.program: str | None = None
        self.pass_rate = 0.0
        self.cases: tuple[Case, ...] = ()
        self.case_results: tuple[CaseResult, ...] | None = None
        self._notes: tuple[tuple[str, str], ...] = ()

    # ------------------------------------------------------------------ tasks

    def task_ids(self, split: str | None = None) -> Sequence[str]:
        """Problem ids of ``split`` (default: this env's split)."""
        return self._splits[split or self.split]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if options and "problem_id" in options and options.get("task_id") is None:
            options = {**options, "task_id": options["problem_id"]}
        if (not options or options.get("task_id") is None) and not self.task_ids():
            raise ValueError(
                f"split {self.split!r} of problems={self.problems_source!r} is empty; choose "
                "another split or pass options={'problem_id': ...}"
            )
        super().reset(seed=seed, options=options)

    def _load_task(self, task_id: Any) -> None:
        problem = self._by_id.get(str(task_id))
        if problem is None:
            raise ValueError(
                f"unknown problem id {task_id!r} in problems={self.problems_source!r}; "
                "env.task_ids(split) lists them"
            )
        self.problem = problem
        self._clear()

    @property
    def _problem(self) -> Problem:
        if self.problem is None:
            raise RuntimeError("call reset() before using the env")
        return self.problem

    # ------------------------------------------------------------------ acting

    @property
    def _v0(self) -> bool:
        """Whether this is ``mas/Code-v0``, whose judge took near misses of integers."""
        return self.version == 0

    def _note(self, agent: str) -> str:
        return dict(self._notes).get(agent, "")

    def _set_note(self, agent: str, note: str) -> None:
        self._notes = (*((a, n) for a, n in self._notes if a != agent), (agent, note))

    def _feedback_cases(self) -> tuple[Case, ...]:
        return self.cases if self.mode == "mas" else self._problem.public

    def _apply(self, agent: str, text: str) -> Outcome:
        if agent == "coder":
            return self._apply_coder(text)
        return self._apply_tester(text)

    def _apply_coder(self, text: str) -> Outcome:
        code = prompts.extract_code(text)
        if code is None:
            reason = "no program found: put the complete program in a ```python code block"
            self._set_note("coder", f"Your last answer was not used: {reason}.")
            return Outcome(
                self.format_penalty,
                self.pass_rate,
                self.success,
                parsed=False,
                reason=reason,
                info={"pass_rate": self.pass_rate},
            )
        feedback = self._feedback_cases()
        fb, hidden = run_requests(self._coder_requests(code, feedback), self.limits, v0=self._v0)
        passed = sum(r.passed for r in hidden)
        self.program = code
        self.pass_rate = passed / len(hidden)
        self.case_results = fb
        self._set_note("coder", "")
        success = passed == len(hidden)
        done = self.mode == "single" and all(r.passed for r in fb)
        info = {
            "pass_rate": self.pass_rate,
            "hidden_passed": passed,
            "hidden_total": len(hidden),
            "cases_passed": sum(r.passed for r in fb),
            "cases_total": len(fb),
            "sandbox_errors": sum(r.status == "sandbox_error" for r in (*hidden, *fb)),
        }
        return Outcome(self.pass_rate, self.pass_rate, success, done=done, info=info)

    def _coder_requests(self, code: str, feedback: tuple[Case, ...]) -> list[Request]:
        """The program on the feedback cases (visible), then on the hidden tests: separate
        sandbox runs, the hidden ones after (:func:`~mas_envs.code.judge.run_requests`)."""
        p = self._problem
        return [
            Request(code, feedback, p.fn_name, p.setup),
            Request(code, p.tests, p.fn_name, p.setup, hidden=True),
        ]

    def _apply_tester(self, text: str) -> Outcome:
        p = self._problem
        cases, ignored = prompts.parse_cases(text, p, self.max_cases)
        if not cases:
            fmt = (
                "**Test Input:** / **Test Output:** blocks"
                if p.kind == "stdio"
                else f"`assert {p.fn_name}(...) == ...` lines with literal values"
            )
            reason = f"no test case found: write each case as {fmt}"
            self._set_note("tester", f"Your last answer was not used: {reason}.")
            return Outcome(
                self.format_penalty,
                self.pass_rate,
                self.success,
                parsed=False,
                reason=reason,
                info={"pass_rate": self.pass_rate},
            )
        results = run_requests(self._tester_requests(tuple(cases)), self.limits, v0=self._v0)
        ref = results.pop(0) if p.reference else None
        prog = results.pop(0) if self.program is not None else None
        valid = self._validity(cases, ref)
        judged = [v for v in valid if v is not None]
        valid_frac = sum(judged) / len(judged) if judged else 0.0

        def catches(res: Sequence[CaseResult]) -> bool:  # a case with a right output rejects it
            return any(v and not r.passed for v, r in zip(valid, res, strict=True))

        agree = 0.0
        done = False
        if prog is not None:
            done = all(r.passed for r in prog)
            # A correct program must pass every case; a wrong one must be caught.
            agree = float(done) if self.success else float(catches(prog))
        caught = sum(catches(res) for res in results)  # the known wrong programs
        verdicts = (prog is not None) + len(results)
        judge = (agree + caught) / verdicts if verdicts else 0.0
        self.cases = tuple(cases)
        self.case_results = prog
        note = f"Only your first {self.max_cases} cases were used." if ignored else ""
        self._set_note("tester", note)
        local = 0.5 * valid_frac + 0.5 * judge
        info = {
            "pass_rate": self.pass_rate,
            "valid": valid_frac,
            "agree": agree,
            "known_caught": caught,
            "known_total": len(results),
            "judge": judge,
            "cases": len(cases),
            "cases_ignored": ignored,
            "cases_passed": sum(r.passed for r in prog) if prog is not None else 0,
            "sandbox_errors": sum(
                r.status == "sandbox_error" for res in (ref, prog, *results) if res for r in res
            ),
        }
        return Outcome(local, self.pass_rate, self.success, done=done, info=info)

    def _tester_requests(self, cases: tuple[Case, ...]) -> list[Request]:
        """Reference, coder's program (when there is one), known wrong programs: on ``cases``."""
        p = self._problem
        programs = [p.reference] if p.reference else []
        if self.program is not None:
            programs.append(self.program)
        programs += p.wrong[: self.max_known_wrong]
        return [Request(code, cases, p.fn_name, p.setup) for code in programs]

    def _validity(
        self, cases: Sequence[Case], ref: Sequence[CaseResult] | None
    ) -> list[bool | None]:
        """Per case: does the reference agree with its expected output (None: cannot tell)."""
        if ref is not None:
            return [r.passed for r in ref]
        known = {t.input.strip(): t for t in self._problem.tests}
        out: list[bool | None] = []
        for c in cases:
            t = known.get(c.input.strip())
            if t is None:
                out.append(None)
            elif c.kind == "stdio":
                out.append(outputs_match(c.expected, t.expected, v0=self._v0))
            else:
                ok_a, a = parse_literal(c.expected)
                ok_b, b = parse_literal(t.expected)
                out.append(ok_a and ok_b and values_match(a, b, v0=self._v0))
        return out

    def prefetch(self, texts: Sequence[str], agent: str | None = None) -> None:
        """Run the programs that ``texts`` (candidate answers of ``agent``) would run, at once.

        A tree rollout samples K answers for one agent and steps K clones with them; each step
        would call the sandbox on its own. ``prefetch`` runs all of them in one pooled sandbox
        call and fills the result cache, so the K steps that follow only read it. It changes no
        state; stepping without it gives the same results, just later.
        """
        agent = agent or self.agent_selection
        p = self._problem
        reqs: list[Request] = []
        for text in texts:
            if not isinstance(text, str) or len(text) > self.max_action_chars:
                continue
            if agent == "coder":
                code = prompts.extract_code(text)
                if code is not None:
                    reqs += self._coder_requests(code, self._feedback_cases())
                continue
            cases = tuple(prompts.parse_cases(text, p, self.max_cases)[0])
            if cases:
                reqs += self._tester_requests(cases)
        if reqs:
            run_requests(reqs, self.limits)

    # ------------------------------------------------------------------ text

    def _system(self, agent: str) -> str:
        return prompts.system_text(agent, self._problem)

    def _prompt(self, agent: str) -> str:
        p = self._problem
        if agent == "coder":
            feedback = self._feedback_cases()
            return prompts.coder_prompt(
                p,
                turn=self.turn,
                max_turns=self.max_turns,
                program=self.program,
                cases=feedback,
                results=self.case_results if self.program is not None else None,
                cases_by="tester's test cases" if self.mode == "mas" else "examples",
                note=self._note("coder"),
            )
        return prompts.tester_prompt(
            p,
            turn=self.turn,
            max_turns=self.max_turns,
            program=self.program,
            cases=self.cases,
            results=self.case_results,
            max_cases=self.max_cases,
            note=self._note("tester"),
        )

    # ------------------------------------------------------------------ policies

    def _oracle_cases(self) -> tuple[Case, ...]:
        """The statement's public examples: the only cases known right without hidden data.

        Raises:
            NoOracleError: The problem has no public example. (v0 fell back on the first hidden
                tests, which the coder's next prompt then showed, and a warm start trained the
                tester to write them.)
        """
        p = self._problem
        if not p.public:
            raise NoOracleError(
                f"problem {p.id!r} has no public example for the oracle tester to write, and "
                "its hidden tests never enter a prompt"
            )
        return p.public[: self.max_cases]

    def oracle_action(self, agent: str | None = None) -> str:
        """The reference program (coder) or the statement's public examples as cases (tester;
        :class:`~mas_envs.base.NoOracleError` when there are none)."""
        agent = agent or self.agent_selection
        p = self._problem
        if agent == "coder":
            if not p.reference:
                raise NoOracleError(f"problem {p.id!r} has no reference solution to act as oracle")
            return f"```python\n{p.reference.rstrip()}\n```"
        return prompts.format_cases(p, self._oracle_cases())

    def random_action(self, rng: np.random.Generator, agent: str | None = None) -> str:
        """A runnable wrong program (coder) or random well-formed cases (tester)."""
        agent = agent or self.agent_selection
        if agent == "coder":
            return prompts.random_program(self._problem, rng)
        return prompts.random_cases(self._problem, rng)

    def _render_text(self) -> str:
        if self.problem is None:
            return "code_v0 (not reset)"
        p = self.problem
        head = (
            f"problem {p.id} [{p.kind}, {p.difficulty or 'unrated'}] turn "
            f"{self.turn}/{self.max_turns} hidden pass rate {self.pass_rate:.2f} "
            f"success={self.success}"
        )
        prog = self.program if self.program is not None else "(no program)\n"
        cases = f"{len(self.cases)} tester cases" if self.mode == "mas" else ""
        return f"{head}\n{clean_text(prog[:2000])}{cases}"
