"""mas-code: Code (mas/Code-v0) as a verifiers environment.

A coder writes a program, a tester writes cases; hidden tests judge. Each role (coder, tester) is
an agent of the env (``--env.<role>.model`` and so on); mas_envs.adapters.verifiers has the episode
loop.
"""

from mas_envs.adapters.verifiers import CodeTeamEnv, family_taskset

CodeTaskset = family_taskset("Code", ["mas/Code-v0"])

__all__ = ["CodeTaskset", "CodeTeamEnv"]
