"""Plan-Path's own texts, the corpus the ``planpath-bpe`` tokenizer is trained on in code
(:data:`mas_trainer.models.CORPUS_TOKENIZERS`): prompts and answers of the team, the single agent
and the code-tool variant. Changing it changes the tokenizer of the default run's model."""

from __future__ import annotations

import numpy as np

from mas_envs.planpath import prompts
from mas_envs.programs import ProgramRun, ToolProgram, extract_code
from mas_envs.registry import make

__all__ = ["GRIDS", "tokenizer_corpus"]

GRIDS = ((5, 5, 0.22),)
"""Plan-Path configs whose texts make the corpus: (rows, cols, wall_prob)."""


def tokenizer_corpus(episodes: int = 150, seed: int = 0) -> list[str]:
    """Plan-Path's own texts, the corpus of the ``planpath-bpe`` tokenizer
    (:data:`mas_trainer.models.CORPUS_TOKENIZERS`).

    For each grid of :data:`GRIDS`, ``episodes`` training-split levels of
    ``mas/PlanPath-v1`` for the team and as many for the single agent, played with a mix of the
    oracle's and random answers: every prompt, the oracle's answer and a random answer. For the
    first turn of each team level also the ``mas/PlanPathCode-v1`` texts: the tool's prompt, the
    oracle program and a random print program, and the planner's prompt showing each with the
    moves it prints (composed with the env's prompt functions; no program runs). Seeded resets of
    the training split only (held-out levels are redrawn); deterministic.
    """
    rng = np.random.default_rng(seed)
    oracle_program = prompts.oracle_program_v1()
    texts: list[str] = []
    for rows, cols, wall_prob in GRIDS:
        size = {"rows": rows, "cols": cols, "wall_prob": wall_prob}
        team = make("mas/PlanPath-v1", **size)
        single = make("mas/PlanPath-v1", mode="single", **size)
        code = make("mas/PlanPathCode-v1", **size)
        for env in (team, single):
            for ep in range(episodes):
                level_seed = seed * 1_000_003 + ep
                env.reset(seed=level_seed)
                if env is team:
                    code.reset(seed=level_seed)  # the same level
                    ask = code.observe("tool")["prompt"]
                    printed = [
                        (oracle_program, env.oracle_action("planner")),
                        (code.random_action(rng, "tool"), env.random_action(rng, "planner")),
                    ]
                    for reply, moves in printed:
                        program = extract_code(reply, bare=False) or ""
                        run = ProgramRun("ok", moves + "\n", "")
                        shown = prompts.planner_tail_v1(ToolProgram(0, program, run, ""))
                        texts += [ask, reply, ask.replace(prompts.CODE_ASK_V1, shown)]
                for agent in env.agent_iter():
                    if env.terminations[agent] or env.truncations[agent]:
                        env.step(None)
                        continue
                    oracle, random = env.oracle_action(agent), env.random_action(rng, agent)
                    texts += [env.observe(agent)["prompt"], oracle, random]
                    env.step(oracle if rng.random() < 0.6 else random)
    return texts
