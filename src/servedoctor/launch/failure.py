"""A failed run's diagnosis: the log's, with what the supervisor saw filling its gaps.

The diagnosis engine reads the log with the phase the timeline knew. Some failures leave no
trace in the log (a generation that hangs while ``/health`` answers, a SIGKILL): then the
supervisor's own observation supplies the class (``hang`` for a stall or a request with no
answer), the phase and the summary, with the last log lines as evidence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from servedoctor.diagnose import diagnose_path
from servedoctor.diagnose.api import class_fallbacks
from servedoctor.engines.command import parse_command
from servedoctor.env.engineversion import installed_engine_version
from servedoctor.errors import UserError
from servedoctor.launch.types import Failure
from servedoctor.model import Diagnosis, Evidence

_TAIL_LINES = 5


def diagnose_run(
    log: Path,
    failure: Failure,
    *,
    engine: str,
    argv: Sequence[str] = (),
    engine_version: str | None = None,
) -> Diagnosis:
    """Diagnose the run's log with the phase the timeline knew, the command's flags and the
    engine release installed where the server runs (changes are spelled for that release)."""
    version = engine_version or installed_engine_version(argv, engine)
    diagnosis = diagnose_path(
        log,
        engine=engine,
        phase_hint=failure.phase,
        command_flags=_flags(argv),
        engine_version=version,
    )
    return complete(diagnosis, failure, log=log, engine=engine, engine_version=version)


def _flags(argv: Sequence[str]) -> dict[str, str | None]:
    """The flags the command sets (rule conditions and {flag:…} values read them)."""
    if not argv:
        return {}
    try:
        return dict(parse_command(argv).settings())
    except UserError:
        return {}


def complete(
    diagnosis: Diagnosis,
    failure: Failure,
    *,
    log: Path,
    engine: str,
    engine_version: str | None = None,
) -> Diagnosis:
    """Fill what the log could not tell from the supervisor's failure record: the class,
    the phase, the summary, and the class's generic changes to try."""
    if failure.is_hang and (diagnosis.extras or {}).get("class_source") == "precedents":
        # a class the precedents voted for from a line of the log is a guess; a server that
        # stopped answering is what the supervisor saw
        diagnosis = dataclasses.replace(diagnosis, error_class=None, hypotheses=())
    if diagnosis.error_class is not None:
        if diagnosis.phase is None:
            return dataclasses.replace(diagnosis, phase=failure.phase)
        return diagnosis
    evidence = diagnosis.evidence or _tail(log, upto=failure.log_lines)
    error_class = "hang" if failure.is_hang else "other"
    phase = diagnosis.phase or failure.phase
    return dataclasses.replace(
        diagnosis,
        file=str(log),
        engine=diagnosis.engine or engine,
        error_class=error_class,
        phase=phase,
        hypotheses=diagnosis.hypotheses
        or class_fallbacks(
            error_class,
            engine=diagnosis.engine or engine,
            engine_version=engine_version,
            phase=phase,
        ),
        component=diagnosis.component or "unknown",
        # The engine's summary of a log without a failure says so; the supervisor saw one.
        summary=f"{failure.kind.replace('_', ' ')}: {failure.detail}",
        evidence=evidence,
    )


def _tail(log: Path, *, upto: int | None = None) -> tuple[Evidence, ...]:
    """The last non-empty lines up to line ``upto`` (what the log said before the failure)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").split("\n")
    except OSError:
        return ()
    numbered = [(i + 1, text.split("\r")[-1]) for i, text in enumerate(lines)]
    if upto:
        numbered = numbered[:upto]
    kept = [(n, t) for n, t in numbered if t.strip()][-_TAIL_LINES:]
    return tuple(Evidence(n, t, "context") for n, t in kept)
