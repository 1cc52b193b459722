"""Tables of the findings store (SQLAlchemy 2.0 ORM; portable types only, so SQLite and
PostgreSQL both work): runs, trials, fingerprints, changes, outcomes.

These classes describe the head revision; the database gets there through the Alembic
migrations in ``migrations/versions`` (a change here needs a new revision there).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Table,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

__all__ = ["Base", "ChangeRow", "FingerprintRow", "OutcomeRow", "RunRow", "TrialRow", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


trial_changes = Table(
    "trial_changes",
    Base.metadata,
    Column("trial_id", ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True),
    Column("change_id", ForeignKey("changes.id"), primary_key=True),
)


class FingerprintRow(Base):
    """The machine and software a run happened on; ``key`` hashes the fields that matter."""

    __tablename__ = "fingerprints"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class HealthyEnvRow(Base):
    """The server environment's packages at a healthy launch or fix, per engine and model:
    what a later failure of the same server is diffed against."""

    __tablename__ = "healthy_envs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    engine: Mapped[str] = mapped_column(String(64), index=True)
    target: Mapped[str] = mapped_column(String(512), index=True)
    python: Mapped[str] = mapped_column(String(512))
    packages: Mapped[dict[str, Any]] = mapped_column(JSON)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ChangeRow(Base):
    """One flag, env var or package pin with its value (unique on ``key``)."""

    __tablename__ = "changes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(700), unique=True, index=True)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(256))
    value: Mapped[str | None] = mapped_column(Text, nullable=True)


class RunRow(Base):
    """One ``servedoctor fix`` session."""

    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    status: Mapped[str] = mapped_column(
        String(16), index=True
    )  # running|fixed|not_fixed|interrupted
    engine: Mapped[str] = mapped_column(String(32))
    argv: Mapped[list[str]] = mapped_column(JSON)
    env: Mapped[dict[str, str]] = mapped_column(JSON)
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    fingerprint_id: Mapped[int | None] = mapped_column(ForeignKey("fingerprints.id"))
    error_class: Mapped[str | None] = mapped_column(String(32), nullable=True)
    phase: Mapped[str | None] = mapped_column(String(32), nullable=True)
    summary: Mapped[str] = mapped_column(Text, default="")
    reason: Mapped[str] = mapped_column(Text, default="")
    fix: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    # the lease: which process runs this session now, and when it last said so (revision 0002)
    owner_host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    owner_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    owner_started: Mapped[float | None] = mapped_column(Float, nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

    fingerprint: Mapped[FingerprintRow | None] = relationship()
    trials: Mapped[list[TrialRow]] = relationship(
        back_populates="run", order_by="TrialRow.index", cascade="all, delete-orphan"
    )
    outcomes: Mapped[list[OutcomeRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan"
    )


class TrialRow(Base):
    """One launch of the command with a change set."""

    __tablename__ = "trials"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    tested_id: Mapped[int | None] = mapped_column(ForeignKey("changes.id"), nullable=True)
    why: Mapped[str] = mapped_column(Text, default="")
    argv: Mapped[list[str]] = mapped_column(JSON)
    env: Mapped[dict[str, str]] = mapped_column(JSON)
    outcome: Mapped[str] = mapped_column(String(24))
    error_class: Mapped[str | None] = mapped_column(String(32), nullable=True)
    phase: Mapped[str | None] = mapped_column(String(32), nullable=True)
    against: Mapped[str | None] = mapped_column(String(32), nullable=True)
    diagnosis: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    duration_s: Mapped[float] = mapped_column(Float)
    gpu_peak_mib: Mapped[float | None] = mapped_column(Float, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    run_dir: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: where it ran: host, port, GPU slice, Ray node (None for trials before revision 0004)
    placement: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    run: Mapped[RunRow] = relationship(back_populates="trials")
    tested: Mapped[ChangeRow | None] = relationship()
    changes: Mapped[list[ChangeRow]] = relationship(secondary=trial_changes)


class OutcomeRow(Base):
    """What a run learnt about one change against one failure: the priors' raw data.

    verdict: ``fixed`` (made it healthy alone), ``needed`` (part of a minimal fix set),
    ``no_effect`` (same failure), ``moved`` (a different failure).
    """

    __tablename__ = "outcomes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    change_id: Mapped[int] = mapped_column(ForeignKey("changes.id"), index=True)
    fingerprint_id: Mapped[int | None] = mapped_column(ForeignKey("fingerprints.id"), index=True)
    error_class: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    verdict: Mapped[str] = mapped_column(String(16))

    run: Mapped[RunRow] = relationship(back_populates="outcomes")
    change: Mapped[ChangeRow] = relationship()
