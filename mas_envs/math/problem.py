"""One math problem with its exact answer, whatever its source (a generator or a dataset file)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Problem"]


@dataclass(frozen=True)
class Problem:
    """A math problem.

    Attributes:
        id: Stable id: ``"<topic>/<level>/<seed>"`` for generated problems (it regenerates the
            same problem), ``"<source>/<file>/<record id>"`` for problems read from files.
        question: The statement shown to the agents (LaTeX inside ``$...$``).
        answer: The ground-truth final answer (LaTeX, no ``\\boxed``); never shown to agents.
        also_accepted: Other answers graded right too, when the source accepted more than one
            (AIME 2022 II problem 8: ``080 or 081``); usually empty.
        source: ``"generated"``, ``"gsm8k"``, ``"math"``, ``"aime"`` or ``"olympiadbench"``.
        topic: The generator's topic, or the dataset's subject/type when it has one.
        level: Difficulty 1 (easiest) to 5 when known, else 0.
        solution: A brief worked solution (the reasoner's oracle reasoning); may be empty.
        code: A short Python program that prints the answer (the tool's oracle); may be empty,
            then the oracle prints the answer literally.
        split: The split a prepared file put the problem in (``"train"``, ``"validation"``,
            ``"test"``), or ``None``: then the env's ``problems=`` mapping or a hash decides.
    """

    id: str
    question: str
    answer: str
    source: str
    topic: str = ""
    level: int = 0
    solution: str = ""
    code: str = ""
    split: str | None = None
    also_accepted: tuple[str, ...] = ()

    @property
    def accepted(self) -> tuple[str, ...]:
        """Every answer graded right: :attr:`answer` first, then :attr:`also_accepted`."""
        return (self.answer, *self.also_accepted)
