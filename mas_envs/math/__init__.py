"""Math env family: a tool agent (Python in the sandbox) and reasoners answering in ``\\boxed{}``."""

from mas_envs.math.env import MathEnv

__all__ = ["MathEnv"]
