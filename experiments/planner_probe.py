"""How well a warm-started Plan-Path planner copies the path the tool's program printed.

Two measures of a planner policy (a Hugging Face folder, e.g.
``checkpoints/step-000000/planner`` of a ``mas-train`` run), independent of its tokenizer, on
held-out levels of ``mas/PlanPathCode-v1`` (5x5, 22% walls unless ``--rows/--cols/--wall-prob``
say otherwise):

* **copy rate**: the planner's first-turn prompts of the first ``--levels`` test levels, with the
  program's output set to the level's shortest path (the warm start's copy target), answered
  greedily; a copy is an answer equal to the printed line;
* **NLL per answer** (nats, summed over the answer's tokens with the end-of-turn token): the warm
  start's own samples (``mas_trainer.warmstart.oracle_samples``, the tool's oracle share 0.2, no
  system message, as the ``plan-path-tiny`` preset) played on the first ``--levels // 2`` test
  levels, split into "copy" samples (the tool printed a shortest path, which the target repeats)
  and "solve" samples (it did not: the target is a shortest path found from the grid).

docs/results.md ("Why the seeds differed") quotes it for the default preset's warm starts::

    python experiments/planner_probe.py \
        runs/compare3/plan-path-tiny/seed-*/mas-warmstart/checkpoints/step-000000/planner
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path


def planner_prompts(size: dict[str, object], levels: int) -> list[tuple[str, str]]:
    """(first-turn planner prompt with the shortest path printed, that path's answer line)."""
    import mas_envs
    from mas_envs.planpath import prompts
    from mas_envs.programs import ProgramRun, ToolProgram

    code = mas_envs.make("mas/PlanPathCode-v1", split="test", **size)
    team = mas_envs.make("mas/PlanPath-v1", split="test", **size)
    out = []
    for task_id in code.task_ids("test")[:levels]:
        code.reset(options={"task_id": task_id})
        team.reset(options={"task_id": task_id})
        moves = team.oracle_action("planner")
        run = ProgramRun("ok", moves + "\n", "")
        shown = prompts.planner_tail_v1(ToolProgram(0, "", run, ""))
        ask = code.observe("tool")["prompt"]
        out.append((ask.replace(prompts.CODE_ASK_V1, shown), moves))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policies", nargs="+", type=Path, help="planner policy folders")
    parser.add_argument("--levels", type=int, default=200, help="test levels for the copy rate")
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--cols", type=int, default=5)
    parser.add_argument("--wall-prob", type=float, default=0.22)
    args = parser.parse_args()

    import numpy as np
    import torch

    import mas_envs
    from mas_trainer.models import load_model
    from mas_trainer.rollout import encode_prompt
    from mas_trainer.warmstart import oracle_samples

    torch.set_num_threads(1)
    size = {"rows": args.rows, "cols": args.cols, "wall_prob": args.wall_prob}
    cases = planner_prompts(size, args.levels)
    if not cases:
        parser.error("--levels must be at least 1")

    def make_env() -> mas_envs.TextEnv:
        return mas_envs.make("mas/PlanPathCode-v1", split="test", **size)

    nll_tasks = make_env().task_ids("test")[: max(1, args.levels // 2)]
    for folder in args.policies:
        model, tok = load_model(str(folder))
        model.eval()
        copies = 0
        for prompt, moves in cases:
            ids = encode_prompt(tok, {"prompt": prompt}, system=False)
            with torch.no_grad():
                out = model.generate(
                    torch.tensor([ids]), max_new_tokens=24, do_sample=False,
                    eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                )  # fmt: skip
            copies += tok.decode(out[0, len(ids) :], skip_special_tokens=True).strip() == moves
        samples = oracle_samples(
            make_env, tok, {"tool": "tool", "planner": "planner"}, nll_tasks,
            rng=np.random.default_rng(1), system_message=False, oracle_share={"tool": 0.2},
        ).samples  # fmt: skip
        nll: dict[str, list[float]] = {"copy": [], "solve": []}
        for s in samples:
            if s.policy != "planner":
                continue
            prompt = tok.decode(s.prompt_ids)
            target = tok.decode(s.completion_ids, skip_special_tokens=True).strip()
            printed = prompt.rsplit("printed:\n", 1)[-1].split("<|im_end|>")[0].strip()
            ids = torch.tensor([s.prompt_ids + s.completion_ids])
            with torch.no_grad():
                logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
            n = len(s.completion_ids)
            picked = logp[-n:].gather(1, ids[0, -n:, None])
            nll["copy" if printed == target else "solve"].append(-picked.sum().item())
        parts = ", ".join(
            f"{k} {statistics.mean(v):.2f} nats/answer (n={len(v)})" for k, v in nll.items() if v
        )
        print(f"{folder}: copies {copies}/{len(cases)}; NLL {parts}", flush=True)


if __name__ == "__main__":
    main()
