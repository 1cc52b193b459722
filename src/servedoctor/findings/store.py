"""The findings store: every fix session, its trials and what each change did.

SQLite at ``~/.local/share/servedoctor/findings.db`` by default (``$XDG_DATA_HOME`` is
honoured), or any SQLAlchemy URL, e.g. ``postgresql+psycopg://user@host/db`` for a team.
Only the ORM and portable types are used. Secrets are redacted before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, case, create_engine, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, selectinload, sessionmaker

from servedoctor.errors import UserError
from servedoctor.experiments.candidates import ChangeHistory
from servedoctor.experiments.trial import Trial
from servedoctor.findings.codec import (
    change_from_dict,
    change_store_key,
    redact_change,
    redacted_command,
    redacted_diagnosis,
    trial_from_row_data,
)
from servedoctor.findings.schema import (
    Base,
    ChangeRow,
    FingerprintRow,
    OutcomeRow,
    RunRow,
    TrialRow,
    utcnow,
)
from servedoctor.model import Change

__all__ = [
    "FindingsStore",
    "StoredRun",
    "default_store_path",
    "fingerprint_key",
    "store_path",
    "store_url",
]

SUCCESS_VERDICTS = ("fixed", "needed")


def default_store_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "servedoctor" / "findings.db"


def _given(store: str | Path | None) -> str:
    """``--store`` as given, else ``$SERVEDOCTOR_STORE``, else empty (the default file)."""
    return str(store) if store else os.environ.get("SERVEDOCTOR_STORE", "")


def store_path(store: str | Path | None) -> Path | None:
    """The SQLite file ``--store`` names (or the default one); None for a database URL."""
    raw = _given(store)
    if "://" in raw:
        return None
    return Path(raw).expanduser() if raw else default_store_path()


def store_url(store: str | Path | None) -> str:
    """A SQLAlchemy URL for ``--store``: a URL as given, a path as a SQLite file (its folder
    is created: this is for writers)."""
    path = store_path(store)
    if path is None:
        return _given(store)
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path.resolve()}"


def fingerprint_key(fingerprint: Mapping[str, Any]) -> str:
    canonical = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class StoredRun:
    """A fix session as read back from the store (for listing, export and resume)."""

    id: int
    status: str
    started_at: str
    finished_at: str | None
    engine: str
    argv: list[str]
    env: dict[str, str]
    options: dict[str, Any]
    fingerprint: dict[str, Any]
    fingerprint_key: str | None
    error_class: str | None
    phase: str | None
    summary: str
    reason: str
    fix: list[Change]
    trials: list[Trial]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "engine": self.engine,
            "argv": self.argv,
            "env": self.env,
            "fingerprint": self.fingerprint,
            "fingerprint_key": self.fingerprint_key,
            "error_class": self.error_class,
            "phase": self.phase,
            "summary": self.summary,
            "reason": self.reason,
            "changes": [c.to_dict() for c in self.fix],
            "trials": [t.to_dict() for t in self.trials],
        }


class FindingsStore:
    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self.engine: Engine = create_engine(url, future=True)
            Base.metadata.create_all(self.engine)
        except (SQLAlchemyError, ImportError) as exc:
            raise UserError(f"cannot open findings store {url}: {exc}") from exc
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def open(cls, store: str | Path | None = None) -> FindingsStore:
        return cls(store_url(store))

    @classmethod
    def open_existing(cls, store: str | Path | None = None) -> FindingsStore | None:
        """For readers: None when the SQLite file does not exist (nothing is created)."""
        path = store_path(store)
        if path is not None and not path.is_file():
            return None
        return cls.open(store)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            yield session

    # -- writing ------------------------------------------------------------------------
    def _change(self, session: Session, change: Change) -> ChangeRow:
        change = redact_change(change)
        key = change_store_key(change)
        row = session.scalar(select(ChangeRow).where(ChangeRow.key == key))
        if row is None:
            row = ChangeRow(key=key, kind=change.kind, name=change.name, value=change.value)
            session.add(row)
            session.flush()
        return row

    def _fingerprint(self, session: Session, fingerprint: Mapping[str, Any]) -> FingerprintRow:
        key = fingerprint_key(fingerprint)
        row = session.scalar(select(FingerprintRow).where(FingerprintRow.key == key))
        if row is None:
            row = FingerprintRow(key=key, data=json.loads(json.dumps(fingerprint, default=str)))
            session.add(row)
            session.flush()
        return row

    def start_run(
        self,
        *,
        engine: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        options: Mapping[str, Any],
        fingerprint: Mapping[str, Any],
    ) -> int:
        safe_argv, safe_env = redacted_command(argv, env)
        with self._session() as session:
            fp = self._fingerprint(session, fingerprint)
            run = RunRow(
                status="running",
                engine=engine,
                argv=safe_argv,
                env=safe_env,
                options=dict(options),
                fingerprint_id=fp.id,
            )
            session.add(run)
            session.flush()
            return run.id

    def add_trial(self, run_id: int, trial: Trial) -> None:
        safe_argv, safe_env = redacted_command(trial.argv, trial.env)
        with self._session() as session:
            run = session.get(RunRow, run_id)
            if run is None:
                raise UserError(f"no run {run_id} in the findings store")
            row = TrialRow(
                run_id=run_id,
                index=trial.index,
                role=trial.role,
                tested=self._change(session, trial.tested) if trial.tested else None,
                why=trial.why,
                argv=safe_argv,
                env=safe_env,
                outcome=trial.outcome,
                error_class=trial.error_class,
                phase=trial.phase,
                against=trial.against,
                diagnosis=redacted_diagnosis(trial.diagnosis),
                duration_s=trial.duration_s,
                gpu_peak_mib=trial.gpu_peak_mib,
                exit_code=trial.exit_code,
                run_dir=trial.run_dir,
            )
            row.changes = list(
                {id(r): r for r in (self._change(session, c) for c in trial.changes)}.values()
            )
            session.add(row)
            if trial.role == "baseline" and trial.diagnosis is not None:
                run.error_class = trial.error_class
                run.phase = trial.phase
                run.summary = redacted_diagnosis(trial.diagnosis)["summary"]  # type: ignore[index]

    def finish_run(
        self,
        run_id: int,
        *,
        status: str,
        reason: str,
        fix: Sequence[Change],
        trials: Sequence[Trial],
    ) -> None:
        """Close the session and record what it learnt about each change it tested."""
        with self._session() as session:
            run = session.get(RunRow, run_id)
            if run is None:
                raise UserError(f"no run {run_id} in the findings store")
            run.status = status
            run.reason = reason
            run.finished_at = utcnow()
            run.fix = [redact_change(c).to_dict() for c in fix]
            for old in list(run.outcomes):
                session.delete(old)
            verdicts: dict[tuple[Change, str | None], str] = {}
            for t in trials:
                if t.role != "candidate" or t.tested is None or t.outcome == "interrupted":
                    continue
                verdict = {"healthy": "fixed", "same_failure": "no_effect"}.get(t.outcome, "moved")
                if t.healthy and status != "fixed":
                    verdict = "no_effect"  # healthy once, not on the confirmation run
                verdicts[(t.tested, t.against)] = verdict
            if len(fix) > 1:
                for change in fix:
                    verdicts[(change, run.error_class)] = "needed"
            for (change, against), verdict in verdicts.items():
                session.add(
                    OutcomeRow(
                        run_id=run_id,
                        change_id=self._change(session, change).id,
                        fingerprint_id=run.fingerprint_id,
                        error_class=against,
                        verdict=verdict,
                    )
                )

    # -- reading ------------------------------------------------------------------------
    def history(
        self,
        fingerprint: Mapping[str, Any],
        error_class: str | None,
        *,
        exclude_run: int | None = None,
    ) -> dict[Change, ChangeHistory]:
        """Per change: how often it fixed ``error_class`` on this fingerprint before."""
        success = func.sum(case((OutcomeRow.verdict.in_(SUCCESS_VERDICTS), 1), else_=0))
        query = (
            select(ChangeRow.kind, ChangeRow.name, ChangeRow.value, success, func.count())
            .join(OutcomeRow, OutcomeRow.change_id == ChangeRow.id)
            .join(FingerprintRow, FingerprintRow.id == OutcomeRow.fingerprint_id)
            .where(FingerprintRow.key == fingerprint_key(fingerprint))
            .where(OutcomeRow.error_class == error_class)
            .group_by(ChangeRow.id, ChangeRow.kind, ChangeRow.name, ChangeRow.value)
        )
        if exclude_run is not None:
            query = query.where(OutcomeRow.run_id != exclude_run)
        with self._session() as session:
            rows = session.execute(query).all()
        return {
            change_from_dict({"kind": k, "name": n, "value": v}): ChangeHistory(int(s or 0), int(c))
            for k, n, v, s, c in rows
        }

    def _load(self, run: RunRow) -> StoredRun:
        trials = [
            trial_from_row_data(
                index=t.index,
                role=t.role,  # type: ignore[arg-type]
                changes=[change_from_dict(_row_dict(c)) for c in t.changes],
                tested=change_from_dict(_row_dict(t.tested)) if t.tested else None,
                why=t.why,
                argv=t.argv,
                env=t.env,
                outcome=t.outcome,  # type: ignore[arg-type]
                diagnosis=t.diagnosis,
                duration_s=t.duration_s,
                gpu_peak_mib=t.gpu_peak_mib,
                exit_code=t.exit_code,
                run_dir=t.run_dir,
                against=t.against,
            )
            for t in run.trials
        ]
        return StoredRun(
            id=run.id,
            status=run.status,
            started_at=run.started_at.isoformat(timespec="seconds"),
            finished_at=run.finished_at.isoformat(timespec="seconds") if run.finished_at else None,
            engine=run.engine,
            argv=list(run.argv),
            env=dict(run.env),
            options=dict(run.options),
            fingerprint=dict(run.fingerprint.data) if run.fingerprint else {},
            fingerprint_key=run.fingerprint.key if run.fingerprint else None,
            error_class=run.error_class,
            phase=run.phase,
            summary=run.summary,
            reason=run.reason,
            fix=[change_from_dict(c) for c in run.fix or []],
            trials=trials,
        )

    def _query(self) -> Any:
        return select(RunRow).options(
            selectinload(RunRow.trials).selectinload(TrialRow.changes),
            selectinload(RunRow.trials).selectinload(TrialRow.tested),
            selectinload(RunRow.fingerprint),
        )

    def runs(self, *, limit: int | None = None) -> list[StoredRun]:
        query = self._query().order_by(RunRow.id.desc())
        if limit:
            query = query.limit(limit)
        with self._session() as session:
            return [self._load(r) for r in session.scalars(query).all()]

    def run(self, run_id: int) -> StoredRun | None:
        with self._session() as session:
            row = session.scalars(self._query().where(RunRow.id == run_id)).first()
            return self._load(row) if row is not None else None

    def latest_unfinished(self) -> StoredRun | None:
        query = self._query().where(RunRow.status.in_(("running", "interrupted")))
        with self._session() as session:
            row = session.scalars(query.order_by(RunRow.id.desc())).first()
            return self._load(row) if row is not None else None

    def reopen(self, run_id: int) -> None:
        with self._session() as session:
            run = session.get(RunRow, run_id)
            if run is not None:
                run.status = "running"
                run.finished_at = None


def _row_dict(row: ChangeRow) -> dict[str, Any]:
    return {"kind": row.kind, "name": row.name, "value": row.value}
