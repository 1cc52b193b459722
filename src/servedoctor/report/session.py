"""A fix session read back from the findings store for a report: its trials as bars on one
time axis, the first failure's diagnosis and log, and what moved in the server's
environment since the last healthy run of the same engine and model.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from servedoctor.findings.healthy import PackageMove, diff
from servedoctor.findings.schema import HealthyEnvRow
from servedoctor.findings.store import FindingsStore, StoredRun
from servedoctor.findings.working import WorkingCommand, shell_line
from servedoctor.model import Diagnosis
from servedoctor.redact import redact_argv, redact_env, redact_text
from servedoctor.report.evidence import infer_roles, roles_by_line
from servedoctor.report.logexcerpt import ExcerptLine, excerpt
from servedoctor.report.plots import TrialBar

__all__ = ["SessionData", "healthy_before", "load_session", "session_moves", "trial_bars"]


@dataclass(frozen=True)
class SessionData:
    run: StoredRun
    command_line: str
    diagnosis: Diagnosis | None  # the first failure (the baseline trial's)
    works: WorkingCommand | None
    bars: list[TrialBar]
    excerpt: list[ExcerptLine] = field(default_factory=list)
    log: Path | None = None
    moves: list[PackageMove] | None = None  # None: no healthy run to compare with
    moves_now: str = "now"

    @property
    def first_change(self) -> str | None:
        for h in self.diagnosis.hypotheses if self.diagnosis else ():
            if h.changes:
                return h.changes[0].describe()
        return None


def trial_bars(run: StoredRun) -> list[TrialBar]:
    """Trials back to back in their order (the store keeps durations, not start times)."""
    bars: list[TrialBar] = []
    at = 0.0
    for t in run.trials:
        what = " + ".join(c.describe() for c in t.changes) or "the command as given"
        bars.append(TrialBar(f"{t.index} {t.role}: {what}", t.outcome, at, t.duration_s))
        at += t.duration_s
    return bars


def healthy_before(store: FindingsStore, run: StoredRun, target: str) -> dict[str, str] | None:
    """The packages of the last healthy run of this engine and model before the session."""
    started = datetime.fromisoformat(run.started_at)

    def work(session: Session) -> dict[str, str] | None:
        rows = session.scalars(
            select(HealthyEnvRow)
            .where(HealthyEnvRow.engine == run.engine, HealthyEnvRow.target == target)
            .order_by(HealthyEnvRow.id.desc())
        ).all()
        for row in rows:
            at = row.recorded_at
            if at.tzinfo is None and started.tzinfo is not None:
                at = at.replace(tzinfo=started.tzinfo)
            if at <= started:
                return {str(k): str(v) for k, v in row.packages.items()}
        return None

    return store._transaction(work, write=False)


def session_moves(store: FindingsStore, run: StoredRun) -> list[PackageMove] | None:
    """What moved between the last healthy run before the session and the server's
    interpreter now; None when there is no healthy run to compare with."""
    from servedoctor.env.serverenv import installed_packages, server_interpreter
    from servedoctor.experiments.command import parse
    from servedoctor.experiments.envhistory import target_of

    try:
        cmd = parse([*(f"{k}={v}" for k, v in run.env.items()), *run.argv])
    except Exception:
        return None
    healthy = healthy_before(store, run, target_of(cmd))
    if not healthy:
        return None
    return diff(healthy, installed_packages(server_interpreter(cmd.render()), dict(cmd.env)))


def load_session(
    run: StoredRun,
    *,
    moves: Sequence[PackageMove] | None = None,
    moves_now: str = "now",
    with_log: bool = True,
) -> SessionData:
    baseline = next((t for t in run.trials if t.role == "baseline"), None)
    d = baseline.diagnosis if baseline is not None else None
    if d is not None:
        d = dataclasses.replace(
            d,
            summary=redact_text(d.summary),
            evidence=tuple(
                dataclasses.replace(e, text=redact_text(e.text)) for e in infer_roles(d.evidence)
            ),
        )
    log: Path | None = None
    lines: list[ExcerptLine] = []
    if with_log and baseline is not None and baseline.run_dir:
        candidate = Path(baseline.run_dir) / "server.log"
        if candidate.is_file():
            log = candidate
        elif d is not None and d.file and Path(d.file).is_file():
            log = Path(d.file)
        if log is not None:
            with contextlib.suppress(OSError):
                lines = excerpt(log, roles_by_line(d.evidence) if d else {}, tail=20)
    works = run.works()
    if works is not None:
        works = WorkingCommand(redact_argv(works.argv), redact_env(works.env), works.packages)
    return SessionData(
        run=run,
        command_line=shell_line(redact_argv(run.argv), redact_env(run.env)),
        diagnosis=d,
        works=works,
        bars=trial_bars(run),
        excerpt=lines,
        log=log,
        moves=None if moves is None else list(moves),
        moves_now=moves_now,
    )
