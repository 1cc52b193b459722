"""A run left ``running`` by a supervisor that is gone is named, with its orphan, and marked."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from servedoctor.launch.stale import find_stale_runs, matches_command

FAKE = str(Path(__file__).parent / "fakeserver.py")
pytestmark = pytest.mark.timeout(60)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _write_run(runs: Path, name: str, **fields: Any) -> Path:
    run_dir = runs / name
    run_dir.mkdir(parents=True)
    record = {"outcome": "running", "pid": None, "command": [], "run_id": None, **fields}
    (run_dir / "run.json").write_text(json.dumps(record))
    return run_dir


def test_stale_run_with_an_orphan_is_named_and_marked(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    argv = [sys.executable, "-c", "import time; time.sleep(60)", token]
    orphan = subprocess.Popen(argv)
    try:
        dead = _dead_pid()
        gone = _write_run(
            tmp_path,
            "20261201-000000-openai",
            supervisor={"pid": dead, "create_time": 1.0},
            pid=orphan.pid,
            command=argv,
        )
        me = psutil.Process()
        _write_run(  # still supervised: left alone
            tmp_path,
            "20261201-000001-openai",
            supervisor={"pid": me.pid, "create_time": me.create_time()},
        )
        _write_run(tmp_path, "20261201-000002-openai")  # too old to tell: left alone
        (stale,) = find_stale_runs(tmp_path)
        assert stale.line() == (
            f"run 20261201-000000-openai is marked running but its supervisor (pid {dead}) is "
            f"gone; server pid {orphan.pid} still holds it — stop it: kill -TERM -- -{orphan.pid}"
        )
        record = json.loads((gone / "run.json").read_text())
        assert record["outcome"] == "abandoned"
        assert record["abandoned"]["server_pids"] == [orphan.pid]
        assert find_stale_runs(tmp_path) == []  # marked: reported once
    finally:
        orphan.kill()
        orphan.wait()


def test_stale_run_without_processes(tmp_path: Path) -> None:
    dead = _dead_pid()
    _write_run(tmp_path, "r1", supervisor={"pid": dead}, pid=dead, command=["x"])
    (stale,) = find_stale_runs(tmp_path, mark=False)
    assert stale.server_pids == () and stale.line().endswith("; no process of it is left")
    assert len(find_stale_runs(tmp_path)) == 1  # mark=False left it as it was


def test_command_matching_allows_an_interpreter_in_front() -> None:
    cmd = ["transformers", "serve", "--port", "8000", "--api-key", "***"]
    live = ["/usr/bin/python3", "/venv/bin/transformers", "serve", "--port", "8000"]
    assert matches_command([*live, "--api-key", "s3cret"], cmd)
    assert not matches_command([*live, "--api-key"], cmd)
    assert not matches_command(["vllm", "serve", "--port", "8000", "--api-key", "x"], cmd)


def test_next_launch_names_the_orphan_of_a_killed_supervisor(tmp_path: Path) -> None:
    """Supervisor and reaper both SIGKILLed: the server survives; the next launch says so."""
    port = "0"
    server = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]
    token = uuid.uuid4().hex
    base = [
        sys.executable,
        "-m",
        "servedoctor",
        "launch",
        "--exit-after-smoke",
        "-q",
        "--runs-dir",
        str(tmp_path),
    ]
    sup = subprocess.Popen([*base, "--", *server, token, "--port", port])
    orphan: int | None = None
    try:
        deadline = time.monotonic() + 20
        record: dict[str, Any] = {}
        while not record.get("pid") or not record.get("reaper_pid"):
            assert time.monotonic() < deadline
            time.sleep(0.02)
            for path in tmp_path.glob("*/run.json"):
                record = json.loads(path.read_text())
        orphan = int(record["pid"])
        os.kill(int(record["reaper_pid"]), signal.SIGKILL)
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait(5)
        time.sleep(0.2)
        assert psutil.pid_exists(orphan)  # nobody left to stop it

        fake_port = str(_port())
        nxt = subprocess.run(
            [
                *base,
                "--grace",
                "1",
                "--",
                sys.executable,
                FAKE,
                "ok",
                fake_port,
                "--port",
                fake_port,
            ],
            capture_output=True,
            text=True,
            timeout=40,
        )
        assert nxt.returncode == 0, nxt.stderr
        assert f"is marked running but its supervisor (pid {sup.pid}) is gone" in nxt.stderr
        assert f"server pid {orphan} still holds it" in nxt.stderr
        old = json.loads((Path(record["run_dir"]) / "run.json").read_text())
        assert old["outcome"] == "abandoned" and old["abandoned"]["server_pids"] == [orphan]
        records = [json.loads(p.read_text()) for p in tmp_path.glob("*/run.json")]
        (new,) = [r for r in records if r["outcome"] == "healthy"]
        assert any(f"server pid {orphan} still holds it" in w for w in new["warnings"])
    finally:
        if orphan is not None:
            with contextlib.suppress(OSError):
                os.killpg(orphan, signal.SIGKILL)
        if sup.poll() is None:
            sup.kill()


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
