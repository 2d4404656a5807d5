"""The OpenEnv server, started by its one command, driven over real HTTP and WebSocket.

`mas-openenv` runs in a subprocess on 127.0.0.1; the test talks to it with plain HTTP and with
OpenEnv's own WebSocket client (`EnvClient`, typed as `MasEnvClient`), and plays each episode in
lockstep with a local env to check every observation and reward. Marked `adapters`.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openenv_server
import pytest

pytest.importorskip("openenv.core", reason="needs the openenv extra: pip install -e '.[openenv]'")

import mas_envs
from mas_envs.adapters.openenv import MasAction, MasEnvClient

pytestmark = pytest.mark.adapters
ROOT = Path(__file__).resolve().parents[2]


def _http(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    proc, port = openenv_server.start()
    try:
        yield f"http://127.0.0.1:{port}"
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


def _http_error(url: str, body: dict) -> tuple[int, str]:
    with pytest.raises(urllib.error.HTTPError) as err:
        _http(url, body)
    return err.value.code, json.loads(err.value.read())["detail"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"env_id": "mas/PlanPth-v0"}, "did you mean 'mas/PlanPath-v0'"),
        ({"env_kwargs": {"rows": 100}}, "rows must be an int in [2, 32]"),
        ({"task_idd": 4}, "unknown reset options ['task_idd']"),
        ({"split": "dev"}, "split"),
        ({"plays": ["pilot"]}, "pilot"),
    ],
)
def test_http_reset_answers_bad_options_with_400_and_the_message(server, body, message):
    """Issue 32: these were bare 500s, the message only in the server's log."""
    code, detail = _http_error(f"{server}/reset", body)
    assert code == 400 and message in detail


def test_http_step_is_refused_with_a_message_naming_the_websocket_client(server):
    """HTTP /step gets a fresh env per request (OpenEnv's one-shot HTTP): it cannot continue an
    episode, and said so only as a bare 500 in the server's log."""
    _http(f"{server}/reset", {"seed": 0})
    code, detail = _http_error(f"{server}/step", {"action": {"text": "#### R"}})
    assert code == 409 and "MasEnvClient" in detail and "WebSocket" in detail


def test_websocket_message_that_is_json_but_not_an_object_keeps_the_session(server):
    from websockets.sync.client import connect

    with connect(server.replace("http://", "ws://") + "/ws") as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
        agent = json.loads(ws.recv())["data"]["observation"]["agent"]
        for not_an_object in ("[]", "3", '"step"', "null"):
            ws.send(not_an_object)
            reply = json.loads(ws.recv())
            assert reply["type"] == "error" and "JSON object" in reply["data"]["message"]
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv())["data"]["agent"] == agent  # the same session, still there
        ws.send(json.dumps({"type": "step", "data": {"text": "#### R"}}))
        assert json.loads(ws.recv())["data"]["observation"]["acted"] == agent


def test_the_dockerfiles_server_command_serves_and_passes_its_healthcheck():
    """No Docker engine on these machines: run the image's CMD and HEALTHCHECK commands as the
    container would (the port moved to a free one)."""
    dockerfile = (ROOT / "environments" / "openenv" / "Dockerfile").read_text()
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", dockerfile, re.M).group(1))
    check = re.search(r"CMD (python -c .*)$", dockerfile, re.M).group(1)
    assert cmd[0] == "mas-openenv" and cmd[cmd.index("--host") + 1] == "0.0.0.0"
    script = shutil.which("mas-openenv", path=str(Path(sys.executable).parent))
    assert script, "mas-openenv is not installed next to this Python (pip install -e .)"
    port = str(openenv_server.free_port())
    proc = subprocess.Popen(
        [script, *[port if a == "8000" else a for a in cmd[1:]]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        argv = shlex.split(check.replace("8000", port))
        healthcheck = [sys.executable, *argv[1:]]
        openenv_server.wait_until_serving(
            proc,
            lambda: subprocess.run(healthcheck, capture_output=True).returncode == 0,
            "the image's HEALTHCHECK",
        )
        out = _http(f"http://127.0.0.1:{port}/reset", {"seed": 1})
        assert out["observation"]["env_id"] == "mas/PlanPath-v0" and not out["done"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_mas_openenv_help_shows_the_defaults():
    out = subprocess.run(
        [sys.executable, "-m", "mas_envs.adapters.openenv", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    out = " ".join(out.split())  # argparse wraps lines
    assert "(default: mas/PlanPath-v0)" in out and "(default: 8000)" in out
    assert "(default: 127.0.0.1)" in out and "(default: 16)" in out
