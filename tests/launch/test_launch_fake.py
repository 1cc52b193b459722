"""The supervisor against a small fake server: teardown, stalls, fatal lines, redaction."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from servedoctor.launch import LaunchOptions, launch

FAKE = str(Path(__file__).parent / "fakeserver.py")
pytestmark = pytest.mark.timeout(60)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _opts(tmp_path: Path, **kw: object) -> LaunchOptions:
    base: dict[str, object] = {"runs_dir": tmp_path, "grace_s": 1.0, "request_timeout": 5.0}
    base.update(kw)
    return LaunchOptions(**base)  # type: ignore[arg-type]


def _left(port: int) -> list[int]:
    """Live fake-server processes of this test (found by their port on the command line)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            cmd = proc.info["cmdline"] or []
            if FAKE in cmd and str(port) in cmd and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def test_healthy_fake_server(tmp_path: Path) -> None:
    port = _port()
    cmd = [sys.executable, FAKE, "ok", str(port), "--port", str(port)]
    result = launch(cmd, _opts(tmp_path, expect="Hello"))
    assert result.outcome == "healthy", result.failure
    assert result.smoke is not None and result.smoke.text == "Hello there."
    assert result.smoke.tokens == 3 and result.smoke.ttft_s is not None
    assert result.leftover_processes == 0 and _left(port) == []


def test_expect_mismatch_fails(tmp_path: Path) -> None:
    port = _port()
    result = launch(
        [sys.executable, FAKE, "ok", str(port), "--port", str(port)],
        _opts(tmp_path, expect="^Bonjour"),
    )
    assert result.outcome == "failed"
    assert result.failure is not None and result.failure.kind == "unexpected_text"


def test_escaped_child_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    port = _port()
    cmd = [sys.executable, FAKE, "escape", str(port), "--port", str(port)]
    result = launch(cmd, _opts(tmp_path))
    assert result.outcome == "healthy"
    assert result.leftover_processes == 0
    assert _left(port) == []
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["teardown"]["killed"] >= 1  # the escaped child needed SIGKILL


def test_stall_is_a_hang(tmp_path: Path) -> None:
    port = _port()
    cmd = [sys.executable, FAKE, "stall", str(port), "--port", str(port)]
    started = time.monotonic()
    result = launch(cmd, _opts(tmp_path, stall_timeouts={"startup": 1.5}))
    assert time.monotonic() - started < 15
    assert result.outcome == "failed"
    assert result.failure is not None and result.failure.kind == "stall"
    assert result.diagnosis is not None and result.diagnosis.error_class == "hang"
    assert result.diagnosis.phase == "startup"
    assert result.leftover_processes == 0
    assert _left(port) == []


def test_fatal_line_keeps_the_traceback_after_it(tmp_path: Path) -> None:
    port = _port()
    # 'sglang.launch_server' in the argv selects the SGLang spec and its fatal lines.
    cmd = [sys.executable, FAKE, "fatal", str(port), "--port", str(port), "sglang.launch_server"]
    result = launch(cmd, _opts(tmp_path))
    assert result.engine == "sglang"
    assert result.failure is not None and result.failure.kind == "fatal_line"
    assert result.failure.line == 2
    assert "out of memory" in result.log_path.read_text()  # the line after the fatal one
    assert result.leftover_processes == 0
    assert _left(port) == []


def test_stubborn_server_gets_sigkill(tmp_path: Path) -> None:
    port = _port()
    cmd = [sys.executable, FAKE, "stubborn", str(port), "--port", str(port)]
    result = launch(cmd, _opts(tmp_path, grace_s=0.5))
    assert result.outcome == "healthy"
    assert result.exit_code == -9
    assert result.leftover_processes == 0
    assert _left(port) == []


def test_secrets_masked_in_log_and_run_json(tmp_path: Path) -> None:
    port = _port()
    cmd = [
        sys.executable,
        FAKE,
        "secret",
        str(port),
        "--port",
        str(port),
        "--api-key",
        "sk-abcdefghijklmnop1234",
    ]
    result = launch(cmd, _opts(tmp_path, env={"MY_API_KEY": "topsecret"}))
    log = result.log_path.read_text()
    run = (result.run_dir / "run.json").read_text()
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in log and "***" in log
    assert "sk-abcdefghijklmnop1234" not in run and "topsecret" not in run


def test_keep_running_leaves_server_and_log_relay(tmp_path: Path) -> None:
    port = _port()
    cmd = [sys.executable, FAKE, "ok", str(port), "--port", str(port)]
    result = launch(cmd, _opts(tmp_path, keep_running=True))
    try:
        assert result.outcome == "healthy" and result.kept_running
        assert result.pid is not None and psutil.pid_exists(result.pid)
        before = result.log_path.read_text().count("GET /health")
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(b"GET /health HTTP/1.0\r\n\r\n")
            conn.recv(100)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if result.log_path.read_text().count("GET /health") > before:
                break
            time.sleep(0.05)
        assert result.log_path.read_text().count("GET /health") > before  # relay writes on
    finally:
        if result.pid is not None:
            os.killpg(result.pid, 9)
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["stop_with"] == f"kill -TERM -- -{result.pid}"


def test_cli_usage_errors(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).parent / "servedoctor")
    for args in (
        ["--", "no-such-command-xyz"],
        [],
        ["--stall-timeout", "nophase=3", "--", "true"],
        ["--expect", "(", "--", "true"],
    ):
        proc = subprocess.run(
            [exe, "launch", "--exit-after-smoke", "--runs-dir", str(tmp_path), *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # no run directory for a usage error


def test_without_a_port_flag_the_port_comes_from_the_servers_own_line(tmp_path: Path) -> None:
    port = _port()
    # no --port: the engine default (8000) would be probed, but the server says where it is
    result = launch([sys.executable, FAKE, "ok", str(port)], _opts(tmp_path, expect="Hello"))
    assert result.outcome == "healthy", result.failure
    assert result.smoke is not None and result.smoke.text == "Hello there."
    record = json.loads((result.run_dir / "run.json").read_text())
    assert any(f"listens on port {port}" in w for w in record["warnings"])
    assert result.leftover_processes == 0 and _left(port) == []
