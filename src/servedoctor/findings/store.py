"""The findings store: every fix session, its trials and what each change did.

SQLite at ``~/.local/share/servedoctor/findings.db`` by default (``$XDG_DATA_HOME`` is
honoured), or any SQLAlchemy URL, e.g. ``postgresql+psycopg://user@host/db`` for a team.
Only the ORM and portable types are used. Secrets are redacted before anything is written.

Several fix sessions may share a store at once: the schema is migrated under a lock on open
(:mod:`~servedoctor.findings.migrate`), get-or-create rows are upserts, SQLite runs in WAL
with a busy timeout and transient lock errors are retried (:mod:`~servedoctor.findings.connect`),
and a session being run is leased to its process (:mod:`~servedoctor.findings.lease`), so
``fix --resume`` cannot attach to a session that is still running elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, Table, case, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, selectinload, sessionmaker

from servedoctor.errors import UserError
from servedoctor.experiments.candidates import ChangeHistory
from servedoctor.experiments.trial import Trial
from servedoctor.findings import lease, migrate
from servedoctor.findings.codec import (
    change_from_dict,
    change_store_key,
    redact_change,
    redacted_command,
    redacted_diagnosis,
    trial_from_row_data,
)
from servedoctor.findings.connect import make_engine, retrying, writer
from servedoctor.findings.schema import (
    ChangeRow,
    FingerprintRow,
    OutcomeRow,
    RunRow,
    TrialRow,
    utcnow,
)
from servedoctor.findings.working import WorkingCommand, working_command
from servedoctor.model import Change
from servedoctor.redact import redact_text, redact_url

__all__ = [
    "FindingsStore",
    "StoredRun",
    "default_store_path",
    "fingerprint_key",
    "store_path",
    "store_url",
]

SUCCESS_VERDICTS = ("fixed", "needed")
T = TypeVar("T")


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
            "command_that_works": (works.to_dict() if (works := self.works()) else None),
            "trials": [t.to_dict() for t in self.trials],
        }

    def works(self) -> WorkingCommand | None:
        """The stored command with the fix applied (None when nothing fixed it)."""
        if self.status != "fixed":
            return None
        return working_command(self.argv, self.env, self.fix)


class FindingsStore:
    """One store, opened by one process; safe to share with other processes and hosts.

    ``busy_timeout_s``: how long SQLite waits for another writer's lock; ``retry_for_s``:
    how long a transiently failing transaction is retried; ``lease_ttl_s``: how old a
    session's heartbeat may be before its lease lapses (the heartbeat is refreshed every
    ``heartbeat_s`` by a background thread while this process runs the session).
    """

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_s: float = 30.0,
        retry_for_s: float = 120.0,
        lease_ttl_s: float = 120.0,
        heartbeat_s: float = 20.0,
    ) -> None:
        self.url = url
        self.retry_for_s = retry_for_s
        self.lease_ttl_s = lease_ttl_s
        self.heartbeat_s = heartbeat_s
        self._shown = redact_url(url)  # for messages: a password is masked
        try:
            self.engine: Engine = make_engine(url, busy_timeout_s=busy_timeout_s)
            retrying(self._shown, lambda: migrate.upgrade(self.engine), retry_for_s=retry_for_s)
        except (SQLAlchemyError, ImportError) as exc:
            raise UserError(
                f"cannot open findings store {self._shown}: {redact_text(str(exc))}"
            ) from exc
        self._readers = sessionmaker(self.engine, expire_on_commit=False)
        self._writers = sessionmaker(writer(self.engine), expire_on_commit=False)
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    @classmethod
    def open(cls, store: str | Path | None = None, **options: float) -> FindingsStore:
        return cls(store_url(store), **options)

    @classmethod
    def open_existing(cls, store: str | Path | None = None) -> FindingsStore | None:
        """For readers: None when the SQLite file does not exist (nothing is created)."""
        path = store_path(store)
        if path is not None and not path.is_file():
            return None
        return cls.open(store)

    def close(self) -> None:
        with self._lock:
            self._held.clear()
            self._stop_beat()
        self.engine.dispose()

    def _transaction(self, work: Callable[[Session], T], *, write: bool = True) -> T:
        """``work`` in one transaction, retried whole on a transient error."""
        maker = self._writers if write else self._readers

        def attempt() -> T:
            with maker() as session, session.begin():
                return work(session)

        return retrying(self._shown, attempt, retry_for_s=self.retry_for_s)

    # -- the lease ------------------------------------------------------------------------
    def _take(self, run: RunRow) -> None:
        owner = lease.me()
        run.owner_host, run.owner_pid, run.owner_started = owner.host, owner.pid, owner.started
        run.heartbeat_at = utcnow()

    def _hold(self, run_id: int) -> None:
        with self._lock:
            self._held.add(run_id)
            if self._beat is None or not self._beat.is_alive():
                self._stop = threading.Event()
                self._beat = threading.Thread(
                    target=self._beat_loop,
                    args=(self._stop,),
                    name="servedoctor-store-heartbeat",
                    daemon=True,
                )
                self._beat.start()

    def _release(self, run_id: int) -> None:
        with self._lock:
            self._held.discard(run_id)
            if not self._held:
                self._stop_beat()

    def _stop_beat(self) -> None:
        self._stop.set()
        self._beat = None

    def _beat_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat_s):
            with self._lock:
                held = sorted(self._held)
            if held:
                self.heartbeat(held)

    def heartbeat(self, run_ids: Sequence[int]) -> None:
        """Say that this process still runs these sessions (best effort: never raises)."""
        owner = lease.me()
        query = (
            update(RunRow)
            .where(RunRow.id.in_(list(run_ids)))
            .where(RunRow.owner_host == owner.host, RunRow.owner_pid == owner.pid)
            .values(heartbeat_at=utcnow())
        )
        try:
            with self._writers() as session, session.begin():
                session.execute(query)
        except SQLAlchemyError:
            pass  # the next beat tries again; the lease lapses only after lease_ttl_s

    # -- writing ------------------------------------------------------------------------
    def _get_or_create(self, session: Session, table: Table, values: dict[str, Any]) -> int:
        """The id of the row with ``values["key"]``, inserted when missing, race-free."""
        key = values["key"]
        found = session.scalar(select(table.c.id).where(table.c.key == key))
        if found is not None:
            return int(found)
        dialect = session.get_bind().dialect.name
        if dialect == "sqlite":
            session.execute(
                sqlite.insert(table).values(**values).on_conflict_do_nothing(index_elements=["key"])
            )
        elif dialect == "postgresql":
            session.execute(
                postgresql.insert(table)
                .values(**values)
                .on_conflict_do_nothing(index_elements=["key"])
            )
        else:  # no portable ON CONFLICT: insert in a savepoint, a duplicate is someone else's
            try:
                with session.begin_nested():
                    session.execute(insert(table).values(**values))
            except IntegrityError:
                pass
        return int(session.scalars(select(table.c.id).where(table.c.key == key)).one())

    def _change(self, session: Session, change: Change) -> ChangeRow:
        change = redact_change(change)
        values = {
            "key": change_store_key(change),
            "kind": change.kind,
            "name": change.name,
            "value": change.value,
        }
        row = session.get(ChangeRow, self._get_or_create(session, _table(ChangeRow), values))
        assert row is not None
        return row

    def _fingerprint(self, session: Session, fingerprint: Mapping[str, Any]) -> FingerprintRow:
        values = {
            "key": fingerprint_key(fingerprint),
            "data": json.loads(json.dumps(fingerprint, default=str)),
            "created_at": utcnow(),
        }
        fid = self._get_or_create(session, _table(FingerprintRow), values)
        row = session.get(FingerprintRow, fid)
        assert row is not None
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
        """A new session, leased to this process until :meth:`finish_run`."""
        safe_argv, safe_env = redacted_command(argv, env)

        def work(session: Session) -> int:
            fp = self._fingerprint(session, fingerprint)
            run = RunRow(
                status="running",
                engine=engine,
                argv=safe_argv,
                env=safe_env,
                options={
                    k: redact_text(v) if isinstance(v, str) else v for k, v in options.items()
                },
                fingerprint_id=fp.id,
            )
            self._take(run)
            session.add(run)
            session.flush()
            return run.id

        run_id = self._transaction(work)
        self._hold(run_id)
        return run_id

    def add_trial(self, run_id: int, trial: Trial) -> None:
        safe_argv, safe_env = redacted_command(trial.argv, trial.env)

        def work(session: Session) -> None:
            run = session.get(RunRow, run_id)
            if run is None:
                raise UserError(f"no run {run_id} in the findings store")
            row = TrialRow(
                run_id=run_id,
                index=trial.index,
                role=trial.role,
                tested=self._change(session, trial.tested) if trial.tested else None,
                why=redact_text(trial.why),
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
                placement=dict(trial.placement) if trial.placement else None,
            )
            row.changes = list(
                {id(r): r for r in (self._change(session, c) for c in trial.changes)}.values()
            )
            session.add(row)
            if trial.role == "baseline" and trial.diagnosis is not None:
                run.error_class = trial.error_class
                run.phase = trial.phase
                run.summary = redacted_diagnosis(trial.diagnosis)["summary"]  # type: ignore[index]
            owner = lease.me()
            if (run.owner_host, run.owner_pid) == (owner.host, owner.pid):
                run.heartbeat_at = utcnow()

        self._transaction(work)

    def finish_run(
        self,
        run_id: int,
        *,
        status: str,
        reason: str,
        fix: Sequence[Change],
        trials: Sequence[Trial],
    ) -> None:
        """Close the session, record what it learnt about each change it tested, and release
        its lease."""

        def work(session: Session) -> None:
            run = session.get(RunRow, run_id)
            if run is None:
                raise UserError(f"no run {run_id} in the findings store")
            run.status = status
            run.owner_host = run.owner_pid = run.owner_started = None
            run.reason = redact_text(reason)
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

        self._transaction(work)
        self._release(run_id)

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
        rows = self._transaction(lambda session: session.execute(query).all(), write=False)
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
                placement=t.placement,
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
        return self._transaction(
            lambda session: [self._load(r) for r in session.scalars(query).all()], write=False
        )

    def _first(self, query: Any) -> StoredRun | None:
        def work(session: Session) -> StoredRun | None:
            row = session.scalars(query).first()
            return self._load(row) if row is not None else None

        return self._transaction(work, write=False)

    def run(self, run_id: int) -> StoredRun | None:
        return self._first(self._query().where(RunRow.id == run_id))

    def latest_unfinished(self) -> StoredRun | None:
        query = self._query().where(RunRow.status.in_(("running", "interrupted")))
        return self._first(query.order_by(RunRow.id.desc()))

    def held_by(self, run_id: int) -> str | None:
        """Who else runs this session now, in words; None when nobody does."""

        def work(session: Session) -> str | None:
            run = session.get(RunRow, run_id)
            return self._holder(run) if run is not None else None

        return self._transaction(work, write=False)

    def _holder(self, run: RunRow) -> str | None:
        return lease.holder(
            host=run.owner_host,
            pid=run.owner_pid,
            started=run.owner_started,
            heartbeat_at=run.heartbeat_at,
            ttl_s=self.lease_ttl_s,
            now=utcnow(),
        )

    def reopen(self, run_id: int) -> None:
        """Take a stored session over to resume it: refused (:class:`UserError`) while
        another live process runs it; its lease is this process's until :meth:`finish_run`."""

        def work(session: Session) -> bool:
            run = session.scalars(
                select(RunRow).where(RunRow.id == run_id).with_for_update()
            ).first()
            if run is None:
                return False
            other = self._holder(run)
            if other is not None:
                raise UserError(
                    f"session {run_id} is still running ({other}); "
                    "let it finish or stop it before resuming"
                )
            run.status = "running"
            run.finished_at = None
            self._take(run)
            return True

        if self._transaction(work):
            self._hold(run_id)


def _table(model: type[Any]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)
    return table


def _row_dict(row: ChangeRow) -> dict[str, Any]:
    return {"kind": row.kind, "name": row.name, "value": row.value}
