"""Plan-Path: grid path planning with a tool agent and a planner (``mas/PlanPath-v0``)."""

from mas_envs.planpath.env import PlanPathEnv

__all__ = ["PlanPathEnv"]
