"""A failed run's diagnosis: the log's, with what the supervisor saw filling its gaps.

The diagnosis engine reads the log with the phase the timeline knew. Some failures leave no
trace in the log (a generation that hangs while ``/health`` answers, a SIGKILL): then the
supervisor's own observation supplies the class (``hang`` for a stall or a request with no
answer), the phase and the summary, with the last log lines as evidence.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from servedoctor.diagnose import diagnose_path
from servedoctor.launch.types import Failure
from servedoctor.model import Diagnosis, Evidence

_TAIL_LINES = 5


def diagnose_run(log: Path, failure: Failure, *, engine: str) -> Diagnosis:
    diagnosis = diagnose_path(log, engine=engine, phase_hint=failure.phase)
    return complete(diagnosis, failure, log=log, engine=engine)


def complete(diagnosis: Diagnosis, failure: Failure, *, log: Path, engine: str) -> Diagnosis:
    """Fill what the log could not tell from the supervisor's failure record."""
    if diagnosis.error_class is not None:
        if diagnosis.phase is None:
            return dataclasses.replace(diagnosis, phase=failure.phase)
        return diagnosis
    evidence = diagnosis.evidence or _tail(log)
    return dataclasses.replace(
        diagnosis,
        file=str(log),
        engine=diagnosis.engine or engine,
        error_class="hang" if failure.is_hang else "other",
        phase=diagnosis.phase or failure.phase,
        component=diagnosis.component or "unknown",
        summary=diagnosis.summary or f"{failure.kind.replace('_', ' ')}: {failure.detail}",
        evidence=evidence,
    )


def _tail(log: Path) -> tuple[Evidence, ...]:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").split("\n")
    except OSError:
        return ()
    numbered = [(i + 1, text.split("\r")[-1]) for i, text in enumerate(lines)]
    kept = [(n, t) for n, t in numbered if t.strip()][-_TAIL_LINES:]
    return tuple(Evidence(n, t, "context") for n, t in kept)
