"""run.json: what a supervised run keeps on disk, with every secret masked.

Written when the run starts (outcome ``running``) and rewritten when it ends, so a reader —
or the next ``servedoctor fix`` — always finds the command, the options and the phases so far.
The second half reads runs back: :func:`list_runs`, :func:`find_run` (``last``, an id or a
folder) and :func:`diagnose_recorded` (``servedoctor diagnose RUN_DIR``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from servedoctor import __version__
from servedoctor.engines.command import parse_command
from servedoctor.errors import UserError
from servedoctor.launch.process import Teardown
from servedoctor.launch.rundir import LOG_NAME, RUN_JSON
from servedoctor.launch.timeline import Timeline
from servedoctor.launch.types import Failure, LaunchOptions, PhaseSpan, RunResult, SmokeResult
from servedoctor.model import Diagnosis, Evidence
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
            "attach": options.attach,
            "probe_every_s": options.probe_every_s,
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


# ---- reading runs back: ``servedoctor runs`` and ``servedoctor diagnose RUN_DIR`` ----


@dataclass(frozen=True)
class RunSummary:
    """One run folder as listed by ``servedoctor runs``."""

    id: str  # the folder's name
    path: Path
    started_at: str | None
    engine: str | None
    outcome: str | None
    phase: str | None  # the last phase the timeline reached
    duration_s: float | None
    started: float  # epoch seconds (run.json's mtime when started_at is missing), for sorting
    record: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "started_at": self.started_at,
            "engine": self.engine,
            "outcome": self.outcome,
            "phase": self.phase,
            "duration_s": self.duration_s,
            "path": str(self.path),
        }

    @property
    def ended(self) -> float:
        """When the run ended (its start when its duration is unknown, e.g. abandoned)."""
        return self.started + (self.duration_s or 0.0)


def read_record(run_dir: Path) -> dict[str, Any]:
    """A run folder's run.json; :class:`UserError` when it has none or it is not JSON."""
    path = run_dir / RUN_JSON
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{run_dir}: not a run folder (no {RUN_JSON})") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read it: {exc}") from None
    if not isinstance(record, dict):
        raise UserError(f"{path}: not a run record")
    return record


def last_phase(record: Mapping[str, Any]) -> str | None:
    phases = record.get("phases")
    if isinstance(phases, list) and phases and isinstance(phases[-1], dict):
        name = phases[-1].get("name")
        return name if isinstance(name, str) else None
    return None


def summarise(run_dir: Path, record: dict[str, Any]) -> RunSummary:
    started_at = record.get("started_at")
    started_at = started_at if isinstance(started_at, str) else None
    started: float | None = None
    if started_at:
        with contextlib.suppress(ValueError):
            started = datetime.fromisoformat(started_at).timestamp()
    if started is None:
        try:
            started = (run_dir / RUN_JSON).stat().st_mtime
        except OSError:
            started = 0.0
    duration = record.get("duration_s")
    if not isinstance(duration, (int, float)) or isinstance(duration, bool):
        duration = None
    engine, outcome = record.get("engine"), record.get("outcome")
    return RunSummary(
        id=run_dir.name,
        path=run_dir,
        started_at=started_at,
        engine=engine if isinstance(engine, str) else None,
        outcome=outcome if isinstance(outcome, str) else None,
        phase=last_phase(record),
        duration_s=None if duration is None else float(duration),
        started=started,
        record=record,
    )


def list_runs(runs_dir: Path) -> list[RunSummary]:
    """Every run folder under ``runs_dir`` (those with a readable run.json), newest first."""
    runs: list[RunSummary] = []
    if not runs_dir.is_dir():
        return runs
    for path in runs_dir.glob(f"*/{RUN_JSON}"):
        run_dir = Path(os.path.abspath(path.parent))
        if run_dir.is_symlink():
            continue
        try:
            runs.append(summarise(run_dir, read_record(run_dir)))
        except UserError:
            continue
    runs.sort(key=lambda r: (r.started, r.id), reverse=True)
    return runs


def find_run(ref: str, runs_dir: Path) -> Path:
    """The run folder ``ref`` names: ``last``, a folder path, or a run id under ``runs_dir``
    (a unique prefix of one will do)."""
    if ref == "last":
        runs = list_runs(runs_dir)
        if not runs:
            raise UserError(f"no runs yet in {runs_dir}")
        return runs[0].path
    given = Path(ref).expanduser()
    if given.is_dir():
        return Path(os.path.abspath(given))
    if "/" not in ref and runs_dir.is_dir():
        if (runs_dir / ref).is_dir():
            return Path(os.path.abspath(runs_dir / ref))
        matches = sorted(p for p in runs_dir.glob(f"{ref}*") if (p / RUN_JSON).is_file())
        if len(matches) == 1:
            return Path(os.path.abspath(matches[0]))
        if len(matches) > 1:
            names = ", ".join(p.name for p in matches[:5])
            raise UserError(f"{ref!r} names {len(matches)} runs in {runs_dir}: {names}")
    raise UserError(f"no run {ref!r} in {runs_dir} (see 'servedoctor runs')")


# ---- a run's death by a signal, and its diagnosis ----

