"""The findings store under concurrent fix sessions, with real processes.

Each worker is a fresh Python process that opens the (new, not yet created) store, starts a
session on a fingerprint no one has stored yet, records its trials and finishes: the first
open, the fingerprint and the changes all race. Nothing may fail and nothing may be lost.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from servedoctor.errors import UserError
from servedoctor.experiments.trial import Trial
from servedoctor.findings.schema import ChangeRow, FingerprintRow, RunRow, TrialRow
from servedoctor.findings.store import FindingsStore
from servedoctor.model import Change

SESSIONS = 8
TRIALS = 10

# One process imports servedoctor once, then forks the sessions (real processes, each with
# its own store and connections; forked before anything is opened) and starts them together.
SESSIONS_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time, traceback
    from servedoctor.experiments.trial import Trial
    from servedoctor.findings.store import FindingsStore
    from servedoctor.model import Change

    url, sessions, trials = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    def session():
        store = FindingsStore.open(url)  # the store does not exist yet: the first open races
        run = store.start_run(engine="sglang", argv=["serve"], env={}, options={},
                              fingerprint={"gpu": "brand new", "run": "shared"})
        shared = Change("env", "SHARED", "1")
        done = []
        for i in range(trials):
            tested = Change("flag", "--knob", str(i % 3))
            trial = Trial(index=i, role="candidate", changes=(tested, shared), tested=tested,
                          why="", argv=("serve",), env={}, outcome="same_failure",
                          diagnosis=None, duration_s=0.1, against="oom")
            store.add_trial(run, trial)
            done.append(trial)
        store.finish_run(run, status="not_fixed", reason="", fix=[], trials=done)
        return run

    start_r, start_w = os.pipe()
    children = []
    for _ in range(sessions):
        pid = os.fork()
        if pid == 0:
            os.close(start_w)
            os.read(start_r, 1)
            code = 0
            try:
                line = json.dumps({"run": session()}) + "\\n"
                os.write(1, line.encode())  # one write: the children share the pipe
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stderr.flush()
            os._exit(code)
        children.append(pid)
    os.close(start_r)
    started = time.monotonic()
    os.write(start_w, b"go" * sessions)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    print(json.dumps({"elapsed": time.monotonic() - started, "codes": codes}), flush=True)
    """
)


def run_sessions(url: str, sessions: int, trials: int) -> tuple[list[int], float]:
    """``sessions`` concurrent fix sessions on ``url``; their run ids and the wall time."""
    proc = subprocess.run(
        [sys.executable, "-c", SESSIONS_SCRIPT, url, str(sessions), str(trials)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr
    try:
        lines = [json.loads(line) for line in proc.stdout.splitlines()]
    except ValueError as exc:
        raise AssertionError(f"{exc}: {proc.stdout!r} {proc.stderr!r}") from exc
    summary = lines.pop()
    assert summary["codes"] == [0] * sessions, proc.stderr
    return sorted(line["run"] for line in lines), float(summary["elapsed"])


def test_concurrent_sessions_share_a_new_store_and_fingerprint(
    store_url_for_test: str,
) -> None:
    run_ids, elapsed = run_sessions(store_url_for_test, SESSIONS, TRIALS)
    assert len(set(run_ids)) == SESSIONS
    store = FindingsStore.open(store_url_for_test)
    with store.engine.connect() as conn:
        count = lambda table: conn.scalar(select(func.count()).select_from(table))  # noqa: E731
        assert count(FingerprintRow) == 1
        assert count(RunRow) == SESSIONS
        assert count(TrialRow) == SESSIONS * TRIALS
        assert count(ChangeRow) == 4  # --knob 0/1/2 and SHARED=1, each once
        pairs = set(conn.execute(select(TrialRow.run_id, TrialRow.index)).all())
    assert pairs == {(r, i) for r in run_ids for i in range(TRIALS)}
    runs = store.runs()
    assert {r.status for r in runs} == {"not_fixed"}
    assert all(len(r.trials) == TRIALS for r in runs)
    history = store.history({"gpu": "brand new", "run": "shared"}, "oom")
    assert history[Change("flag", "--knob", "0")].tries == SESSIONS
    print(f"{SESSIONS} sessions × {TRIALS} trials in {elapsed:.2f} s")


def _hold(path: Path, begin: str, seconds: float) -> subprocess.Popen[str]:
    """Another process that holds a transaction on the SQLite file for ``seconds``."""
    code = textwrap.dedent(
        f"""
        import sqlite3, time
        c = sqlite3.connect({str(path)!r}, isolation_level=None)
        c.execute({begin!r})
        c.execute("SELECT count(*) FROM trials").fetchall()
        if "IMMEDIATE" in {begin!r}:
            c.execute("INSERT INTO changes (key, kind, name) VALUES ('held', 'env', 'HELD')")
        print("holding", flush=True)
        time.sleep({seconds})
        c.execute("COMMIT")
        print("released", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
    return proc


def _trial(i: int) -> Trial:
    change = Change("flag", "--knob", str(i))
    return Trial(index=i, role="candidate", changes=(change,), tested=change, why="",
                 argv=("serve",), env={}, outcome="failed", diagnosis=None, duration_s=0.1)  # fmt: skip


def _store_with_run(path: Path, **options: float) -> tuple[FindingsStore, int]:
    store = FindingsStore.open(path, **options)
    run = store.start_run(engine="x", argv=["serve"], env={}, options={}, fingerprint={"a": 1})
    return store, run


def test_a_reader_holding_a_transaction_does_not_block_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    store, run = _store_with_run(path)
    reader = _hold(path, "BEGIN", 2.0)
    started = time.monotonic()
    for i in range(3):
        store.add_trial(run, _trial(i))
    elapsed = time.monotonic() - started
    assert reader.poll() is None, "the writer waited for the reader to finish"
    assert elapsed < 1.5
    reader.communicate(timeout=10)
    stored = store.run(run)
    assert stored is not None and len(stored.trials) == 3


def test_a_writer_waits_for_another_writers_lock_and_succeeds(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    store, run = _store_with_run(path)
    with store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    holder = _hold(path, "BEGIN IMMEDIATE", 1.0)
    started = time.monotonic()
    store.add_trial(run, _trial(0))
    assert time.monotonic() - started > 0.7  # it did wait for the lock
    holder.communicate(timeout=10)
    stored = store.run(run)
    assert stored is not None and len(stored.trials) == 1
    assert sqlite3.connect(path).execute("SELECT count(*) FROM changes").fetchone() == (2,)


def test_lock_errors_past_the_busy_timeout_are_retried(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    store, run = _store_with_run(path, busy_timeout_s=0.1, retry_for_s=20)
    holder = _hold(path, "BEGIN IMMEDIATE", 0.8)
    store.add_trial(run, _trial(0))  # "database is locked" several times, then it goes in
    holder.communicate(timeout=10)
    stored = store.run(run)
    assert stored is not None and len(stored.trials) == 1


def test_a_lock_that_outlasts_the_retries_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    store, run = _store_with_run(path, busy_timeout_s=0.1, retry_for_s=0.3)
    holder = _hold(path, "BEGIN IMMEDIATE", 1.0)
    with pytest.raises(UserError, match=r"stayed busy .*database is locked") as caught:
        store.add_trial(run, _trial(0))
    assert "\n" not in str(caught.value)
    holder.communicate(timeout=10)
    assert os.path.getsize(path) > 0
