"""Golden transcripts: every prompt of a seeded episode, stored as a file and compared exactly.

A change to a golden transcript is a change to what agents see, so it needs a version bump of the
env id. Regenerate after a deliberate change with ``python tests/helpers/golden.py mas/Sokoban-v0``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mas_envs

GOLDEN_DIR = Path(__file__).parents[1] / "golden"
SEED = 7
BAD_ANSWER = "I am not sure what to do here."


def golden_path(env_id: str) -> Path:
    name = env_id.split("/")[-1].lower().replace("-", "_")
    return GOLDEN_DIR / f"{name}.txt"


def transcript(env_id: str) -> str:
    """The transcript of a seeded test-split episode: one format error, then the oracle."""
    parts = []
    for mode in ("mas", "single"):
        env = mas_envs.make(env_id, mode=mode, split="test")
        env.reset(seed=SEED)
        first = True
        for agent in env.agent_iter():
            _, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            obs = env.observe(agent)
            action = BAD_ANSWER if first else env.oracle_action(agent)
            first = False
            env.step(action)
            info = env.infos[agent]
            parts.append(
                f"===== mode={mode} turn={info['turn']} agent={agent} =====\n"
                f"--- system ---\n{obs['system']}\n--- prompt ---\n{obs['prompt']}\n"
                f"--- action ---\n{action}\n--- reward ---\n{env.rewards[agent]!r} "
                f"parsed={info['parsed']} success={info['success']} reason={info['reason']!r}\n"
            )
    return "\n".join(parts)


def check(env_id: str) -> None:
    """Assert that ``env_id``'s transcript equals its stored golden file."""
    path = golden_path(env_id)
    regen = f"python tests/helpers/golden.py {env_id}"
    assert path.exists(), f"no golden transcript for {env_id}; run `{regen}`"
    assert transcript(env_id) == path.read_text(encoding="utf-8"), (
        f"prompts of {env_id} changed: bump the env version, note it in the card's version "
        f"history, and regenerate with `{regen}`"
    )


if __name__ == "__main__":
    for env_id in sys.argv[1:] or mas_envs.list_envs():
        golden_path(env_id).write_text(transcript(env_id), encoding="utf-8")
        print(f"wrote {golden_path(env_id)}")
