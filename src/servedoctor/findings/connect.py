"""Engines for the findings store that behave under concurrent sessions.

SQLite: WAL (readers never block the writer, the writer never blocks readers), a busy
timeout on every connection, and transactions begun by us: ``BEGIN IMMEDIATE`` for a writer
(so two writers queue at the start instead of one failing when it upgrades its read lock),
plain ``BEGIN`` for a reader. PostgreSQL needs none of that. On either, a transient error
("database is locked", a serialization failure, a deadlock) is retried with backoff by
:func:`retrying`; when it persists the caller gets a one-line :class:`UserError`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError

from servedoctor.errors import UserError

__all__ = ["WRITE", "is_transient", "make_engine", "retrying", "writer"]

T = TypeVar("T")

WRITE = "servedoctor_write"  # execution option: this connection's transactions write
TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})  # serialization, deadlock, lock
TRANSIENT_MESSAGES = ("database is locked", "database is busy", "database table is locked")


def make_engine(url: str, *, busy_timeout_s: float) -> Engine:
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"timeout": busy_timeout_s})
    busy_ms = int(busy_timeout_s * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # no implicit BEGIN: _on_begin issues it
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA journal_mode = WAL")  # persistent; a no-op once set
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get(WRITE)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def writer(engine: Engine) -> Engine:
    """The same engine (and pool) whose transactions take the write lock up front."""
    return engine.execution_options(**{WRITE: True})


def is_transient(exc: BaseException) -> bool:
    if not isinstance(exc, DBAPIError):
        return False
    orig = exc.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state in TRANSIENT_SQLSTATES:
        return True
    text = str(orig).lower()
    return any(m in text for m in TRANSIENT_MESSAGES)


def retrying(
    what: str,
    attempt: Callable[[], T],
    *,
    retry_for_s: float,
    first_delay_s: float = 0.05,
    max_delay_s: float = 2.0,
) -> T:
    """``attempt()`` until it does not fail transiently (each attempt is one transaction)."""
    deadline = time.monotonic() + retry_for_s
    delay = first_delay_s
    while True:
        try:
            return attempt()
        except DBAPIError as exc:
            if not is_transient(exc):
                raise
            if time.monotonic() + delay > deadline:
                first_line = str(exc.orig).strip().splitlines()[0] if str(exc.orig) else "busy"
                raise UserError(
                    f"findings store {what} stayed busy for {retry_for_s:.0f} s "
                    f"({first_line}); try again when the other servedoctor is done"
                ) from exc
            time.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, max_delay_s)
