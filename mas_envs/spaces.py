"""Text spaces shared by every env: the character set and the observation/action spaces.

Gymnasium's ``Text`` space needs a finite character set. Ours covers printable ASCII, the
whitespace an LLM writes, and the Unicode blocks that task statements use (Latin-1, Greek,
punctuation, arrows, math operators, box drawing). Text that an env echoes back into a prompt
(a model's earlier answer, a problem statement) passes through :func:`clean_text`, which maps any
other character to U+FFFD, so every observation is inside its space.
"""

from __future__ import annotations

import re

from gymnasium import spaces

__all__ = [
    "CHARSET",
    "MAX_ACTION_CHARS",
    "MAX_PROMPT_CHARS",
    "action_space",
    "clean_text",
    "observation_space",
]

_RANGES = [
    (0x20, 0x7E),  # printable ASCII
    (0xA0, 0x17F),  # Latin-1 supplement, Latin extended-A
    (0x370, 0x3FF),  # Greek
    (0x2010, 0x205E),  # general punctuation
    (0x2070, 0x209C),  # super/subscripts
    (0x2190, 0x21FF),  # arrows
    (0x2200, 0x22FF),  # mathematical operators
    (0x2500, 0x257F),  # box drawing
    (0x25A0, 0x25FF),  # geometric shapes
]
CHARSET: str = "\t\n" + "".join(chr(c) for lo, hi in _RANGES for c in range(lo, hi + 1)) + "\ufffd"
"""Every character an observation may contain."""

MAX_PROMPT_CHARS = 262_144
"""Upper bound on the length of a system text or a prompt."""

MAX_ACTION_CHARS = 65_536
"""Default upper bound on an action's length; longer text gets a format penalty."""

_OUTSIDE = re.compile(
    "[^\\t\\n\ufffd" + "".join(f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in _RANGES) + "]"
)


def clean_text(text: str) -> str:
    """Return ``text`` with every character outside :data:`CHARSET` replaced by U+FFFD."""
    return _OUTSIDE.sub("\ufffd", text)


def observation_space() -> spaces.Dict:
    """A new observation space: ``{"system": Text, "prompt": Text}``.

    A ``Dict`` without an ``"observation"`` key keeps PettingZoo's ``api_test`` from reading the
    ``dtype`` of a ``Text`` space (which it does not have).
    """
    text = spaces.Text(min_length=0, max_length=MAX_PROMPT_CHARS, charset=CHARSET)
    return spaces.Dict({"system": text, "prompt": text})


def action_space(max_chars: int = MAX_ACTION_CHARS) -> spaces.Text:
    """A new action space: any text of at most ``max_chars`` characters."""
    return spaces.Text(min_length=0, max_length=max_chars, charset=CHARSET)
