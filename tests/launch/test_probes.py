"""The chat probe against scripted HTTP answers: what a cut or failing stream leaves behind."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from servedoctor.launch.endpoint import Endpoint
from servedoctor.launch.probes import TokenProgress, chat
from servedoctor.launch.types import SmokeResult

ENDPOINT = Endpoint("127.0.0.1", 1, "/health", "/v1/models", "/v1/chat/completions")


def _delta(text: str) -> bytes:
    chunk = {"choices": [{"delta": {"content": text}, "finish_reason": None}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


class _Events(httpx.SyncByteStream):
    def __init__(self, events: list[bytes], then: Exception | None = None) -> None:
        self.events, self.then = events, then

    def __iter__(self) -> Iterator[bytes]:
        yield from self.events
        if self.then is not None:
            raise self.then


def _client(events: list[bytes], then: Exception | None = None) -> httpx.Client:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_Events(events, then))

    return httpx.Client(transport=httpx.MockTransport(answer))


def _smoke(client: httpx.Client, progress: TokenProgress | None = None) -> SmokeResult:
    return chat(
        client,
        ENDPOINT,
        kind="smoke",
        prompt="Say hello in one sentence.",
        max_tokens=8,
        timeout=5.0,
        model=None,
        stream=True,
        progress=progress,
    )


def test_stream_cut_mid_answer_keeps_what_streamed() -> None:
    progress = TokenProgress()
    cut = httpx.RemoteProtocolError("peer closed connection without sending complete message")
    result = _smoke(_client([_delta("Hello"), _delta(" there")], then=cut), progress)
    assert not result.ok
    assert result.tokens == 2
    assert result.text == "Hello there"
    assert result.error is not None and result.error.startswith("RemoteProtocolError")
    assert result.ttft_s is not None


@pytest.mark.parametrize(
    "event",
    [
        {"error": {"message": "CUDA error: device-side assert triggered", "code": 500}},
        {"object": "error", "message": "CUDA error: device-side assert triggered", "code": 500},
    ],
    ids=["sglang", "vllm"],
)
def test_error_event_in_stream(event: dict[str, object]) -> None:
    error_line = b"data: " + json.dumps(event).encode() + b"\n\n"
    result = _smoke(_client([_delta("Hi"), error_line]))
    assert not result.ok
    assert result.text == "Hi"
    assert result.error == "error in stream: CUDA error: device-side assert triggered"


def test_complete_stream_is_ok() -> None:
    done = b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
    result = _smoke(_client([_delta("Hello."), done]))
    assert result.ok and result.text == "Hello." and result.tokens == 1
