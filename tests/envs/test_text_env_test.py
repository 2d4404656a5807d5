"""mas_envs.test.text_env_test passes on a small correct env and fails, naming the rule, on envs
that each break one rule (the registered ids are checked in test_conformance.py)."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from typing import Any, ClassVar

import numpy as np
import pytest

from mas_envs.base import Outcome, TextEnv
from mas_envs.test import RULES, ContractError, text_env_test

ANSWER = re.compile(r"####\s*(-?\d{1,9})\s*$")


class GuessEnv(TextEnv):
    """Say the number in the prompt: a hinter may propose it, the guesser's answer counts."""

    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "name": "guess_v0"}
    roles: ClassVar[dict[str, tuple[str, ...]]] = {
        "mas": ("hinter", "guesser"),
        "single": ("guesser",),
    }
    SPLIT_IDS: ClassVar[dict[str, range]] = {
        "train": range(0, 10_000),
        "validation": range(10_000, 11_000),
        "test": range(20_000, 21_000),
    }

    def task_ids(self, split: str | None = None) -> range:
        return self.SPLIT_IDS[split or self.split]

    def _load_task(self, task_id: Any) -> None:
        self._target = self._target_of(int(task_id))
        self._guesses: list[int] = []

    def _target_of(self, task_id: int) -> int:
        return task_id * 7919 % 1_000_003

    def _apply(self, agent: str, text: str) -> Outcome:
        found = ANSWER.search(text)
        if found is None:
            return Outcome(-1.0, parsed=False, reason="no final line '#### <number>'")
        guess = int(found.group(1))
        self._guesses.append(guess)
        right = guess == self._target
        if agent == "hinter":
            return Outcome(0.5 if right else 0.0)
        return Outcome(1.0 if right else -0.1, float(right), success=right, done=right)

    def _copy_state(self, new: TextEnv) -> None:
        new._guesses = self._guesses[:]

    def _system(self, agent: str) -> str:
        return "End your answer with a line '#### <number>'."

    def _prompt(self, agent: str) -> str:
        return f"Say {self._target}. Said so far: {self._guesses}. You are the {agent}."

    def oracle_action(self, agent: str | None = None) -> str:
        return f"#### {self._target}"

    def random_action(self, rng: np.random.Generator, agent: str | None = None) -> str:
        return f"#### {int(rng.integers(1_000_003))}"

    def _render_text(self) -> str:
        return self._prompt(self.agent_selection)


def test_passes_on_a_correct_env_in_both_modes():
    text_env_test(GuessEnv)
    text_env_test(lambda **kw: GuessEnv(mode="single", **kw))


def test_the_base_class_keeps_splits_apart_for_a_chosen_task_too():
    text_env_test(KeyedContent)  # train ids repeat test levels; reset redraws them both ways
    env = KeyedContent()
    test_levels = {env._target_of(t) for t in env.task_ids("test")}
    served = set()
    for task_id in range(2000):
        env.reset(options={"task_id": task_id})
        served.add(env._target)
        assert env.task_id in env.task_ids("train")
    assert served and not served & test_levels


# ---------------------------------------------------------------- one broken env per rule


class SharesStateWithClones(GuessEnv):
    def _copy_state(self, new: TextEnv) -> None:
        pass  # the list of guesses stays shared


class ClonesWithoutTheGenerator(GuessEnv):
    def clone(self) -> TextEnv:
        new = super().clone()
        new._rng = np.random.default_rng()
        new._rng_shared = False
        return new


class CrashesOnHostileText(GuessEnv):
    def _apply(self, agent: str, text: str) -> Outcome:
        int(text.split("####")[1])  # IndexError / ValueError on text without a number
        return super()._apply(agent, text)


class NoPenaltyForGarbage(GuessEnv):
    def _apply(self, agent: str, text: str) -> Outcome:
        out = super()._apply(agent, text)
        return out._replace(local_reward=0.0) if not out.parsed else out


class EchoesRawText(GuessEnv):
    def _apply(self, agent: str, text: str) -> Outcome:
        self._last = text
        return super()._apply(agent, text)

    def _prompt(self, agent: str) -> str:
        return super()._prompt(agent) + f" Last answer: {getattr(self, '_last', '')}"


class AcceptsAnyType(GuessEnv):
    def step(self, action: Any) -> None:
        alive = self.agents and not self.terminations[self.agent_selection]
        super().step(str(action) if alive and not isinstance(action, str) else action)


class VagueTypeError(GuessEnv):
    def step(self, action: Any) -> None:
        if action is not None and not isinstance(action, str):
            raise TypeError("bad action")
        super().step(action)


class LacksInfos(GuessEnv):
    def step(self, action: Any) -> None:
        agent = self.agent_selection
        super().step(action)
        self.infos[agent].pop("team_reward", None)


