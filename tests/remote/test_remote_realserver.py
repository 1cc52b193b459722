"""A real `transformers serve` supervised through a real sshd on loopback (the "remote").

Healthy, a crash, Ctrl-C, and a dropped connection (the local ssh client killed): each ends
with no process of the run left on the remote side, checked independently with psutil.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from realserve import SECRET_TOKEN, free_port, launch_argv, processes_mentioning, serve_cmd
from servedoctor.launch import LaunchOptions, launch
from servedoctor.remote.url import SSH_CONFIG_VAR, SshTarget

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(240)]

SERVEDOCTOR = str(Path(sys.executable).parent / "servedoctor")
SHORT = {"startup": 60.0, "load": 60.0, "serving": 30.0}


def _cli(runs: Path, *options: str, secret: bool = True) -> list[str]:
    return launch_argv(runs, "--on", "ssh://testhost", *options, secret=secret)


def _env(ssh_host: SshTarget, offline_env: dict[str, str]) -> dict[str, str]:
    assert ssh_host.config_file is not None
    return {**os.environ, **offline_env, SSH_CONFIG_VAR: ssh_host.config_file}


def _wait_loading(
    runs: Path, proc: subprocess.Popen[str] | None = None, timeout: float = 180.0
) -> Path:
    """The run's log once the server is loading (a loaded 2-core machine is slow)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = list(runs.glob("*/server.log"))
        if logs and "Loading" in logs[0].read_text(errors="replace"):
            return logs[0]
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"launch ended before loading: {proc.stderr and proc.stderr.read()}"
            )
        time.sleep(0.1)
    raise AssertionError("the server never started loading")


def _server_processes(model: Path) -> list[psutil.Process]:
    """The remote server itself (not the ssh client or the agent that mention it too)."""
    return [
        p
        for p in processes_mentioning(str(model))
        if "serve" in p.cmdline()[1:3] and p.name() != "ssh"
    ]


def test_healthy_over_ssh(
    ssh_host: SshTarget,
    models: dict[str, Path],
    offline_env: dict[str, str],
    tmp_path: Path,
    no_leftovers: None,
) -> None:
    runs = tmp_path / "runs"
    cmd = [
        *_cli(
            runs,
            "--exit-after-smoke",
            "--json",
            "--max-tokens",
            "4",
            *(f"--env={k}={v}" for k, v in offline_env.items()),
        ),
        *serve_cmd(models["healthy"], free_port()),
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=200, env=_env(ssh_host, offline_env)
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["outcome"] == "healthy"
    assert out["smoke"]["ok"] and out["liveness"]["ok"]
    assert out["leftover_processes"] == 0
    run = json.loads((Path(out["run_dir"]) / "run.json").read_text())
    assert run["on"] == "ssh://testhost"
    assert SECRET_TOKEN not in json.dumps(run)
    assert SECRET_TOKEN not in proc.stderr + proc.stdout
    log = Path(out["log"]).read_text()
    assert "Uvicorn running on" in log  # streamed back from the remote side
    assert processes_mentioning(str(models["healthy"])) == []


@pytest.mark.parametrize(("variant", "code"), [("exit", 3), ("segv", -signal.SIGSEGV)])
def test_crash_over_ssh(
    variant: str,
    code: int,
    ssh_host: SshTarget,
    models: dict[str, Path],
    offline_env: dict[str, str],
    tmp_path: Path,
    no_leftovers: None,
) -> None:
    options = LaunchOptions(
        runs_dir=tmp_path / "runs",
        env=offline_env,
        max_tokens=4,
        request_timeout=20.0,
        stall_timeouts=SHORT,
        grace_s=3.0,
        quiet=True,
        on=ssh_host,
    )
    result = launch(serve_cmd(models[variant], free_port(), "--trust-remote-code"), options)
    assert result.outcome == "failed"
    assert result.failure is not None and result.failure.kind == "process_exit"
    assert result.exit_code == code  # the remote server's status, through the agent
    assert result.diagnosis is not None
    # streamed back: the line the server prints for the request before the model runs (its
    # access line comes when the response starts, which a SIGSEGV in decode can beat)
    assert "[Request received]" in result.log_path.read_text()
    assert result.leftover_processes == 0
    assert processes_mentioning(str(models[variant])) == []


def _launch_slow_load(
    ssh_host: SshTarget, models: dict[str, Path], offline_env: dict[str, str], runs: Path
) -> subprocess.Popen[str]:
    """``launch --on`` of a server that takes a while to load, as a user's terminal runs it."""
    cmd = [
        *_cli(
            runs,
            "--exit-after-smoke",
            "--json",
            *(f"--env={k}={v}" for k, v in offline_env.items()),
            secret=False,
        ),
        *serve_cmd(models["slow_load"], free_port(), "--trust-remote-code"),
    ]
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(ssh_host, offline_env),
    )


def test_ctrl_c_over_ssh(
    ssh_host: SshTarget,
    models: dict[str, Path],
    offline_env: dict[str, str],
    tmp_path: Path,
    no_leftovers: None,
) -> None:
    runs = tmp_path / "runs"
    proc = _launch_slow_load(ssh_host, models, offline_env, runs)
    try:
        log = _wait_loading(runs, proc)
        servers = _server_processes(models["slow_load"])
        assert len(servers) == 1
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-2000:]
    out = json.loads(stdout)
    assert out["outcome"] == "interrupted"
    assert out["leftover_processes"] == 0
    assert "Loading" in log.read_text()
    assert not servers[0].is_running()
    assert processes_mentioning(str(models["slow_load"])) == []


def test_dropped_connection_leaves_no_orphan(
    ssh_host: SshTarget,
    models: dict[str, Path],
    offline_env: dict[str, str],
    tmp_path: Path,
    no_leftovers: None,
) -> None:
    runs = tmp_path / "runs"
    proc = _launch_slow_load(ssh_host, models, offline_env, runs)
    try:
        _wait_loading(runs, proc)
        servers = _server_processes(models["slow_load"])
        assert len(servers) == 1
        clients = [c for c in psutil.Process(proc.pid).children() if c.name() == "ssh"]
        assert len(clients) == 1
        clients[0].kill()  # the connection drops
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr[-2000:]
    out = json.loads(stdout)
    assert out["outcome"] == "failed"
    assert out["failure"]["kind"] == "process_exit"
    assert out["leftover_processes"] == 0
    psutil.wait_procs(servers, timeout=10)
    assert not servers[0].is_running()  # the agent stopped it when its stdin closed
    run = json.loads((Path(out["run_dir"]) / "run.json").read_text())
    assert any("dropped" in w for w in run["warnings"]), run["warnings"]
    assert processes_mentioning(str(models["slow_load"])) == []
