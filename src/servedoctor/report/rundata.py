"""A run folder read back for a report: run.json, the telemetry samples, the diagnosis with
its evidence roles, and the log excerpt. Every string from disk is masked again
(:mod:`servedoctor.redact`): a run written by an older servedoctor may hold what a newer one
would mask.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servedoctor.errors import UserError
from servedoctor.launch.record import diagnose_recorded, read_record
from servedoctor.launch.rundir import LOG_NAME
from servedoctor.launch.samples import TELEMETRY_NAME, Sample, read_samples
from servedoctor.launch.types import PhaseSpan
from servedoctor.model import Diagnosis, Hypothesis
from servedoctor.redact import redact_argv, redact_env, redact_text
from servedoctor.report.evidence import infer_roles, roles_by_line
from servedoctor.report.logexcerpt import ExcerptLine, excerpt
from servedoctor.report.machine import read_machine

__all__ = ["REDIAGNOSE_MAX_BYTES", "FailureMark", "RunData", "load_run"]

#: Logs up to this size are diagnosed again for a report (the roles of the evidence lines);
#: larger ones use the diagnosis run.json recorded, with roles inferred.
REDIAGNOSE_MAX_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class FailureMark:
    kind: str
    phase: str
    detail: str
    at_s: float
    line: int | None


@dataclass(frozen=True)
class RunData:
    run_dir: Path
    outcome: str
    engine: str
    command: list[str]
    env: dict[str, str]
    started_at: str
    duration_s: float
    phases: list[PhaseSpan]
    failure: FailureMark | None
    diagnosis: Diagnosis | None
    samples: list[Sample]
    memory_gib: dict[str, float]
    progress: dict[str, dict[str, Any]]
    probes: dict[str, Any]
    warnings: list[str]
    log: Path
    log_bytes: int
    excerpt: list[ExcerptLine]
    machine: dict[str, Any]
    record: dict[str, Any]

    @property
    def first_change(self) -> str | None:
        """The one change to try first: the top hypothesis that has one."""
        for h in self.hypotheses:
            if h.changes:
                return h.changes[0].describe()
        return None

    @property
    def hypotheses(self) -> tuple[Hypothesis, ...]:
        return self.diagnosis.hypotheses if self.diagnosis else ()


def _num(value: object, default: float = 0.0) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return default


def _phases(record: dict[str, Any]) -> list[PhaseSpan]:
    spans = []
    for p in record.get("phases") or []:
        if isinstance(p, dict) and isinstance(p.get("name"), str):
            end = p.get("end")
            spans.append(
                PhaseSpan(
                    p["name"],
                    redact_text(str(p.get("label") or "")),
                    _num(p.get("start")),
                    None if end is None else _num(end),
                )
            )
    return spans


def _failure(record: dict[str, Any]) -> FailureMark | None:
    f = record.get("failure")
    if not isinstance(f, dict) or not isinstance(f.get("kind"), str):
        return None
    line = f.get("line")
    return FailureMark(
        kind=f["kind"],
        phase=str(f.get("phase") or ""),
        detail=redact_text(str(f.get("detail") or "")),
        at_s=_num(f.get("at_s")),
        line=line if isinstance(line, int) and not isinstance(line, bool) else None,
    )


def _masked(d: Diagnosis) -> Diagnosis:
    return dataclasses.replace(
        d,
        summary=redact_text(d.summary),
        evidence=tuple(dataclasses.replace(e, text=redact_text(e.text)) for e in d.evidence),
        hypotheses=tuple(
            dataclasses.replace(h, cause=redact_text(h.cause), why=redact_text(h.why))
            for h in d.hypotheses
        ),
    )


def _stored(data: dict[str, Any]) -> Diagnosis:
    """run.json's diagnosis (the ``diagnose --json`` form) as a value."""
    return Diagnosis.from_dict(data)


def _diagnosis(run_dir: Path, record: dict[str, Any], log_bytes: int) -> Diagnosis | None:
    stored = record.get("diagnosis")
    failed = record.get("outcome") == "failed" or isinstance(stored, dict)
    if not failed:
        return None
    if 0 < log_bytes <= REDIAGNOSE_MAX_BYTES:
        try:
            d = diagnose_recorded(run_dir)
            if d.failed:
                return d
        except UserError:
            pass
    return _stored(stored) if isinstance(stored, dict) else None


def load_run(run_dir: Path, *, diagnosis: Diagnosis | None = None, tail: int = 40) -> RunData:
    """Read a run folder; ``diagnosis``: the one the run just made (it knows the roles)."""
    record = read_record(run_dir)
    log = run_dir / LOG_NAME
    try:
        log_bytes = log.stat().st_size
    except OSError:
        log_bytes = 0
    d = diagnosis if diagnosis is not None else _diagnosis(run_dir, record, log_bytes)
    if d is not None:
        d = _masked(dataclasses.replace(d, evidence=infer_roles(d.evidence)))
    failure = _failure(record)
    roles = roles_by_line(d.evidence) if d else {}
    if failure is not None and failure.line and failure.line not in roles:
        roles[failure.line] = "error"
    engine = str(record.get("engine") or "unknown")
    command = redact_argv([str(a) for a in record.get("command") or []])
    env = record.get("env_overrides")
    progress = record.get("progress")
    memory = record.get("memory_gib")
    probes = record.get("probes")
    return RunData(
        run_dir=run_dir,
        outcome=str(record.get("outcome") or "unknown"),
        engine=engine,
        command=command,
        env=redact_env({str(k): str(v) for k, v in env.items()}) if isinstance(env, dict) else {},
        started_at=str(record.get("started_at") or ""),
        duration_s=_num(record.get("duration_s")),
        phases=_phases(record),
        failure=failure,
        diagnosis=d,
        samples=list(read_samples(run_dir / TELEMETRY_NAME)),
        memory_gib={str(k): _num(v) for k, v in memory.items()} if isinstance(memory, dict) else {},
        progress={str(k): v for k, v in progress.items() if isinstance(v, dict)}
        if isinstance(progress, dict)
        else {},
        probes=probes if isinstance(probes, dict) else {},
        warnings=[redact_text(str(w)) for w in record.get("warnings") or []],
        log=log,
        log_bytes=log_bytes,
        excerpt=excerpt(log, roles, tail=tail) if log_bytes else [],
        machine=read_machine(run_dir, engine, command),
        record=record,
    )
