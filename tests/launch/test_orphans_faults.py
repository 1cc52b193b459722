"""Faults of the supervising process itself leave no server behind, and a final run.json.

Each test runs ``python -m servedoctor launch … -- SERVER`` as a real process, hurts it
(SIGKILL, SIGHUP, a closed output pipe, Ctrl-C at various instants) and checks with psutil
that no process of the run survives.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

FAKE = str(Path(__file__).parent / "fakeserver.py")
pytestmark = pytest.mark.timeout(60)

#: A server that never gets ready; with ``escape`` it forks a child that leaves the process
#: group and ignores SIGTERM (only SIGKILL ends it).
SERVER = """
import os, signal, sys, time
print("INFO:     Started server process", flush=True)
if sys.argv[1] == "escape" and os.fork() == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(120)
    os._exit(0)
time.sleep(120)
"""


class Run:
    """One supervisor process and the processes of its run (tagged by a unique token)."""

    def __init__(self, tmp: Path, mode: str = "plain", *, quiet: bool = True, **kw: Any) -> None:
        self.token = uuid.uuid4().hex
        self.runs = tmp / self.token[:8]
        port = str(_port())
        server = [sys.executable, "-c", SERVER, mode, self.token, "--port", port]
        args = ["--runs-dir", str(self.runs), "--grace", "1", *(["--quiet"] if quiet else [])]
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        self.started = time.monotonic()
        self.sup = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "servedoctor",
                "launch",
                "--exit-after-smoke",
                *args,
                "--",
                *server,
            ],
            start_new_session=True,  # like a terminal: Ctrl-C goes to the group
            **kw,
        )

    def processes(self) -> list[psutil.Process]:
        """Live processes of the server (the supervisor's own argv holds the token too)."""
        found = []
        for proc in psutil.process_iter(["cmdline", "status"]):
            cmd = proc.info["cmdline"] or []
            mine = len(cmd) > 3 and cmd[1] == "-c" and self.token in cmd
            if mine and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
        return found

    def record(self) -> dict[str, Any] | None:
        for path in self.runs.glob("*/run.json"):
            try:
                return dict(json.loads(path.read_text()))
            except (OSError, ValueError):
                return None  # being replaced
        return None

    def wait_server(self, count: int = 1) -> None:
        _wait(lambda: len(self.processes()) >= count, 20, "the server to start")
        _wait(lambda: (self.record() or {}).get("pid") is not None, 5, "run.json")

    def gone(self, timeout: float = 10) -> float:
        """Seconds until no process of the run is left (fails the test after ``timeout``)."""
        t = time.monotonic()
        _wait(lambda: not self.processes(), timeout, "the run's processes to go")
        return time.monotonic() - t

    def final(self) -> dict[str, Any]:
        """run.json once its outcome is final (the reaper may still be writing it)."""
        _wait(lambda: (self.record() or {}).get("outcome") not in (None, "running"), 10, "final")
        rec = self.record()
        assert rec is not None
        reaper = rec.get("reaper_pid")
        if isinstance(reaper, int):
            _wait(lambda: not _alive(reaper), 5, "the reaper to leave")
        return rec

    def cleanup(self) -> None:
        for proc in self.processes():
            with contextlib.suppress(psutil.Error):
                proc.kill()
        if self.sup.poll() is None:
            self.sup.kill()
        self.sup.wait(5)


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def runs(tmp_path: Path) -> Any:
    made: list[Run] = []

    def make(*args: Any, **kw: Any) -> Run:
        made.append(Run(tmp_path, *args, **kw))
        return made[-1]

    yield make
    for run in made:
        run.cleanup()


@pytest.mark.parametrize("mode", ["plain", "escape"])
def test_sigkill_of_the_supervisor_leaves_nothing(runs: Any, mode: str) -> None:
    run = runs(mode)
    run.wait_server(2 if mode == "escape" else 1)
    server_pids = sorted(p.pid for p in run.processes())
    os.kill(run.sup.pid, signal.SIGKILL)
    took = run.gone(timeout=8)
    print(f"SIGKILL of the supervisor → {mode} server tree gone in {took * 1000:.0f} ms")
    assert run.sup.wait(5) == -signal.SIGKILL
    rec = run.final()
    assert rec["outcome"] == "orphaned" and rec["outcome_detail"] == "orphaned: supervisor gone"
    td = rec["teardown"]
    assert td["by"] == "reaper" and td["leftover"] == 0
    # the reaper knew the server; a server that died by itself (its log pipe closed with the
    # supervisor) needs no stopping, so every pid is either stopped or already gone
    assert set(td["tracked_pids"]) & set(server_pids), td
    assert set(td["stopped_pids"]) <= set(server_pids), td  # nothing outside the run
    assert td["killed"] == (1 if mode == "escape" else 0)  # the escaped child needed SIGKILL


def test_sighup_tears_down_like_ctrl_c(runs: Any) -> None:
    run = runs("escape")
    run.wait_server(2)
    os.kill(run.sup.pid, signal.SIGHUP)
    assert run.sup.wait(15) == 130
    assert not run.processes()
    rec = run.final()
    assert rec["outcome"] == "interrupted"
    assert rec["teardown"]["leftover"] == 0 and rec["teardown"]["killed"] == 1


def test_closed_output_pipe_tears_down(runs: Any) -> None:
    """``servedoctor launch … 2>&1 | head -1``: head leaves after one line."""
    run = runs("plain", quiet=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert run.sup.stdout is not None
    first = run.sup.stdout.readline()
    assert first  # the display's first line
    run.sup.stdout.close()
    assert run.sup.wait(15) == 130
    assert not run.processes()
    rec = run.final()
    assert rec["outcome"] == "interrupted" and rec["teardown"]["leftover"] == 0
    assert any("output closed" in w for w in rec["warnings"])


def test_closed_stdout_at_the_end_is_quiet(tmp_path: Path) -> None:
    """``servedoctor launch -q --json … | true``: the result cannot be printed; no traceback,
    and the exit status is still the run's."""
    port = str(_port())
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "servedoctor",
            "launch",
            "--exit-after-smoke",
            "--json",
            "-q",
            "--runs-dir",
            str(tmp_path),
            "--grace",
            "1",
            "--",
            sys.executable,
            FAKE,
            "ok",
            port,
            "--port",
            port,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(30) == 0, err
    assert b"Traceback" not in err and b"Exception ignored" not in err
    (run_json,) = tmp_path.glob("*/run.json")
    assert json.loads(run_json.read_text())["outcome"] == "healthy"


@pytest.mark.parametrize("delay", [0.002, 0.01, 0.05, 0.2, 0.5, "run_dir", "server"])
def test_ctrl_c_at_any_instant_leaves_nothing(runs: Any, delay: float | str) -> None:
    run = runs("plain")
    if delay == "run_dir":  # while the reaper and the server are being started
        _wait(lambda: run.runs.exists() and any(run.runs.iterdir()), 20, "the run directory")
    elif delay == "server":
        _wait(lambda: bool(run.processes()), 20, "the server")
    else:
        assert isinstance(delay, float)
        time.sleep(max(0.0, delay - (time.monotonic() - run.started)))
    os.killpg(run.sup.pid, signal.SIGINT)
    code = run.sup.wait(15)
    time.sleep(0.1)  # a server forked at the last instant would show now
    assert not run.processes(), f"Ctrl-C after {delay}: server left"
    rec = run.record()
    if rec is None:
        assert code != 0  # interrupted before the run began
    else:
        assert code == 130
        assert run.final()["outcome"] == "interrupted"
