"""mas-sokoban: Sokoban (mas/Sokoban-v0, mas/SokobanCode-v0) as a verifiers environment.

A tool agent proposes moves (or writes a program that prints them), a planner pushes the box. Each
role (tool, planner) is an agent of the env (``--env.<role>.model`` and so on);
mas_envs.adapters.verifiers has the episode loop.
"""

from mas_envs.adapters.verifiers import GameTeamEnv, family_taskset

SokobanTaskset = family_taskset("Sokoban", ["mas/Sokoban-v0", "mas/SokobanCode-v0"])

__all__ = ["GameTeamEnv", "SokobanTaskset"]
