"""Sokoban for LLM agents: ``mas/Sokoban-v0`` (the card is :mod:`mas_envs.sokoban.env`)."""

from mas_envs.sokoban.env import SokobanEnv

__all__ = ["SokobanEnv"]
