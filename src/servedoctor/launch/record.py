"""run.json: what a supervised run keeps on disk, with every secret masked.

Written when the run starts (outcome ``running``) and rewritten when it ends, so a reader —
or the next ``servedoctor fix`` — always finds the command, the options and the phases so far.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from servedoctor import __version__
from servedoctor.launch.process import Teardown
from servedoctor.launch.timeline import Timeline
from servedoctor.launch.types import LaunchOptions, PhaseSpan, RunResult, SmokeResult
from servedoctor.redact import redact_argv, redact_env, redact_text

SCHEMA_VERSION = 1


def run_record(
    *,
    outcome: str | None,
    engine: str,
    argv: Sequence[str],
    options: LaunchOptions,
    endpoint_url: str,
    started_at: str,
    run_dir: Path,
    log_path: Path,
    pid: int | None,
    warnings: Sequence[str],
    phases: Sequence[PhaseSpan],
    supervisor: Mapping[str, Any] | None = None,
    reaper_pid: int | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """The part of run.json known from the start of the run.

    ``supervisor`` (pid and create time of the servedoctor process), ``reaper_pid`` and
    ``run_id`` (the environment marker of the server's processes) let a later command tell
    a run whose supervisor is gone from one still running.
    """
    return {
        "schema": SCHEMA_VERSION,
        "servedoctor": __version__,
        "outcome": outcome,
        "engine": engine,
        "command": redact_argv(list(argv)),
        "env_overrides": redact_env(dict(options.env)),
        "endpoint": endpoint_url,
        "started_at": started_at,
        "run_dir": str(run_dir),
        "log": str(log_path),
        "pid": pid,
        "supervisor": None if supervisor is None else dict(supervisor),
        "reaper_pid": reaper_pid,
        "run_id": run_id,
        "options": {
            "prompt": redact_text(options.prompt),
            "max_tokens": options.max_tokens,
            "request_timeout": options.request_timeout,
            "expect": options.expect,
            "keep_running": options.keep_running,
            "startup_timeout": options.startup_timeout,
            "stall_timeouts": dict(options.stall_timeouts),
        },
        "warnings": list(warnings),
        "phases": [p.to_dict() for p in phases],
    }


def add_result(
    record: dict[str, Any],
    result: RunResult,
    *,
    timeline: Timeline,
    probes: dict[str, Any],
    teardown: Teardown | None,
    stop_with: str | None,
) -> None:
    """Complete ``record`` with how the run ended."""
    record.update(result.to_dict())
    record["probes"] = probes
    record["progress"] = {
        k: {"done": v.done, "total": v.total, "percent": v.percent}
        for k, v in timeline.progress.items()
    }
    record["memory_gib"] = dict(timeline.memory_gib)
    record["teardown"] = None if teardown is None else teardown.to_dict()
    if stop_with is not None:
        record["stop_with"] = stop_with


def probes_record(
    *,
    ready_at: float | None,
    model: str | None,
    smoke: SmokeResult | None,
    liveness: SmokeResult | None,
    health_after_failure: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "ready_at_s": None if ready_at is None else round(ready_at, 3),
        "model": model,
        "smoke": None if smoke is None else smoke.to_dict(),
        "liveness": None if liveness is None else liveness.to_dict(),
        "health_after_failure": health_after_failure,
    }
