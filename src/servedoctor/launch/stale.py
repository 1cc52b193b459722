"""Runs left ``running`` by a supervisor that is gone, and the processes they left behind.

A run.json whose outcome is still ``running`` while neither its supervisor nor its reaper is
alive was abandoned (both were killed, or the machine went down). :func:`find_stale_runs`
names each one in a line — with the server's pid if that process still runs the run's
command — and marks it ``abandoned`` in its run.json. ``launch`` calls it before it starts;
any other command may.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from servedoctor.launch.process import RUN_MARKER
from servedoctor.launch.rundir import RUN_JSON, write_run_json
from servedoctor.redact import redact_argv


@dataclass(frozen=True)
class StaleRun:
    """A run marked ``running`` whose supervisor is gone."""

    run_dir: Path
    supervisor_pid: int
    server_pids: tuple[int, ...]  # processes of the run still alive (the server first)

    def line(self) -> str:
        head = (
            f"run {self.run_dir.name} is marked running but its supervisor "
            f"(pid {self.supervisor_pid}) is gone"
        )
        if not self.server_pids:
            return f"{head}; no process of it is left"
        pid = self.server_pids[0]
        more = f" (and {len(self.server_pids) - 1} more)" if len(self.server_pids) > 1 else ""
        return f"{head}; server pid {pid}{more} still holds it — stop it: kill -TERM -- -{pid}"


def find_stale_runs(runs_dir: Path, *, mark: bool = True) -> list[StaleRun]:
    """Every abandoned run under ``runs_dir``; ``mark`` writes ``abandoned`` into each."""
    stale: list[StaleRun] = []
    if not runs_dir.is_dir():
        return stale
    for path in sorted(runs_dir.glob(f"*/{RUN_JSON}")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or record.get("outcome") != "running":
            continue
        supervisor = record.get("supervisor")
        if not isinstance(supervisor, dict) or _alive(supervisor.get("pid"), supervisor):
            continue  # still supervised, or too old a run.json to tell
        if _alive(record.get("reaper_pid")):
            continue  # the reaper is stopping it and will write the outcome
        run = StaleRun(path.parent, int(supervisor["pid"]), _left(record))
        if mark:
            _mark_abandoned(path.parent, record, run)
        stale.append(run)
    return stale


def port_holder(port: int) -> str:
    """``" (by pid N: CMD)"`` for the process listening on ``port``, or ``""``."""
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                if conn.pid is None:
                    return ""
                cmd = " ".join(redact_argv(psutil.Process(conn.pid).cmdline()))
                return f" (by pid {conn.pid}: {cmd[:120]})"
    return ""


def _alive(pid: object, identity: dict[str, Any] | None = None) -> bool:
    """``pid`` runs (and, given its recorded create time, is still the same process)."""
    if not isinstance(pid, int):
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        created = (identity or {}).get("create_time")
        return not isinstance(created, float) or abs(proc.create_time() - created) < 1.5
    except psutil.Error:
        return False


def _left(record: dict[str, Any]) -> tuple[int, ...]:
    """The run's live processes: the server if it still runs the run's command, then any
    process carrying the run's marker."""
    found: list[int] = []
    pid, command = record.get("pid"), record.get("command")
    if isinstance(pid, int) and isinstance(command, list) and _alive(pid):
        with contextlib.suppress(psutil.Error):
            if matches_command(psutil.Process(pid).cmdline(), command):
                found.append(pid)
    run_id = record.get("run_id")
    if isinstance(run_id, str):
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                mine = proc.pid not in found and proc.environ().get(RUN_MARKER) == run_id
                if mine and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc.pid)
    return tuple(found)


def matches_command(cmdline: list[str], command: list[str]) -> bool:
    """A live cmdline runs the recorded (masked) command; a script's interpreter may lead."""
    live = redact_argv(cmdline)
    if not command or live == command:
        return live == command
    n = len(command) - 1
    if n and live[-n:] != command[1:]:
        return False
    head = live[: len(live) - n]
    return any(os.path.basename(a) == os.path.basename(command[0]) for a in head)


def _mark_abandoned(run_dir: Path, record: dict[str, Any], run: StaleRun) -> None:
    record["outcome"] = "abandoned"
    record["outcome_detail"] = run.line()
    record["abandoned"] = {
        "detected_at": datetime.now().astimezone().isoformat(timespec="seconds"),
        "detected_by_pid": os.getpid(),
        "server_pids": list(run.server_pids),
    }
    with contextlib.suppress(OSError):
        write_run_json(run_dir, record)
