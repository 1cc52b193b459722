"""The generation requests a supervised run sends: the smoke test, then the liveness check.

Each runs in its own thread so that the supervision loop keeps reading the log, polling the
process and watching the port while the server generates (or hangs).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Literal

import httpx

from servedoctor.launch.endpoint import Endpoint
from servedoctor.launch.probes import TokenProgress, chat
from servedoctor.launch.types import LaunchOptions, SmokeResult

RequestKind = Literal["smoke", "liveness"]

#: The liveness check only needs to show that generation still works.
_LIVENESS_MAX_TOKENS = 4
#: Past its own timeout, how long a request may run before the loop gives up on it.
_OVERDUE_GRACE_S = 2.0


@dataclass
class ProbeRequest:
    kind: RequestKind
    started: float  # time.monotonic()
    timeout: float
    progress: TokenProgress = field(default_factory=TokenProgress)
    result: SmokeResult | None = None
    thread: threading.Thread | None = None

    @property
    def done(self) -> bool:
        return self.result is not None

    def overdue(self, mono: float) -> bool:
        return mono - self.started > self.timeout + _OVERDUE_GRACE_S

    def unanswered(self, mono: float, *, t0: float) -> SmokeResult:
        """The result of a request the client never ended: what streamed, and a timeout."""
        return SmokeResult(
            self.kind,
            False,
            None,
            self.progress.first_token_s,
            mono - self.started,
            self.progress.tokens,
            self.progress.text,
            f"no answer within {self.timeout:g} s",
            True,
            self.started - t0,
        )


def start_request(
    client: httpx.Client,
    endpoint: Endpoint,
    options: LaunchOptions,
    kind: RequestKind,
    *,
    model: str | None,
    t0: float,
) -> ProbeRequest:
    """Send one request in a background thread; its result lands on the returned object.

    The smoke request streams (to time the first token) and checks ``--expect``; the
    liveness request is short and plain.
    """
    request = ProbeRequest(kind, time.monotonic(), options.request_timeout)
    smoke = kind == "smoke"
    max_tokens = options.max_tokens if smoke else min(options.max_tokens, _LIVENESS_MAX_TOKENS)

    def work() -> None:
        request.result = chat(
            client,
            endpoint,
            kind=kind,
            prompt=options.prompt,
            max_tokens=max_tokens,
            timeout=options.request_timeout,
            model=model,
            stream=smoke,
            expect=options.expect if smoke else None,
            progress=request.progress,
            t0=t0,
        )

    request.thread = threading.Thread(target=work, name=f"servedoctor-{kind}", daemon=True)
    request.thread.start()
    return request


def probe_message(result: SmokeResult) -> str:
    """One line for the live display."""
    if result.ok:
        ttft = "" if result.ttft_s is None else f", first token {result.ttft_s * 1000:.0f} ms"
        return f"{result.kind} ok: {result.tokens} tokens in {result.latency_s or 0:.2f} s{ttft}"
    return f"{result.kind} failed: {result.error}"
