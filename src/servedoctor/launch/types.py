"""The values a launch takes and gives back: options, phase spans, probe results, the run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from servedoctor.model import Diagnosis
from servedoctor.remote.url import SshTarget

Outcome = Literal["healthy", "failed", "interrupted"]
FailureKind = Literal[
    "process_exit",  # the server's main process ended
    "fatal_line",  # the log printed a line the engine spec calls fatal
    "port_closed",  # the port stopped accepting connections while the process lived
    "request_error",  # a generation request answered an error (HTTP status or in-stream)
    "request_timeout",  # a generation request got no answer in time
    "no_tokens",  # a generation request succeeded but generated nothing
    "unexpected_text",  # the smoke reply did not match --expect
    "stall",  # no log progress and no probe answer for the phase's stall timeout
    "startup_timeout",  # not ready within --startup-timeout
    "log_write",  # the server's log could not be written (disk full, I/O error)
]

#: Stall timeouts per phase, in seconds: no log line and no probe answer for this long → hang.
DEFAULT_STALL_TIMEOUTS: Mapping[str, float] = MappingProxyType(
    {
        "install": 1800.0,
        "startup": 600.0,
        "load": 1800.0,
        "memory_setup": 900.0,
        "graph_capture": 1200.0,
        "warmup": 900.0,
        "prefill": 600.0,
        "decode": 600.0,
        "serving": 600.0,
        "shutdown": 120.0,
    }
)


@dataclass(frozen=True)
class LaunchOptions:
    """How to launch, probe and judge a server."""

    prompt: str = "Say hello in one sentence."
    max_tokens: int = 16
    request_timeout: float = 60.0
    expect: str | None = None
    keep_running: bool = False  # after a healthy smoke: leave the server running, detached
    attach: bool = False  # after a healthy smoke: stay, supervise, diagnose a later failure
    probe_every_s: float = 30.0  # attached: a generation probe this often (0: none)
    runs_dir: Path = Path("runs")
    stall_timeouts: Mapping[str, float] = field(default_factory=lambda: DEFAULT_STALL_TIMEOUTS)
    startup_timeout: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    quiet: bool = False
    grace_s: float = 10.0  # SIGTERM → SIGKILL
    poll_s: float = 0.25  # supervisor tick
    on: SshTarget | None = None  # run the command on this remote host (``--on ssh://…``)

    def stall_timeout(self, phase: str) -> float:
        return float(self.stall_timeouts.get(phase, DEFAULT_STALL_TIMEOUTS.get(phase, 600.0)))


@dataclass(frozen=True)
class PhaseSpan:
    """One phase of the run, seconds from launch; ``end`` is None while it lasts."""

    name: str
    label: str
    start: float
    end: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "start": round(self.start, 3),
            "end": None if self.end is None else round(self.end, 3),
        }


@dataclass(frozen=True)
class SmokeResult:
    """One generation request: the smoke test or the liveness check after it."""

    kind: Literal["smoke", "liveness"]
    ok: bool
    status: int | None = None
    ttft_s: float | None = None
    latency_s: float | None = None
    tokens: int = 0
    text: str = ""
    error: str | None = None
    timed_out: bool = False
    at_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ok": self.ok,
            "status": self.status,
            "ttft_s": None if self.ttft_s is None else round(self.ttft_s, 4),
            "latency_s": None if self.latency_s is None else round(self.latency_s, 4),
            "tokens": self.tokens,
            "text": self.text,
            "error": self.error,
            "timed_out": self.timed_out,
            "at_s": round(self.at_s, 3),
        }


@dataclass(frozen=True)
class Failure:
    """What the supervisor saw go wrong, and in which phase."""

    kind: FailureKind
    phase: str
    detail: str
    at_s: float
    line: int | None = None  # 1-based log line, for a fatal line
    log_lines: int | None = None  # lines in the log when the failure was seen

    @property
    def is_hang(self) -> bool:
        return self.kind in ("stall", "request_timeout", "startup_timeout")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "phase": self.phase,
            "detail": self.detail,
            "at_s": round(self.at_s, 3),
            "line": self.line,
        }


@dataclass(frozen=True)
class GpuReport:
    """GPU memory the run's processes held (NVML), and whether it was released."""

    peak_mib: float
    before_mib: float
    after_mib: float | None
    released: bool | None
    devices: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "peak_mib": round(self.peak_mib, 1),
            "before_mib": round(self.before_mib, 1),
            "after_mib": None if self.after_mib is None else round(self.after_mib, 1),
            "released": self.released,
            "devices": self.devices,
        }


@dataclass(frozen=True)
class RunResult:
    """How a launch ended; ``to_dict`` is the ``--json`` contract and run.json's core."""

    outcome: Outcome
    run_dir: Path
    phases: tuple[PhaseSpan, ...]
    smoke: SmokeResult | None
    diagnosis: Diagnosis | None
    leftover_processes: int
    exit_code: int | None
    gpu_peak_mib: float | None
    duration_s: float
    liveness: SmokeResult | None = None
    failure: Failure | None = None
    engine: str = "openai"
    pid: int | None = None
    gpu: GpuReport | None = None
    kept_running: bool = False
    attached_s: float | None = None  # seconds supervised after the smoke test (attached)
    stopped_by: str | None = None  # attached and healthy until a signal stopped it

    @property
    def log_path(self) -> Path:
        return self.run_dir / "server.log"

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "engine": self.engine,
            "run_dir": str(self.run_dir),
            "log": str(self.log_path),
            "phases": [p.to_dict() for p in self.phases],
            "smoke": None if self.smoke is None else self.smoke.to_dict(),
            "liveness": None if self.liveness is None else self.liveness.to_dict(),
            "failure": None if self.failure is None else self.failure.to_dict(),
            "diagnosis": None if self.diagnosis is None else self.diagnosis.to_dict(),
            "leftover_processes": self.leftover_processes,
            "exit_code": self.exit_code,
            "pid": self.pid,
            "kept_running": self.kept_running,
            "attached_s": None if self.attached_s is None else round(self.attached_s, 3),
            "stopped_by": self.stopped_by,
            "gpu_peak_mib": None if self.gpu_peak_mib is None else round(self.gpu_peak_mib, 1),
            "gpu": None if self.gpu is None else self.gpu.to_dict(),
            "duration_s": round(self.duration_s, 3),
        }


EventKind = Literal[
    "started",
    "line",
    "phase",
    "progress",
    "memory",
    "ready",
    "probe",
    "failure",
    "teardown",
    "gpu",
    "usage",
    "attached",
    "done",
]


@dataclass(frozen=True)
class LaunchEvent:
    """Something the supervisor noticed, for live displays (``on_event``)."""

    kind: EventKind
    t: float  # seconds since launch
    phase: str
    message: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
