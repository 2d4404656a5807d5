"""Finding held-out problems in training data: normalised text, its hash, and n-gram overlap.

Two problems are the same when their *normalised* statements are equal (Unicode NFKC, case
folded, LaTeX spacing and sizing commands dropped, ``\\dfrac``/``\\tfrac`` read as ``\\frac``,
then only the runs of letters and digits kept, one space apart): ``$\\dfrac{1}{2}$ of  $X$`` and
``\\frac12 of x`` differ, but ``\\left( x \\right)`` and ``(x)`` do not. That catches copies that
differ in spacing, markup or punctuation (APPS' ``-----Input-----`` headers against
CodeContests' ``Input``). Near copies (an edited sentence, another example block) are caught by
word 8-gram overlap: a training problem is a near copy of a held-out one when at least
``threshold`` of the smaller one's 8-grams are in both. 8-grams that occur in many held-out
problems (boilerplate such as "the first line contains a single integer t") are not evidence
and are ignored. Removing a training problem by mistake costs one training problem; keeping a
test problem in training makes the test score meaningless, so the threshold errs towards
removing (0.5 by default).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["HeldOutIndex", "Match", "fingerprint", "normalize"]

NGRAM = 8
_SPACING = re.compile(
    r"\\(?:left|right|big|bigg|Big|Bigg|displaystyle|textstyle|,|;|!|:|quad|qquad)(?![a-zA-Z])"
)
_WORDS = re.compile(r"[^\W_]+")


def normalize(text: str) -> str:
    """The comparison form of a statement: its letter/digit runs, lower case, one space apart."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = t.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    t = _SPACING.sub(" ", t)
    return " ".join(_WORDS.findall(t))


def fingerprint(text: str) -> str:
    """SHA-256 (first 16 hex digits) of :func:`normalize`: equal for exact copies."""
    return hashlib.sha256(normalize(text).encode()).hexdigest()[:16]


def _ngrams(norm: str) -> set[int]:
    words = norm.split()
    return {hash(tuple(words[i : i + NGRAM])) for i in range(len(words) - NGRAM + 1)}


@dataclass(frozen=True)
class Match:
    """A training problem found among the held-out ones.

    Attributes:
        held_out: The held-out problem's key (``"<set>/<split>:<id>"``).
        method: ``"exact"`` (equal normalised text) or ``"near"`` (8-gram overlap).
        score: The overlap share (1.0 for exact copies).
    """

    held_out: str
    method: str
    score: float


class HeldOutIndex:
    """Held-out problems (test, validation) to look training problems up in.

    Args:
        problems: ``(key, statement)`` pairs of the held-out problems.
        threshold: Share of the smaller problem's 8-grams that must be shared for a near copy;
            0 turns near matching off (exact copies only).
        common: An 8-gram in more than this many held-out problems is boilerplate, not evidence
            (at least 10, or 1% of the held-out problems).
    """

    def __init__(
        self, problems: Iterable[tuple[str, str]], threshold: float = 0.5, common: int = 0
    ) -> None:
        if not 0 <= threshold <= 1:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        self.threshold = threshold
        self._exact: dict[str, str] = {}
        grams: dict[str, set[int]] = {}
        for key, text in problems:
            norm = normalize(text)
            self._exact.setdefault(hashlib.sha256(norm.encode()).hexdigest(), key)
            grams[key] = _ngrams(norm)
        counts = Counter(g for gs in grams.values() for g in gs)
        limit = common or max(10, len(grams) // 100)
        self._common = {g for g, n in counts.items() if n > limit}
        self._size: dict[str, int] = {}
        self._postings: dict[int, list[str]] = {}
        for key, gs in grams.items():
            kept = gs - self._common
            self._size[key] = len(kept)
            for g in kept:
                self._postings.setdefault(g, []).append(key)

    def __len__(self) -> int:
        return len(self._size)

    def find(self, text: str) -> Match | None:
        """The held-out problem that ``text`` copies (exactly first, then the nearest), if any."""
        norm = normalize(text)
        exact = self._exact.get(hashlib.sha256(norm.encode()).hexdigest())
        if exact is not None:
            return Match(exact, "exact", 1.0)
        if self.threshold == 0 or not self._postings:
            return None
        mine = _ngrams(norm) - self._common
        if not mine:
            return None
        shared: Counter[str] = Counter()
        for g in mine:
            for key in self._postings.get(g, ()):
                shared[key] += 1
        best: Match | None = None
        for key, n in shared.items():
            score = n / max(1, min(len(mine), self._size[key]))
            if score >= self.threshold and (best is None or score > best.score):
                best = Match(key, "near", round(score, 4))
        return best
