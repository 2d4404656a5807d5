"""The verifiers adapter against the real package: `vf-eval` plays teams through a served model.

The model is `tests/helpers/chat_server.py` on 127.0.0.1; everything else is verifiers' own code:
its CLI, the environment loader, the interception server, the `null` harness (a chat program in a
subprocess) and its trace files. Marked `adapters` (CI runs these after installing the extra).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "verifiers.v1", reason="needs the verifiers extra: pip install -e '.[verifiers]'"
)

from chat_server import chat_server

import mas_envs
from mas_envs.policies import oracle_policy

pytestmark = pytest.mark.adapters

ROOT = Path(__file__).resolve().parents[2]
PLANPATH = {"rows": 4, "cols": 4}


def _oracle_answers(env_id: str, n: int, env_kwargs: dict) -> dict[tuple[str, str], str]:
    """(system, prompt) -> the oracle's text, for every turn of the first n test tasks."""
    answers = {}
    env = mas_envs.make(env_id, split="test", **env_kwargs)
    for task_id in env.task_ids("test")[:n]:
        env.reset(options={"task_id": task_id})
        while not (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
            agent = env.agent_selection
            obs = env.observe(agent)
            answers[obs["system"], obs["prompt"]] = text = oracle_policy(env, agent)
            env.step(text)
    return answers


def _vf_eval(tmp_path: Path, base_url: str, *args: str) -> list[dict]:
    """Run the real `vf-eval` on mas-planpath; return its episodes (traces.jsonl rows)."""
    vf_eval = Path(sys.executable).with_name("vf-eval")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "environments" / "mas_planpath"), str(ROOT)]),
    }
    cmd = [
        str(vf_eval), "mas-planpath", "--model", "scripted", "--client.base-url", base_url,
        "--client.api-key-var", "MAS_TEST_NO_KEY", "--no-push", "--no-rich",
        "--output-dir", str(tmp_path / "outputs"), "--env.taskset.env-kwargs", json.dumps(PLANPATH),
        *args,
    ]  # fmt: skip
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (traces,) = (tmp_path / "outputs").glob("*/traces.jsonl")
    return [json.loads(line) for line in traces.read_text().splitlines()]


def test_load_environment_builds_the_team_env_over_the_test_split():
    sys.path.insert(0, str(ROOT / "environments" / "mas_planpath"))
    from mas_envs.adapters.verifiers import GameTeamEnv, load_environment

    env = load_environment("mas-planpath", taskset={"num_tasks": 3, "env_kwargs": PLANPATH})
    assert isinstance(env, GameTeamEnv)
    tasks = list(env.taskset)
    want = mas_envs.make("mas/PlanPath-v0").task_ids("test")[:3]
    assert [t.data.task_id for t in tasks] == list(want)
    first = mas_envs.make("mas/PlanPath-v0", split="test", **PLANPATH)
    first.reset(options={"task_id": want[0]})
    assert tasks[0].data.prompt == first.observe("tool")["prompt"]
    assert tasks[0].data.system_prompt == first.observe("tool")["system"]
    with pytest.raises(Exception, match="mas/PlanPath-v7"):
        load_environment("mas-planpath", taskset={"env_id": "mas/PlanPath-v7"})


def test_vf_eval_plays_the_team_and_scores_every_turn(tmp_path):
    answers = _oracle_answers("mas/PlanPath-v0", 2, PLANPATH)

    def policy(messages):
        return answers[messages[0]["content"], messages[1]["content"]]

    with chat_server(policy) as server:
        episodes = _vf_eval(tmp_path, server.base_url, "-n", "2")
    assert len(episodes) == 2 and all(ep["ok"] for ep in episodes)
    expected = mas_envs.make("mas/PlanPath-v0", split="test", **PLANPATH)
    for ep in episodes:
        traces = ep["traces"]
        roles = [t["agent"]["name"] for t in traces]
        assert roles[:2] == ["tool", "planner"], roles  # each role is its own agent
        result = mas_envs.policies.play_episode(
            expected, oracle_policy, options={"task_id": ep["task"]["data"]["task_id"]}
        )
        assert result.success
        for t in traces:
            assert t["metrics"]["success"] == 1.0 and t["metrics"]["parsed"] == 1.0
        # every turn's reward is the env's reward for that action; they add up to the returns
        by_role = dict.fromkeys(roles, 0.0)
        for t in traces:
            by_role[t["agent"]["name"]] += t["rewards"]["reward"]["score"]
        assert by_role == pytest.approx(result.returns)


def test_scripted_teammate_frozen_role_and_an_unparseable_model(tmp_path):
    with chat_server(lambda messages: "I am not sure.") as server:
        episodes = _vf_eval(
            tmp_path, server.base_url, "-n", "1", "--env.scripted", '{"tool": "oracle"}',
            "--env.frozen", '["planner"]',
        )  # fmt: skip
        assert len(server.requests) == 3  # the planner's three turns; the tool made no call
    (ep,) = episodes
    traces = ep["traces"]
    assert [t["agent"]["name"] for t in traces] == ["planner"] * 3
    for t in traces:
        assert t["metrics"]["parsed"] == 0.0 and t["metrics"]["success"] == 0.0
        assert t["rewards"]["reward"]["score"] < 0  # the format penalty, not a crash
        assert "####" in t["info"]["mas"]["reason"]
        assert t["agent"]["trainable"] is False  # --env.frozen: not training data
