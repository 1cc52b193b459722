"""HTTP probes of a server: port open, health, model name, and timed chat completions.

The smoke request streams, to measure the time to the first token; the liveness request
after it does not, because ``/health`` can answer 200 while generation is dead or hung.
"""

from __future__ import annotations

import json
import re
import socket
import time
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from servedoctor.launch.endpoint import Endpoint
from servedoctor.launch.types import SmokeResult


def port_open(endpoint: Endpoint, *, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass(frozen=True)
class Health:
    ok: bool
    status: int | None
    path: str | None
    error: str | None = None


def check_health(client: httpx.Client, endpoint: Endpoint, *, timeout: float = 2.0) -> Health:
    """GET the health path (the models path when the engine has none, or it is 404)."""
    paths = [p for p in (endpoint.health_path, endpoint.models_path) if p]
    last = Health(False, None, None, "no health path")
    for path in paths:
        try:
            resp = client.get(endpoint.base_url + path, timeout=timeout)
        except httpx.HTTPError as exc:
            return Health(False, None, path, _describe(exc))
        if resp.status_code == 200:
            return Health(True, 200, path)
        last = Health(False, resp.status_code, path, f"HTTP {resp.status_code}")
        if resp.status_code != 404:
            break
    return last


def model_name(client: httpx.Client, endpoint: Endpoint, *, timeout: float = 2.0) -> str | None:
    """The first model id of /v1/models (servers like vLLM insist on it), if any."""
    try:
        resp = client.get(endpoint.base_url + endpoint.models_path, timeout=timeout)
        data = resp.json().get("data") or []
        return str(data[0]["id"]) if resp.status_code == 200 and data else None
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


class TokenProgress:
    """Shared with the supervisor while a request runs: what has streamed so far.

    Kept outside the request so that a stream cut short (the server died, the deadline
    passed) still reports the tokens and the text it produced before it stopped.
    """

    def __init__(self) -> None:
        self.tokens = 0
        self.first_token_s: float | None = None
        self.pieces: list[str] = []

    def add(self, content: str, elapsed_s: float) -> None:
        self.pieces.append(content)
        self.tokens += 1
        if self.first_token_s is None:
            self.first_token_s = elapsed_s

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def chat(
    client: httpx.Client,
    endpoint: Endpoint,
    *,
    kind: Literal["smoke", "liveness"],
    prompt: str,
    max_tokens: int,
    timeout: float,
    model: str | None,
    stream: bool,
    expect: str | None = None,
    progress: TokenProgress | None = None,
    t0: float = 0.0,
) -> SmokeResult:
    """One chat completion; ok when it generated ≥ 1 token (and matched ``expect``)."""
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": stream,
    }
    if model:
        body["model"] = model
    if stream:
        body["stream_options"] = {"include_usage": True}
    progress = progress or TokenProgress()
    started = time.monotonic()
    at = started - t0
    url = endpoint.base_url + endpoint.chat_path
    try:
        if stream:
            status, text, tokens, error = _stream(client, url, body, timeout, progress, started)
        else:
            status, text, tokens, error = _plain(client, url, body, timeout)
    except httpx.TimeoutException:
        return _unanswered(kind, progress, started, at, f"no answer within {timeout:g} s", True)
    except httpx.HTTPError as exc:
        return _unanswered(kind, progress, started, at, _describe(exc), False)
    latency = time.monotonic() - started
    ok = error is None and tokens >= 1
    if ok and expect is not None and not re.search(expect, text):
        ok, error = False, f"reply does not match --expect {expect!r}"
    elif error is None and tokens < 1:
        error = "the reply generated no token"
    return SmokeResult(
        kind, ok, status, progress.first_token_s, latency, tokens, text, error, False, at
    )


def _plain(
    client: httpx.Client, url: str, body: dict[str, Any], timeout: float
) -> tuple[int, str, int, str | None]:
    resp = client.post(url, json=body, timeout=timeout)
    if resp.status_code != 200:
        return resp.status_code, "", 0, f"HTTP {resp.status_code}: {_short(resp.text)}"
    try:
        data = resp.json()
        text = data["choices"][0]["message"].get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return resp.status_code, "", 0, f"unreadable reply: {_short(resp.text)}"
    usage = data.get("usage") or {}
    tokens = int(usage.get("completion_tokens") or (1 if text else 0))
    return resp.status_code, text, tokens, None


def _stream(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    timeout: float,
    progress: TokenProgress,
    started: float,
) -> tuple[int, str, int, str | None]:
    deadline = started + timeout
    usage_tokens: int | None = None
    done = False
    with client.stream("POST", url, json=body, timeout=timeout) as resp:
        if resp.status_code != 200:
            resp.read()
            return resp.status_code, "", 0, f"HTTP {resp.status_code}: {_short(resp.text)}"
        for line in resp.iter_lines():
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout("stream deadline passed")
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(payload)
            except ValueError:
                continue
            if not isinstance(chunk, dict):
                continue
            error = _stream_error(chunk)
            if error is not None:
                return resp.status_code, progress.text, progress.tokens, error
            usage = chunk.get("usage") or {}
            if usage.get("completion_tokens") is not None:
                usage_tokens = int(usage["completion_tokens"])
            for choice in chunk.get("choices") or []:
                done = done or bool(choice.get("finish_reason"))
                delta = choice.get("delta") or {}
                content = delta.get("content") or delta.get("reasoning_content") or ""
                if content:
                    progress.add(content, time.monotonic() - started)
    text = progress.text
    if not done:
        return resp.status_code, text, progress.tokens, "stream ended without a finish reason"
    tokens = usage_tokens if usage_tokens is not None else progress.tokens
    return resp.status_code, text, tokens, None


def _stream_error(chunk: dict[str, Any]) -> str | None:
    """An error event inside a stream: SGLang's ``{"error": {...}}`` or vLLM's
    ``{"object": "error", "message": ...}``."""
    if "error" in chunk:
        err = chunk["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
    elif chunk.get("object") == "error":
        msg = chunk.get("message", chunk)
    else:
        return None
    return f"error in stream: {_short(str(msg))}"


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(exc: Exception) -> str:
    name = type(exc).__name__
    msg = str(exc)
    return f"{name}: {msg}" if msg else name


def _unanswered(
    kind: Literal["smoke", "liveness"],
    progress: TokenProgress,
    started: float,
    at: float,
    error: str,
    timed_out: bool,
) -> SmokeResult:
    """A request that got no complete answer: what streamed before it stopped, and why."""
    return SmokeResult(
        kind,
        False,
        None,
        progress.first_token_s,
        time.monotonic() - started,
        progress.tokens,
        progress.text,
        error,
        timed_out,
        at,
    )
