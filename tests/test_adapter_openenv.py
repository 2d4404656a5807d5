"""The OpenEnv server, started by its one command, driven over real HTTP and WebSocket.

`mas-openenv` runs in a subprocess on 127.0.0.1; the test talks to it with plain HTTP and with
OpenEnv's own WebSocket client (`EnvClient`, typed as `MasEnvClient`), and plays each episode in
lockstep with a local env to check every observation and reward. Marked `adapters`.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

pytest.importorskip("openenv.core", reason="needs the openenv extra: pip install 'mas-rl[openenv]'")

import mas_envs
from mas_envs.adapters.openenv import MasAction, MasEnvClient

pytestmark = pytest.mark.adapters


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "mas_envs.adapters.openenv", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if proc.poll() is not None:
                pytest.fail(f"mas-openenv exited: {proc.stdout.read() if proc.stdout else ''}")
            try:
                if _http(f"{url}/health")["status"] == "healthy":
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("mas-openenv did not become healthy in 30 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_schema_types_action_observation_and_state(server):
    schema = _http(f"{server}/schema")
    assert "text" in schema["action"]["properties"]
    assert {"agent", "system", "prompt", "messages", "info"} <= set(
        schema["observation"]["properties"]
    )
    # openenv-core 0.3 shows its base State in /schema and HTTP /state (their response model);
    # the typed state comes over the WebSocket (test_websocket_session_plays_a_whole_team_episode)
    assert {"episode_id", "step_count"} <= set(_http(f"{server}/state"))


@pytest.mark.parametrize("env_id", mas_envs.list_envs())
def test_http_reset_serves_every_env_id(server, env_id):
    out = _http(f"{server}/reset", {"env_id": env_id, "seed": 3, "split": "test"})
    local = mas_envs.make(env_id, split="test")
    local.reset(seed=3)
    agent = local.agent_selection
    obs = out["observation"]
    assert obs["agent"] == agent and out["done"] is False
    assert obs["prompt"] == local.observe(agent)["prompt"]
    assert obs["messages"][0] == {"role": "system", "content": local.observe(agent)["system"]}


def test_websocket_session_plays_a_whole_team_episode(server):
    local = mas_envs.make("mas/PlanPath-v0", rows=5, cols=5)
    local.reset(seed=7)
    with MasEnvClient(base_url=server).sync() as client:
        result = client.reset(env_id="mas/PlanPath-v0", seed=7, env_kwargs={"rows": 5, "cols": 5})
        steps, returns = 0, dict.fromkeys(local.possible_agents, 0.0)
        while not result.done:
            agent = result.observation.agent
            assert agent == local.agent_selection
            assert result.observation.prompt == local.observe(agent)["prompt"]
            text = local.oracle_action(agent)
            local.step(text)
            result = client.step(MasAction(text=text))
            steps += 1
            assert result.observation.acted == agent
            assert result.reward == pytest.approx(local.rewards[agent])
            returns[agent] += local.rewards[agent]
        state = client.state()
    assert steps >= 2 and result.observation.success and state.success
    assert state.task_id == local.task_id and state.step_count == steps
    assert state.returns == pytest.approx(returns)


def test_one_role_against_a_scripted_teammate_and_bad_text(server):
    with MasEnvClient(base_url=server).sync() as client:
        result = client.reset(env_id="mas/Sokoban-v0", seed=1, plays=["planner"], others="oracle")
        assert result.observation.agent == "planner"  # the tool already spoke
        assert "proposal" in result.observation.prompt.lower()
        result = client.step(MasAction(text="\u00e9\x00 no moves here"))
        assert result.reward < 0 and result.observation.info["parsed"] is False
        assert not result.done and result.observation.agent == "planner"
        with pytest.raises(Exception, match="unknown reset options"):
            client.reset(env_id="mas/Sokoban-v0", task_idd=4)
