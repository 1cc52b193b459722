"""env --on and preflight --on: servedoctor on the remote host answers, through a real sshd."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from servedoctor.remote.delegate import REMOTE_COMMAND_VAR
from servedoctor.remote.url import SSH_CONFIG_VAR, SshTarget

SERVEDOCTOR = str(Path(sys.executable).parent / "servedoctor")


def _run(
    ssh_host: SshTarget, *args: str, remote: str = SERVEDOCTOR
) -> subprocess.CompletedProcess[str]:
    assert ssh_host.config_file is not None
    env = {**os.environ, SSH_CONFIG_VAR: ssh_host.config_file, REMOTE_COMMAND_VAR: remote}
    return subprocess.run(
        [SERVEDOCTOR, *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_env_on_a_remote_host(ssh_host: SshTarget) -> None:
    done = _run(ssh_host, "env", "--on", "ssh://testhost", "--json", "--no-torch")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert "python" in data and "gpus" in data


def test_preflight_on_a_remote_host_keeps_its_exit_status(ssh_host: SshTarget) -> None:
    cmd = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "8"]
    args = ["--no-scan", "--gpu", "sm_120", "--json"]
    local = _run(ssh_host, "preflight", *args, "--", *cmd)
    remote = _run(ssh_host, "preflight", "--on", "ssh://testhost", *args, "--", *cmd)
    assert remote.returncode == local.returncode, remote.stderr
    assert json.loads(remote.stdout)["engine"] == json.loads(local.stdout)["engine"]


def test_missing_remote_servedoctor_is_one_line(ssh_host: SshTarget) -> None:
    done = _run(ssh_host, "env", "--on", "ssh://testhost", remote="/no/such/servedoctor")
    assert done.returncode == 2
    assert "not installed on ssh://testhost" in done.stderr
    assert "Traceback" not in done.stderr


def test_unreachable_host_is_one_line(ssh_host: SshTarget) -> None:
    done = _run(ssh_host, "env", "--on", "ssh://nobody@127.0.0.1:1")
    assert done.returncode == 2
    assert "cannot reach ssh://nobody@127.0.0.1:1" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_url_is_one_line() -> None:
    done = subprocess.run(
        [SERVEDOCTOR, "env", "--on", "ssh://u:pw@host"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "password in the URL is refused" in done.stderr
    assert "pw" not in done.stderr.replace("password", "")
