"""Does memorised text solve a preset's task? The probe of issue 29, claim 1.

Every role but the last answers one constant text (the oracle's first answer on the first
training task), the last role copies the last ``####`` line of its prompt
(:func:`mas_envs.policies.memorised_team`). The share of the first ``--episodes`` test tasks this
team solves is printed per preset: a task that RL is said to learn should keep it at 20% or less
(``tests/envs/test_memorised_probe.py`` checks the presets that claim it).

    python experiments/memorised_probe.py [PRESET ...] [--episodes 200] [--split test]
        [--section.field value ...]

Measured (2026-12-06, 5x5, 22% walls, 3 turns, the first 200 test levels):

=====================================================================  =====================
command                                                                solved
=====================================================================  =====================
``memorised_probe.py plan-path-tiny`` (mas/PlanPathCode-v1, the team)  200/200 = 100%
``... --env.mode tool --algo.policy_map shared`` (v1, the tool alone)  200/200 = 100%
``... --env.id mas/PlanPathCode-v2`` (the team)                        38/200 = 19%
``... --env.id mas/PlanPathCode-v2 --env.options '{"rows": 7,          30/200 = 15%
"cols": 7, "wall_prob": 0.22}'``
=====================================================================  =====================

An env with one role (the tool alone) answers the constant alone: no role copies.
"""

from __future__ import annotations

import argparse


def preset_success(preset: str, episodes: int, split: str, overrides: list[str]) -> float:
    """:func:`~mas_envs.policies.memorised_success` on ``preset``'s env as it trains (id, mode,
    options, turns)."""
    from mas_envs.policies import memorised_success
    from mas_trainer.config import build_config
    from mas_trainer.rollout import env_factory

    cfg = build_config(preset, overrides=overrides)
    make_env = env_factory(
        cfg.env.id,
        mode=cfg.env.mode,
        max_turns=cfg.env.max_turns,
        **{"alpha": cfg.env.alpha, **cfg.env.options},
    )
    return memorised_success(make_env, episodes, split=split)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("presets", nargs="*", default=["plan-path-tiny"], help="mas-train presets")
    parser.add_argument("--episodes", type=int, default=200, help="tasks of the split to play")
    parser.add_argument("--split", default="test", help="split to play (test or validation)")
    args, overrides = parser.parse_known_args()
    for preset in args.presets:
        share = preset_success(preset, args.episodes, args.split, overrides)
        n = round(share * args.episodes)
        print(
            f"{preset}: memorised text solves {n}/{args.episodes} = {100 * share:.1f}% "
            f"of the first {args.split} tasks",
            flush=True,
        )


if __name__ == "__main__":
    main()
