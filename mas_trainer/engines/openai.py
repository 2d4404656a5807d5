"""An engine over any OpenAI-compatible HTTP server (vLLM's ``vllm serve``, or a hosted API).

Two modes, chosen by the method you call:

* **Token mode** (:meth:`OpenAIEngine.generate`, the :class:`~mas_trainer.engines.Engine`
  protocol): prompt token ids go to ``POST {base_url}/completions`` as ``"prompt": [ids]`` and the
  completion comes back as token ids with their log-probs. vLLM's server accepts token-id prompts
  and returns ids with ``"return_token_ids": true`` (and ``"logprobs": 0`` for log-probs; as
  ``"token_id:<n>"`` strings with ``"return_tokens_as_token_ids": true`` in older versions); both
  forms are read. Servers that cannot return ids (most hosted APIs) fail here with a message that
  points to text mode. vLLM reports the log-probs of the model's raw distribution unless the
  server runs with ``--logprobs-mode processed_logprobs``; for greedy evaluation it does not matter.
* **Text mode** (:meth:`OpenAIEngine.chat`): chat messages to ``POST {base_url}/chat/completions``
  and the reply text back. Any chat endpoint works; the server applies its own chat template, so
  the exact prompt tokens are the server's business (a result file records ``chat_template_sha256:
  null`` for such entries). The template's thinking switch (Qwen3's ``enable_thinking``) goes to
  the server as ``"chat_template_kwargs": {"enable_thinking": ...}``, the extra field vLLM's and
  SGLang's servers read; ``enable_thinking=None`` sends no such field (hosted APIs reject it).
  In token mode the caller applies the template, switch included, before the ids are sent.

Every request has a timeout (seconds, per socket operation), is retried with exponential backoff
(jitter from the engine's own generator) on connection errors, timeouts, HTTP 429 and 5xx and on
a reply that is not valid JSON, and is never retried on other 4xx (a bad request stays bad: the
error carries the server's message). A thread pool keeps at most ``concurrency`` requests in flight.
As the OpenAI client does, the server defaults to ``$OPENAI_BASE_URL`` (else OpenAI's own API,
``https://api.openai.com/v1``) and the API key is read from an environment variable
(``api_key_env``, default ``OPENAI_API_KEY``) at construction; when the key is unset no
``Authorization`` header is sent (local servers need none). Only the standard library is used.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mas_trainer.engines import Completion, SamplingParams

__all__ = ["DEFAULT_BASE_URL", "OpenAIEngine", "OpenAIError"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""The server when neither ``base_url`` nor ``$OPENAI_BASE_URL`` names one (the OpenAI client's)."""


