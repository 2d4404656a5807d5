"""The envs in other frameworks: one module per framework, each behind an extra of its own.

- `mas_envs.adapters.roles` (no extra): `RolePlay`, the roles of a team mapped onto one policy.
- `mas_envs.adapters.verifiers` (extra `verifiers`): verifiers tasksets and team `Env`s
  (`vf-eval`, the Environments Hub; the packages are in `environments/`).
- `mas_envs.adapters.openenv` (extra `openenv`): an OpenEnv server for every env id.
- `mas_envs.adapters.skyrl` (extra `skyrl`): every env id as a skyrl-gym `BaseTextEnv`.
- `mas_envs.adapters.trl` (extra `trl`): a TRL reward function and an `environment_factory`.

Only `roles` is imported here; each framework module imports its framework and fails with the
install command when it is missing. docs/integrations.md shows each one in use.
"""

from mas_envs.adapters.roles import RolePlay, Step, Turn, scripted_policy

__all__ = ["RolePlay", "Step", "Turn", "scripted_policy"]
