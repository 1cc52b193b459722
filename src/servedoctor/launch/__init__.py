"""Supervised launch: start a server, follow its phases, smoke-test it, diagnose failures."""

from __future__ import annotations

from servedoctor.launch.process import check_command
from servedoctor.launch.supervisor import launch
from servedoctor.launch.types import (
    DEFAULT_STALL_TIMEOUTS,
    Failure,
    GpuReport,
    LaunchEvent,
    LaunchOptions,
    PhaseSpan,
    RunResult,
    SmokeResult,
)

__all__ = [
    "DEFAULT_STALL_TIMEOUTS",
    "Failure",
    "GpuReport",
    "LaunchEvent",
    "LaunchOptions",
    "PhaseSpan",
    "RunResult",
    "SmokeResult",
    "check_command",
    "launch",
]
