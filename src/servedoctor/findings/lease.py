"""Who runs a fix session now: host, pid and process start time, plus a heartbeat.

A session is held by another process when its heartbeat is fresh and, on this host, that
process is still alive (same pid, same start time: a reused pid is not the owner). A holder
on another host cannot be looked at, so there the heartbeat alone decides.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone

import psutil

__all__ = ["Owner", "holder", "me"]


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: float  # the process's start time (epoch seconds), tells a reused pid apart


_me: Owner | None = None


def me() -> Owner:
    global _me
    pid = os.getpid()
    if _me is None or _me.pid != pid:  # a forked child is another owner
        _me = Owner(socket.gethostname(), pid, psutil.Process(pid).create_time())
    return _me


def _alive(pid: int, started: float | None) -> bool:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(proc.create_time() - started) < 1.0
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # it exists; we may not look at it


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)  # SQLite: naive UTC


def holder(
    *,
    host: str | None,
    pid: int | None,
    started: float | None,
    heartbeat_at: datetime | None,
    ttl_s: float,
    now: datetime,
) -> str | None:
    """Who else holds a session with this lease, in words; None when nobody (or we) do."""
    if host is None or pid is None or heartbeat_at is None:
        return None
    mine = me()
    if host == mine.host and pid == mine.pid:
        return None
    age = (_aware(now) - _aware(heartbeat_at)).total_seconds()
    if age > ttl_s:
        return None  # a wedged or vanished holder: its lease has lapsed
    if host == mine.host and not _alive(pid, started):
        return None  # it died (killed, crashed) without releasing the lease
    return f"pid {pid} on {host}, heartbeat {max(age, 0):.0f} s ago"
