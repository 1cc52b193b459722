"""What a supervised run has seen so far: its state, its events, and the log lines it parsed.

The base of the supervisor (``supervisor.py`` starts and ends the run, ``watch.py`` follows
it): it turns each line the log tailer hands over into timeline facts and events, and builds
the :class:`Failure` records the run ends with.
"""

from __future__ import annotations

import errno
import os
import queue
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from servedoctor.engines import EngineSpec
from servedoctor.launch.endpoint import Endpoint, flag_value
from servedoctor.launch.logtail import LogTail, TailLine, describe_write_error
from servedoctor.launch.process import Server, describe_exit
from servedoctor.launch.signals import StopSignals
from servedoctor.launch.telemetry import GpuTelemetry
from servedoctor.launch.timeline import Timeline
from servedoctor.launch.types import (
    EventKind,
    Failure,
    FailureKind,
    LaunchEvent,
    LaunchOptions,
    SmokeResult,
)
from servedoctor.redact import redact_text

EventSink = Callable[[LaunchEvent], None]

#: The failure kind of a log that cannot be written (disk full first of all).
LOG_WRITE: FailureKind = "log_write"
_DETAIL_CHARS = 500
_QUEUE_BATCHES = 16  # read batches waiting for the parser (bounds memory, not the server)


#: A server saying where it listens: uvicorn, llama.cpp, aiohttp and Flask style lines.
_LISTENING = re.compile(
    r"(?i)(?:running on|listening on|listening at|serving on)\s+(?:https?://)?"
    r"(?P<host>\[[^\]]+\]|[\w.\-]+):(?P<port>\d{2,5})\b"
)


class RunState:
    """State shared by the supervisor's parts; see the module doc."""

    proc: Server
    tail: LogTail
    gpu: GpuTelemetry
    run_dir: Path
    log_path: Path

    def __init__(
        self,
        argv: list[str],
        spec: EngineSpec,
        endpoint: Endpoint,
        options: LaunchOptions,
        on_event: EventSink | None,
    ) -> None:
        self.argv = argv
        self.spec = spec
        self.endpoint = endpoint
        self.opt = options
        self.on_event = on_event
        self.t0 = time.monotonic()
        self.lines: queue.Queue[Sequence[TailLine]] = queue.Queue(maxsize=_QUEUE_BATCHES)
        self.timeline = Timeline(spec, t0=self.t0)
        self.client = httpx.Client(trust_env=False)
        self.warnings: list[str] = []
        self.smoke: SmokeResult | None = None
        self.liveness: SmokeResult | None = None
        self.health_after_failure: dict[str, Any] | None = None
        self.ready_at: float | None = None
        self.attached_at: float | None = None  # when the attached watch began (seconds)
        self.probes_ok = 0  # attached generation probes that passed
        self.last_activity = self.t0
        self.last_line_number = 0
        self.model: str | None = None
        self.signals = StopSignals()
        self.finishing = False
        # no port flag: the engine's default is a guess until the server says where it listens
        self.port_from_log = flag_value(argv, spec.port_flags) is None

    # -- events -----------------------------------------------------------------------
    def emit(self, kind: EventKind, message: str = "", data: dict[str, Any] | None = None) -> None:
        if self.on_event is None:
            return
        event = LaunchEvent(kind, self.now(), self.timeline.phase, message, data or {})
        try:
            self.on_event(event)
        except (OSError, SystemExit) as exc:
            # output closed (``| head``, a lost terminal; rich turns EPIPE into SystemExit):
            # end like Ctrl-C
            self.on_event = None
            self.warnings.append(f"output closed ({exc}); run stopped")
            if not self.finishing:
                raise KeyboardInterrupt from None

    def now(self) -> float:
        return time.monotonic() - self.t0

    # -- log lines ----------------------------------------------------------------------
    def _drain(self, timeout: float) -> None:
        """Take the log lines read so far (waiting up to ``timeout`` for the first)."""
        try:
            batch = self.lines.get(timeout=timeout) if timeout > 0 else self.lines.get_nowait()
        except queue.Empty:
            return
        while True:
            for line in batch:
                self._take(line)
            try:
                batch = self.lines.get_nowait()
            except queue.Empty:
                return

    def _learn_port(self, text: str) -> None:
        """Take the port from the server's own 'running on …:PORT' line (once)."""
        m = _LISTENING.search(text)
        if m is None:
            return
        self.port_from_log = False
        port = int(m.group("port"))
        if 0 < port < 65536 and port != self.endpoint.port:
            self.warnings.append(
                f"the server says it listens on port {port} (no port flag; "
                f"{self.spec.display}'s default is {self.endpoint.port}): probing {port}"
            )
            self.endpoint = replace(self.endpoint, port=port)

    def _count(self, batch: Sequence[TailLine]) -> None:
        """At the end of the run: lines are only counted, not parsed."""
        for line in batch:
            if not line.partial and line.text:
                self.last_line_number = line.number

    def _take(self, line: TailLine) -> None:
        if not line.partial and line.text:
            self.last_line_number = line.number
            if self.port_from_log:
                self._learn_port(line.text)
        self.last_activity = max(self.last_activity, line.t)
        facts = self.timeline.feed(line.number, line.text, line.t, partial=line.partial)
        if self.on_event is not None and not line.partial:
            data: dict[str, Any] = {"number": line.number}
            if line.cut:
                data["cut"] = True
            self.emit("line", line.text, data)
        if facts.phase_changed:
            self.emit("phase", self.timeline.label, {"phase": self.timeline.phase})
        if facts.progress is not None:
            p = facts.progress
            self.emit(
                "progress",
                p.name,
                {"name": p.name, "done": p.done, "total": p.total, "fraction": p.fraction},
            )
        if facts.memory is not None:
            self.emit("memory", facts.memory[0], {"name": facts.memory[0], "gib": facts.memory[1]})

    # -- failures -----------------------------------------------------------------------
    def _log_failure(self, code: int | None) -> Failure | None:
        """The log cannot be written (a write failed, or the disk has no block left)."""
        exc = self.tail.error
        if exc is None:
            try:
                full = os.statvfs(self.run_dir).f_bavail == 0
            except OSError:
                full = False
            if not full:
                return None
            exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        detail = describe_write_error(exc, self.log_path)
        if code is not None:
            detail += f" (the server process ended: {describe_exit(code)})"
        return self._failure(LOG_WRITE, detail, self.timeline.phase)

    def _fatal_failure(self, code: int | None) -> Failure:
        assert self.timeline.fatal_line is not None
        number, text = self.timeline.fatal_line
        text = text.strip()
        if len(text) > _DETAIL_CHARS:  # a cut line's head is up to 64 KiB
            text = text[:_DETAIL_CHARS] + "…"
        tail = "" if code is None else f" (then the server process ended: {describe_exit(code)})"
        return self._failure(
            "fatal_line",
            f"fatal log line {number}: {text}{tail}",
            self.timeline.phase,
            line=number,
        )

    def _failure(
        self, kind: FailureKind, detail: str, phase: str, *, line: int | None = None
    ) -> Failure:
        return Failure(kind, phase, redact_text(detail), self.now(), line, self.last_line_number)