class RewardIsNotTheSum(GuessEnv):
    def step(self, action: Any) -> None:
        agent = self.agent_selection
        super().step(action)
        self.rewards[agent] *= 2


class UsesTheGlobalRng(GuessEnv):
    def _load_task(self, task_id: Any) -> None:
        super()._load_task(task_id)
        self._target += random.randrange(2)


class SeedsNumpyGlobally(GuessEnv):
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            np.random.seed(seed)
        super().reset(seed=seed, options=options)


class UnseededLevels(GuessEnv):
    def _load_task(self, task_id: Any) -> None:
        super()._load_task(task_id)
        self._target = int(np.random.default_rng().integers(1_000_003))


class OverlappingIds(GuessEnv):
    SPLIT_IDS: ClassVar[dict[str, range]] = {
        **GuessEnv.SPLIT_IDS,
        "validation": range(9_000, 11_000),
    }


class OverlappingContent(GuessEnv):
    def _target_of(self, task_id: int) -> int:
        # Train ids give levels 0..1999, test ids 0..999: half the train ids give a test level
        # (validation's are apart).
        if task_id >= 20_000:
            return task_id - 20_000
        return task_id % 2000 if task_id < 10_000 else task_id


class KeyedContent(OverlappingContent):
    """As OverlappingContent, with a task key: the base class keeps the splits apart then."""

    def _task_key(self) -> int:
        return self._target


class RedrawsOnlySeededResets(KeyedContent):
    """Plays a chosen id as it is, held out or not (mas_envs before the fix of issue 11)."""

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        super().reset(seed=seed, options=options)
        if options and options.get("task_id") is not None:
            self._load_task(options["task_id"])
            self.task_id = options["task_id"]


class ChosenTaskUsesTheGenerator(GuessEnv):
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        super().reset(seed=seed, options=options)
        if options and options.get("task_id") is not None:
            self._target += int(self._rng.integers(1000))


class ServesOutsideItsSplit(GuessEnv):
    def task_ids(self, split: str | None = None) -> range:
        return self.SPLIT_IDS[split or "test"]  # reset draws from task_ids(): the test split


@pytest.mark.parametrize(
    ("env_cls", "rule", "says"),
    [
        (SharesStateWithClones, "clone-independent", "changed"),
        (ClonesWithoutTheGenerator, "clone-exact", "clone the generator"),
        (CrashesOnHostileText, "hostile-text", "raised IndexError"),
        (NoPenaltyForGarbage, "hostile-text", "format penalty"),
        (
            EchoesRawText,
            "hostile-text",
            "observation['prompt'] holds '\u4e2d', a character outside",
        ),
        (AcceptsAnyType, "action-type", "accepted a bytes action"),
        (VagueTypeError, "action-type", "does not say that a str was expected"),
        (LacksInfos, "infos", "lacks ['team_reward']"),
        (RewardIsNotTheSum, "infos", "alpha * team_reward + local_reward"),
        (UsesTheGlobalRng, "global-rng", "global random state changed"),
        (SeedsNumpyGlobally, "global-rng", "global numpy.random state changed"),
        (UnseededLevels, "seeding", "reset(seed="),
        (OverlappingIds, "splits", "is in both 'train' and 'validation'"),
        (OverlappingContent, "splits", "whose content is that of 'test' task"),
        (RedrawsOnlySeededResets, "splits", "reset(options={'task_id': "),
        (ChosenTaskUsesTheGenerator, "seeding", "must not depend on the env's generator"),
        (ServesOutsideItsSplit, "splits", "not one of task_ids('train')"),
    ],
)
def test_fails_on_a_broken_env_naming_the_rule(env_cls, rule, says):
    with pytest.raises(ContractError) as caught:
        text_env_test(env_cls)
    err = caught.value
    assert isinstance(err, AssertionError)
    assert (err.rule, err.env_name) == (rule, f"guess_v0 ({env_cls.__name__})")
    message = str(err)
    assert message.startswith(f"guess_v0 ({env_cls.__name__}) breaks rule {rule!r}: ")
    assert says in message
    assert RULES[rule] in message


def test_a_broken_env_passes_with_its_rule_left_out():
    with pytest.raises(ContractError):
        text_env_test(SharesStateWithClones, rules=["clone-independent"])
    text_env_test(SharesStateWithClones, rules=set(RULES) - {"clone-independent"})


def test_bad_arguments_and_names():
    with pytest.raises(ValueError, match="unknown rules \\['clone'\\]"):
        text_env_test(GuessEnv, rules=["clone"])
    with pytest.raises(ContractError, match=r"^my env breaks rule 'infos'"):
        text_env_test(LacksInfos, name="my env")
    with pytest.raises(ContractError, match="env_fn must accept split="):
        text_env_test(lambda: GuessEnv(), rules=["splits"])


def test_the_checker_does_not_import_torch():
    code = "import sys, mas_envs.test; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