class OpenAIError(RuntimeError):
    """A request failed for good (after retries, or a 4xx that retrying cannot fix).

    Attributes:
        status: The HTTP status of the last attempt (None: no HTTP reply, e.g. a timeout).
        attempts: How many attempts were made.
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class _Retryable(Exception):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class OpenAIEngine:
    """Generation through an OpenAI-compatible server.

    Args:
        base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``; None: ``$OPENAI_BASE_URL``,
            else :data:`DEFAULT_BASE_URL`.
        model: The served model name (``"model"`` in each request).
        api_key_env: Environment variable that holds the API key (unset: no key is sent).
        timeout: Seconds per request (connect and each read).
        max_retries: Retries after the first attempt (0: no retry).
        backoff: First retry delay in seconds; doubles each retry (with up to 25% jitter).
        max_backoff: Cap of one delay.
        concurrency: Most requests in flight at once.
        stop: Extra stop strings for text mode (token mode stops at the model's stop tokens).
        seed: Seed of the jitter generator.
    """

    def __init__(
        self,
        base_url: str | None,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        concurrency: int = 8,
        stop: Sequence[str] = (),
        seed: int = 0,
    ) -> None:
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if timeout <= 0 or concurrency < 1 or max_retries < 0 or backoff < 0:
            raise ValueError(
                "need timeout > 0, concurrency >= 1, max_retries >= 0 and backoff >= 0; got "
                f"timeout={timeout}, concurrency={concurrency}, max_retries={max_retries}, "
                f"backoff={backoff}"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.concurrency = concurrency
        self.stop = list(stop)
        self._key = os.environ.get(api_key_env) or None
        self._jitter = random.Random(seed)

    # ------------------------------------------------------------------ HTTP

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    def _once(self, method: str, path: str, body: Mapping[str, Any] | None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base_url + path, data=data, headers=self._headers(), method=method
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:500].decode(errors="replace")
            if e.code == 429 or e.code >= 500:
                raise _Retryable(f"HTTP {e.code}: {detail}", e.code) from None
            raise OpenAIError(
                f"{method} {self.base_url + path}: HTTP {e.code} (not retried): {detail}",
                status=e.code,
            ) from None
        except TimeoutError as e:
            raise _Retryable(f"timed out after {self.timeout} s ({e})") from None
        except (urllib.error.URLError, ConnectionError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, TimeoutError):
                raise _Retryable(f"timed out after {self.timeout} s") from None
            raise _Retryable(f"connection failed: {reason}") from None
        try:
            return json.loads(raw)
        except json.JSONDecodeError as e:
            raise _Retryable(f"the reply is not valid JSON ({e}): {raw[:200]!r}", 200) from None

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """One API call with retries; returns the decoded JSON reply.

        Raises:
            OpenAIError: A 4xx other than 429 (at once), or the last error once retries run out.
        """
        status: int | None = None
        for attempt in range(self.max_retries + 1):
            try:
                return self._once(method, path, body)
            except _Retryable as e:
                status = e.status
                if attempt == self.max_retries:
                    raise OpenAIError(
                        f"{method} {self.base_url + path} failed after {attempt + 1} attempt(s): "
                        f"{e}",
                        status=status,
                        attempts=attempt + 1,
                    ) from None
                delay = min(self.max_backoff, self.backoff * 2**attempt)
                time.sleep(delay * (1 + 0.25 * self._jitter.random()))
        raise AssertionError("unreachable")  # pragma: no cover

    def _map(self, fn: Any, items: Sequence[Any]) -> list[Any]:
        if len(items) <= 1 or self.concurrency == 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    # ------------------------------------------------------------------ API

    def model_info(self) -> dict[str, Any]:
        """The served model's entry of ``GET /models`` (``{}`` if the server lists no such model).

        vLLM's entry has ``root`` (the path or hub id it loaded) and ``max_model_len``.
        """
        reply = self.request("GET", "/models")
        for m in reply.get("data", []) if isinstance(reply, dict) else []:
            if isinstance(m, dict) and m.get("id") == self.model:
                return m
        return {}

    def _sampling(self, params: SamplingParams, seed: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_tokens,
            "temperature": 0.0 if params.is_greedy else params.temperature,
            "top_p": 1.0 if params.is_greedy else params.top_p,
        }
        if seed is not None:
            body["seed"] = seed
        return body

    def generate(
        self, prompts: list[list[int]], params: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        """Token mode: one completion per prompt of token ids (vLLM's completions endpoint).

        Raises:
            OpenAIError: A request failed, or the server returned no token ids (use
                :meth:`chat`, text mode, with such servers).
        """
        if any(len(p) == 0 for p in prompts):
            raise ValueError("generate: every prompt needs at least one token")
        base = self._sampling(params, seed)
        base.update(logprobs=0, return_token_ids=True, return_tokens_as_token_ids=True)

        def one(prompt: list[int]) -> Completion:
            reply = self.request(
                "POST", "/completions", {**base, "prompt": [int(t) for t in prompt]}
            )
            return _parse_completion(reply, self.base_url)

        return self._map(one, prompts)

    def chat(
        self,
        conversations: Sequence[Sequence[Mapping[str, str]]],
        params: SamplingParams,
        seed: int | None = None,
        *,
        enable_thinking: bool | None = None,
    ) -> list[str]:
        """Text mode: the reply text to each conversation (a list of ``{"role", "content"}``).

        ``enable_thinking`` (not None) is sent as ``chat_template_kwargs`` for the server's chat
        template; None leaves the template's own default (a server that rejects the field needs
        None: its HTTP 400 says so).
        """
        base = self._sampling(params, seed)
        if self.stop:
            base["stop"] = self.stop
        if enable_thinking is not None:
            base["chat_template_kwargs"] = {"enable_thinking": bool(enable_thinking)}

        def one(messages: Sequence[Mapping[str, str]]) -> str:
            try:
                reply = self.request(
                    "POST", "/chat/completions", {**base, "messages": list(messages)}
                )
            except OpenAIError as e:
                if e.status == 400 and "chat_template_kwargs" in base:
                    raise OpenAIError(
                        f"{e} (the request carried chat_template_kwargs={{'enable_thinking': "
                        f"{enable_thinking}}}: a server that rejects that field needs "
                        "enable_thinking=None, mas-eval --enable-thinking default)",
                        status=e.status,
                        attempts=e.attempts,
                    ) from None
                raise
            try:
                content = reply["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                raise OpenAIError(
                    f"{self.base_url}/chat/completions: reply has no choices[0].message.content: "
                    f"{json.dumps(reply)[:200]}"
                ) from None
            return content or ""  # a refusal or tool call can carry null content

        return self._map(one, conversations)

    def load_weights(self, state_dict: Mapping[str, Any]) -> None:
        """A served model's weights live in the server: pushing weights is not supported.

        Raises:
            NotImplementedError: Always; train with the transformers or vLLM engine.
        """
        raise NotImplementedError(
            "OpenAIEngine serves evaluation only: a remote server's weights cannot be updated "
            "from here (train with TransformersEngine or the vLLM engine)"
        )


def _parse_completion(reply: Any, where: str) -> Completion:
    """Token ids, log-probs and finish reason of a completions reply (vLLM's two id formats)."""
    try:
        choice = reply["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise OpenAIError(
            f"{where}/completions: reply has no choices[0]: {json.dumps(reply)[:200]}"
        ) from None
    lp = choice.get("logprobs") or {}
    ids = choice.get("token_ids")
    if ids is None and lp.get("tokens") is not None:
        try:
            ids = [int(str(t).removeprefix("token_id:")) for t in lp["tokens"]]
        except ValueError:
            ids = None
    if ids is None:
        raise OpenAIError(
            f"{where}/completions returned no token ids (vLLM returns them with "
            "return_token_ids); this server supports text mode only: use the chat mode "
            "(--openai-mode chat)"
        )
    logprobs = lp.get("token_logprobs")
    if logprobs is None or len(logprobs) != len(ids):
        # No log-probs from the server: NaN, so that any use in a loss fails loudly, never silently.
        logprobs = [math.nan] * len(ids)
    finish = "length" if choice.get("finish_reason") == "length" else "stop"
    return Completion(
        [int(i) for i in ids], [math.nan if x is None else float(x) for x in logprobs], finish
    )
