"""mas-planpath: Plan-Path (mas/PlanPath-v0, mas/PlanPathCode-v0) as a verifiers environment.

A tool agent proposes a path (or, in the Code id, writes a program that prints it), a planner moves
on the grid. Each role (tool, planner) is an agent of the env (``--env.<role>.model`` and so on);
mas_envs.adapters.verifiers has the episode loop.
"""

from mas_envs.adapters.verifiers import GameTeamEnv, family_taskset

PlanPathTaskset = family_taskset("PlanPath", ["mas/PlanPath-v0", "mas/PlanPathCode-v0"])

__all__ = ["GameTeamEnv", "PlanPathTaskset"]
