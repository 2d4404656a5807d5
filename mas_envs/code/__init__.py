"""The code env family: a coder and a tester on programming problems (``mas/Code-v0``)."""

from mas_envs.code.env import CodeEnv

__all__ = ["CodeEnv"]
