"""A fix session is leased to the process running it: ``fix --resume`` cannot attach to a
session another live process still runs (it would duplicate its trials)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
from sqlalchemy import update

from servedoctor.errors import UserError
from servedoctor.findings import lease
from servedoctor.findings.schema import RunRow, utcnow
from servedoctor.findings.store import FindingsStore

# Another fix session, in its own process: it starts a session, says its id, then obeys
# "finish" (finish_run as interrupted) and exits when its stdin closes.
HOLDER = textwrap.dedent(
    """
    import sys
    from servedoctor.findings.store import FindingsStore
    store = FindingsStore.open(sys.argv[1])
    run = store.start_run(engine="sglang", argv=["python", "-m", "sglang.launch_server"],
                          env={}, options={}, fingerprint={"gpu": "x"})
    print(run, flush=True)
    for line in sys.stdin:
        if line.strip() == "finish":
            store.finish_run(run, status="interrupted", reason="", fix=[], trials=[])
            print("finished", flush=True)
    """
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "f.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    run_id = int(proc.stdout.readline())
    try:
        yield proc, run_id
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_resume_of_a_session_a_live_process_runs_is_refused(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], int]
) -> None:
    proc, run_id = holder
    store = FindingsStore.open(tmp_path / "f.db")
    assert re.fullmatch(rf"pid {proc.pid} on .+, heartbeat \d+ s ago", store.held_by(run_id) or "")
    with pytest.raises(UserError, match=rf"session {run_id} is still running \(pid {proc.pid} "):
        store.reopen(run_id)
    # the CLI says so in one line, exit 2, no traceback, nothing launched
    cli = subprocess.run(
        [sys.executable, "-m", "servedoctor", "fix", "--resume", "--store", str(tmp_path / "f.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 2, cli.stderr
    assert f"session {run_id} is still running (pid {proc.pid}" in cli.stderr
    assert "Traceback" not in cli.stderr and len(cli.stderr.strip().splitlines()) == 1
    stored = store.run(run_id)
    assert stored is not None and stored.trials == []

    # once it ends its session (interrupted), the lease is released: resumable while it lives
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("finish\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "finished"
    assert proc.poll() is None
    store.reopen(run_id)
    stored = store.run(run_id)
    assert stored is not None and stored.status == "running"
    with store.engine.connect() as conn:
        owner = conn.execute(RunRow.__table__.select().where(RunRow.__table__.c.id == run_id)).one()
    assert (owner.owner_pid, owner.owner_host) == (os.getpid(), lease.me().host)


def test_a_session_whose_process_died_can_be_resumed(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], int]
) -> None:
    proc, run_id = holder
    store = FindingsStore.open(tmp_path / "f.db")
    with pytest.raises(UserError):
        store.reopen(run_id)
    proc.kill()  # killed mid-session: the lease was never released, but its owner is gone
    proc.wait(timeout=10)
    assert store.held_by(run_id) is None
    store.reopen(run_id)
    assert store.latest_unfinished() is not None
    store.finish_run(run_id, status="not_fixed", reason="", fix=[], trials=[])
    with store.engine.connect() as conn:
        row = conn.execute(RunRow.__table__.select()).one()
    assert row.owner_pid is None and row.owner_host is None  # released


def _lease(store: FindingsStore, run_id: int, **values: object) -> None:
    with store.engine.begin() as conn:
        conn.execute(update(RunRow).where(RunRow.id == run_id).values(**values))


def test_a_holder_on_another_host_is_trusted_until_its_heartbeat_lapses(tmp_path: Path) -> None:
    store = FindingsStore.open(tmp_path / "f.db", lease_ttl_s=60)
    run_id = store.start_run(engine="x", argv=["a"], env={}, options={}, fingerprint={})
    store.finish_run(run_id, status="interrupted", reason="", fix=[], trials=[])
    _lease(store, run_id, owner_host="elsewhere", owner_pid=1, heartbeat_at=utcnow())
    with pytest.raises(UserError, match="pid 1 on elsewhere"):
        store.reopen(run_id)
    _lease(store, run_id, heartbeat_at=utcnow() - timedelta(seconds=61))
    store.reopen(run_id)  # a lapsed lease: that process is gone or wedged
    assert store.held_by(run_id) is None


def test_a_reused_pid_is_not_the_owner() -> None:
    other = psutil.Process().parent()  # a live process on this host that is not this one
    assert other is not None
    now = utcnow()
    started = other.create_time()
    fresh = {"host": lease.me().host, "pid": other.pid, "heartbeat_at": now, "now": now}
    assert lease.holder(started=started, ttl_s=60, **fresh) is not None  # type: ignore[arg-type]
    # the same pid, but a process started an hour earlier: the owner is gone, the pid reused
    assert lease.holder(started=started - 3600, ttl_s=60, **fresh) is None  # type: ignore[arg-type]


def test_the_heartbeat_runs_while_the_session_does(tmp_path: Path) -> None:
    store = FindingsStore.open(tmp_path / "f.db", heartbeat_s=0.05)
    run_id = store.start_run(engine="x", argv=["a"], env={}, options={}, fingerprint={})

    def beat() -> object:
        with store.engine.connect() as conn:
            return conn.execute(RunRow.__table__.select()).one().heartbeat_at

    first = beat()
    time.sleep(0.5)
    assert beat() != first
    store.finish_run(run_id, status="fixed", reason="", fix=[], trials=[])
    assert store._beat is None
    store.close()
