"""mas-math: Math (mas/Math-v0, mas/Math-v1) as a verifiers environment.

A tool agent runs Python in the sandbox, a reasoner answers in \\boxed{}. Each role (tool,
reasoner) is an agent of the env (``--env.<role>.model`` and so on); mas_envs.adapters.verifiers
has the episode loop.
"""

from mas_envs.adapters.verifiers import MathTeamEnv, family_taskset

MathTaskset = family_taskset("Math", ["mas/Math-v0", "mas/Math-v1"])

__all__ = ["MathTaskset", "MathTeamEnv"]
