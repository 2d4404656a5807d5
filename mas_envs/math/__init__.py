"""Math env family: a tool agent runs Python in the sandbox, reasoners answer in ``\\boxed{}``."""

from mas_envs.math.env import MathEnv

__all__ = ["MathEnv"]
