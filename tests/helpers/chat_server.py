"""A small OpenAI-compatible chat server on 127.0.0.1 for the adapter tests.

It answers ``POST /v1/chat/completions`` (plain JSON, or server-sent events when the request asks
for ``stream``) and ``GET /v1/models`` with the text of a policy function ``messages -> str``, and
records every request. The adapter tests point real third-party clients (``vf-eval``) at it, so
the client side is the package's own code and only the model is scripted.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Policy = Callable[[list[dict[str, Any]]], str]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class ChatServer:
    """Serves ``policy`` as the model ``model`` on a free port of 127.0.0.1."""

    def __init__(self, policy: Policy, model: str = "scripted") -> None:
        self.policy = policy
        self.model = model
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": server.model}]})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                server.requests.append(body)
                messages = [
                    {"role": m.get("role"), "content": _text(m.get("content"))}
                    for m in body.get("messages", [])
                ]
                text = server.policy(messages)
                cid, now = f"chatcmpl-{len(server.requests)}", int(time.time())
                prompt_tokens = sum(len(m["content"]) for m in messages)
                usage = {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": len(text),
                    "total_tokens": prompt_tokens + len(text),
                }
                if not body.get("stream"):
                    self._json(
                        200,
                        {
                            "id": cid,
                            "object": "chat.completion",
                            "created": now,
                            "model": server.model,
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": usage,
                        },
                    )
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {"id": cid, "object": "chat.completion.chunk", "created": now}
                chunks = [
                    {"index": 0, "delta": {"role": "assistant", "content": text}},
                    {"index": 0, "delta": {}, "finish_reason": "stop"},
                ]
                for choice in chunks:
                    event = {**base, "model": server.model, "choices": [choice]}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                last = {**base, "model": server.model, "choices": [], "usage": usage}
                self.wfile.write(f"data: {json.dumps(last)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def chat_server(policy: Policy, model: str = "scripted") -> Iterator[ChatServer]:
    """A running `ChatServer`, shut down on exit."""
    server = ChatServer(policy, model)
    try:
        yield server
    finally:
        server.close()
