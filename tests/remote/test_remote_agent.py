"""The agent and the transport through a real sshd: start, stop, a dropped connection."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil

from servedoctor.remote.process import RemoteServerProcess
from servedoctor.remote.ssh import run_remote
from servedoctor.remote.url import SshTarget


def _sleeper(tag: str) -> list[str]:
    # a parent with a child that ignores SIGTERM: the group and SIGKILL both matter
    code = (
        "import os, signal, subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print(\\'child-ready\\', flush=True); time.sleep(600)', "
        f"'{tag}']); print('up', flush=True); time.sleep(600)"
    )
    return [sys.executable, "-c", code, tag]


def _mentioning(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and tag in (proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _wait_for(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_plain_command_runs_quoted(ssh_host: SshTarget) -> None:
    done = run_remote(ssh_host, ["printf", "%s|", "a b", "$HOME", "it's"], timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a b|$HOME|it's|"  # nothing expanded by the remote shell


def test_stop_kills_the_remote_tree(ssh_host: SshTarget, tmp_path: Path) -> None:
    tag = f"sd-tag-{os.getpid()}-stop"
    log = os.open(tmp_path / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    proc = RemoteServerProcess(
        _sleeper(tag),
        target=ssh_host,
        env={"HF_TOKEN": "hf_secretvalue1234567"},
        grace_s=1.0,
        output_fd=log,
    )
    os.close(log)
    raw = tmp_path / "raw.log"
    assert _wait_for(lambda: "child-ready" in raw.read_text(), 15), "both processes started"
    remote = psutil.Process(proc.pid)
    assert remote.environ().get("HF_TOKEN") == "hf_secretvalue1234567"  # via stdin JSON
    assert "hf_secretvalue" not in " ".join(remote.cmdline())
    assert proc.poll() is None
    teardown = proc.stop(grace_s=1.0)
    assert teardown.leftover == 0 and teardown.confirmed
    assert teardown.killed == 1  # the child that ignores SIGTERM
    assert _mentioning(tag) == []
    assert "up" in (tmp_path / "raw.log").read_text()


def test_dropped_connection_leaves_no_orphan(ssh_host: SshTarget, tmp_path: Path) -> None:
    tag = f"sd-tag-{os.getpid()}-drop"
    log = os.open(tmp_path / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    proc = RemoteServerProcess(_sleeper(tag), target=ssh_host, grace_s=1.0, output_fd=log)
    os.close(log)
    assert _wait_for(lambda: len(_mentioning(tag)) == 2, 15)
    os.kill(proc.popen.pid, signal.SIGKILL)  # the local ssh client dies
    assert _wait_for(lambda: _mentioning(tag) == [], 15), "the agent stopped the tree"
    assert proc.poll() == -signal.SIGKILL
    teardown = proc.stop(grace_s=1.0)  # reconnects and confirms
    assert teardown.confirmed and teardown.leftover == 0
    assert any("dropped" in n for n in proc.notes)


def test_command_not_found_is_exit_127(ssh_host: SshTarget, tmp_path: Path) -> None:
    log = os.open(tmp_path / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    proc = RemoteServerProcess(["/no/such/server"], target=ssh_host, output_fd=log)
    os.close(log)
    assert _wait_for(lambda: proc.poll() is not None, 15)
    assert proc.poll() == 127
    proc.stop(grace_s=0.5)
    assert "cannot start /no/such/server" in (tmp_path / "raw.log").read_text()


def test_unreachable_host_is_ssh_255(tmp_path: Path) -> None:
    target = SshTarget(host="127.0.0.1", port=1, config_file="/dev/null")
    log = os.open(tmp_path / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    proc = RemoteServerProcess(["true"], target=target, output_fd=log)
    os.close(log)
    assert proc.poll() == 255
    assert "Connection refused" in (tmp_path / "raw.log").read_text()
    teardown = proc.stop(grace_s=0.5)
    assert not teardown.confirmed  # nobody there to ask
    assert any("could not reconnect" in n for n in proc.notes)
