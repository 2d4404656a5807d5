"""``mas-demo``: the oracle and a random policy play every env; prints a summary table.

The oracle is the ceiling (it answers from the solver), the random policy the floor (well-formed
random answers). Both run on each env's test split, in ``mode="mas"``, with fixed seeds.
"""

from __future__ import annotations

import argparse
import time

import mas_envs
from mas_envs.policies import EpisodeResult, oracle_policy, play_episode, random_policy

__all__ = ["main", "summarise"]


def summarise(env_id: str, policy_name: str, episodes: int, seed: int = 0) -> dict[str, object]:
    """Play ``episodes`` test-split episodes of ``env_id``; return one table row."""
    env = mas_envs.make(env_id, split="test")
    results: list[EpisodeResult] = []
    start = time.perf_counter()
    for i in range(episodes):
        policy = oracle_policy if policy_name == "oracle" else random_policy(seed + i)
        results.append(play_episode(env, policy, seed=seed + i))
    elapsed = time.perf_counter() - start
    return {
        "env": env_id,
        "policy": policy_name,
        "success": sum(r.success for r in results) / episodes,
        "return": sum(sum(r.returns.values()) for r in results) / episodes,
        "turns": sum(r.turns for r in results) / episodes,
        "episodes/s": episodes / elapsed,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mas-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20, help="episodes per env and policy")
    parser.add_argument("--env", action="append", help="env id (repeatable; default: all)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    args = parser.parse_args(argv)
    env_ids = args.env or mas_envs.list_envs()
    header = f"{'env':<20} {'policy':<7} {'success':>8} {'return':>8} {'turns':>6} {'ep/s':>8}"
    print(header)
    print("-" * len(header))
    for env_id in env_ids:
        for policy in ("oracle", "random"):
            row = summarise(env_id, policy, args.episodes, args.seed)
            print(
                f"{env_id:<20} {policy:<7} {row['success']:>8.0%} {row['return']:>8.2f} "
                f"{row['turns']:>6.2f} {row['episodes/s']:>8.0f}"
            )


if __name__ == "__main__":
    main()
