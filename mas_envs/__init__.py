"""mas_envs: PettingZoo environments whose agents act in text, for multi-agent LLM RL.

Importing this package registers every env id in PettingZoo's and Gymnasium's registries::

    import mas_envs, pettingzoo
    env = pettingzoo.make("aec", "mas/PlanPath-v0")   # or mas_envs.make("mas/PlanPath-v0")

This package never imports torch.
"""

from mas_envs.base import SPLITS, Outcome, TextEnv
from mas_envs.registry import ENVS, list_envs, make, make_parallel, make_single, register_all

__all__ = [
    "ENVS",
    "SPLITS",
    "Outcome",
    "TextEnv",
    "list_envs",
    "make",
    "make_parallel",
    "make_single",
]
__version__ = "0.1.0"

register_all()