_SIGNAL_WHY = {
    "SIGKILL": "the kernel's OOM killer is the usual cause; see dmesg",
    "SIGSEGV": "segmentation fault",
    "SIGABRT": "aborted",
    "SIGBUS": "bus error",
    "SIGFPE": "floating-point exception",
    "SIGILL": "illegal instruction",
}
_HANG_KINDS = ("stall", "request_timeout", "startup_timeout")


def _signal_name(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        with contextlib.suppress(ValueError):
            return signal.Signals(abs(value)).name
        return f"signal {abs(value)}"
    if isinstance(value, str) and value.strip():
        name = value.strip().upper()
        if name.isdigit():
            return _signal_name(int(name))
        return name if name.startswith("SIG") else f"SIG{name}"
    return None


def death_signal(record: Mapping[str, Any]) -> str | None:
    """The signal that ended the server, from run.json: ``signal``, else the exit status
    (negative: killed by that signal; above 128: the shell's 128 + N)."""
    if record.get("signal") is not None:
        return _signal_name(record["signal"])
    teardown = record.get("teardown")
    codes = [record.get("exit_code")]
    if isinstance(teardown, dict):
        codes.append(teardown.get("exit_code"))
    for code in codes:
        if isinstance(code, int) and not isinstance(code, bool):
            if code < 0:
                return _signal_name(-code)
            if 128 < code < 160:
                return _signal_name(code - 128)
            return None
    return None


def signal_summary(name: str) -> str:
    why = _SIGNAL_WHY.get(name)
    return f"killed by {name}" + (f" ({why})" if why else "")


def _recorded_failure(record: Mapping[str, Any]) -> Failure | None:
    f = record.get("failure")
    if not isinstance(f, dict) or not isinstance(f.get("kind"), str):
        return None
    at = f.get("at_s")
    line = f.get("line")
    return Failure(
        kind=f["kind"],
        phase=str(f.get("phase") or last_phase(record) or "startup"),
        detail=str(f.get("detail") or ""),
        at_s=float(at) if isinstance(at, (int, float)) else 0.0,
        line=line if isinstance(line, int) else None,
    )


def command_flags(command: object) -> dict[str, str | None]:
    """The flags a recorded (masked) command sets, as ``launch`` passes them to diagnose."""
    if not isinstance(command, list) or not all(isinstance(a, str) for a in command):
        return {}
    try:
        return dict(parse_command(command).settings())
    except UserError:
        return {}


def diagnose_recorded(
    run_dir: Path,
    *,
    engine: str = "auto",
    arch: str | None = None,
    engine_version: str | None = None,
) -> Diagnosis:
    """Diagnose a run folder's server.log with what its run.json knows: the command's flags,
    the engine, the phase reached, and how the server ended. A log that simply stops is a
    failure when the server died by a signal (SIGKILL: likely the OOM killer)."""
    from servedoctor.diagnose import diagnose_path
    from servedoctor.engines import all_engines

    record = read_record(run_dir)
    log = run_dir / LOG_NAME
    if not log.is_file():
        raise UserError(f"{run_dir}: the run has no {LOG_NAME}")
    if engine == "auto" and record.get("engine") in all_engines():
        engine = str(record["engine"])
    phase = last_phase(record)
    failure = _recorded_failure(record)
    diagnosis = diagnose_path(
        log,
        engine=engine,
        phase_hint=phase or (failure.phase if failure else None),
        command_flags=command_flags(record.get("command")),
        engine_version=engine_version,
        arch=arch,
    )
    if diagnosis.error_class is not None:
        return diagnosis if diagnosis.phase else dataclasses.replace(diagnosis, phase=phase)
    outcome = record.get("outcome")
    if outcome in ("healthy", "interrupted"):
        return diagnosis  # the supervisor stopped it: a signal then is its own
    sig = death_signal(record)
    if sig is not None and (failure is None or failure.kind == "process_exit"):
        return dataclasses.replace(
            diagnosis,
            engine=diagnosis.engine or engine,
            error_class="other",
            phase=phase or (failure.phase if failure else None),
            component=diagnosis.component or "unknown",
            summary=signal_summary(sig),
            # the last line is where the server was when it died: the header points there
            evidence=diagnosis.evidence or log_tail(log, last_role="error"),
        )
    if failure is not None and outcome == "failed":
        label = "hang" if failure.kind in _HANG_KINDS else "other"
        return dataclasses.replace(
            diagnosis,
            engine=diagnosis.engine or engine,
            error_class=label,
            phase=phase if failure.kind == "process_exit" else failure.phase,
            component=diagnosis.component or "unknown",
            summary=f"{failure.kind.replace('_', ' ')}: {failure.detail}",
            evidence=diagnosis.evidence or log_tail(log),
        )
    return diagnosis


def log_tail(
    log: Path, lines: int = 5, *, last_role: Literal["error", "context"] = "context"
) -> tuple[Evidence, ...]:
    """The last non-empty lines of the log (what it said before it stopped)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    numbered = [(i + 1, t.split("\r")[-1]) for i, t in enumerate(text.split("\n"))]
    kept = [(n, t) for n, t in numbered if t.strip()][-lines:]
    return tuple(
        Evidence(n, t, last_role if i == len(kept) - 1 else "context")
        for i, (n, t) in enumerate(kept)
    )
