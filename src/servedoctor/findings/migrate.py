"""Bring a findings store to the head revision of its Alembic migrations, safely when
several processes open a new store at once.

The migrations run on one connection inside one transaction that first takes a lock:
``BEGIN IMMEDIATE`` on SQLite (see :mod:`servedoctor.findings.connect`), a transaction-scoped
``pg_advisory_xact_lock`` on PostgreSQL. The second opener waits, then finds the store at
head. A store from the first release (tables, no ``alembic_version``) is stamped at revision
0001 and upgraded from there: nothing is recreated, nothing lost.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text

from servedoctor.findings.connect import writer

__all__ = ["BASELINE", "MIGRATIONS", "current_revision", "head_revision", "upgrade"]

MIGRATIONS = Path(__file__).with_name("migrations")
BASELINE = "0001"  # the schema the first release created without Alembic
ADVISORY_LOCK_KEY = 0x5EDD0C70  # pg_advisory_xact_lock key: "servedoctor store migration"


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_config()).get_current_head()


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine) -> None:
    """``alembic upgrade head`` under a lock; a no-op (one read) for a store at head."""
    head = head_revision()
    with engine.connect() as connection:
        if current_revision(connection) == head:
            return
    with writer(engine).connect() as connection, connection.begin():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": ADVISORY_LOCK_KEY})
        current = current_revision(connection)
        if current == head:
            return  # another process migrated it while we waited
        config = _config(connection)
        if current is None and inspect(connection).has_table("runs"):
            command.stamp(config, BASELINE)
        command.upgrade(config, "head")
