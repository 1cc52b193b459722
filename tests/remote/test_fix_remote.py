"""`servedoctor fix --on ssh://…`: every trial a remote launch through a real sshd on loopback.

The real `transformers serve` (tiny Llama, CPU, offline) is started with
``--attn-implementation flash_attention_2``; flash_attn is not installed, so it fails, and
the session must reach ``--attn-implementation sdpa``, print the command that works as the
remote one, record the host in the store, and leave no server process behind (psutil).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from realserve import free_port, processes_mentioning, serve_cmd
from servedoctor.experiments.launching import TrialLaunchOptions, placement
from servedoctor.findings.store import FindingsStore
from servedoctor.remote.url import SSH_CONFIG_VAR, SshTarget

SERVEDOCTOR = str(Path(sys.executable).parent / "servedoctor")


def _fix(
    ssh_host: SshTarget, tmp_path: Path, *args: str, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    assert ssh_host.config_file is not None
    env = {**os.environ, SSH_CONFIG_VAR: ssh_host.config_file}
    return subprocess.run(
        [SERVEDOCTOR, "fix", "--on", "ssh://testhost", "--store", str(tmp_path / "f.db"),
         "--runs-dir", str(tmp_path / "runs"), "--no-report", *args],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


def test_options_keep_the_host_and_placement_names_it(tmp_path: Path) -> None:
    target = SshTarget(host="gpu-box", user="me", port=2222)
    options = TrialLaunchOptions(runs_dir=tmp_path, on=target)
    assert options.to_dict()["on"] == "ssh://me@gpu-box:2222"
    assert TrialLaunchOptions.from_dict(options.to_dict()).on == target
    assert TrialLaunchOptions.from_dict({}).on is None
    argv = ["transformers", "serve", "m", "--port", "8123"]
    where = placement(argv, {}, on=target)
    assert where["host"] == "gpu-box" and where["on"] == "ssh://me@gpu-box:2222"
    assert where["port"] == 8123 and where["gpus"] is None  # not this host's GPUs


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--parallel", "2"], "--parallel and --ray"),
        (["--ray", "127.0.0.1:6379"], "--parallel and --ray"),
        (["--python", "/usr/bin/python3"], "--python names a local interpreter"),
    ],
)
def test_what_on_cannot_combine_with_is_one_line(
    ssh_host: SshTarget, tmp_path: Path, extra: list[str], words: str
) -> None:
    done = _fix(ssh_host, tmp_path, *extra, "--", "transformers", "serve", "m")
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # nothing launched


def test_a_command_missing_on_the_remote_host_is_one_line(
    ssh_host: SshTarget, tmp_path: Path
) -> None:
    # does not exist there (nor here: the local check would have caught it without --on)
    done = _fix(ssh_host, tmp_path, "--", "/no/such/transformers", "serve", "m", "--port", "1")
    assert done.returncode == 2, done.stderr
    assert "/no/such/transformers: no such command on ssh://testhost" in done.stderr
    assert "Traceback" not in done.stderr
    run = FindingsStore.open(str(tmp_path / "f.db")).latest_unfinished()
    assert run is None  # the session is closed, not left to resume
    (_trial,) = [d for d in (tmp_path / "runs").iterdir() if d.is_dir()]  # no second trial


@pytest.mark.realserver
@pytest.mark.timeout(300)
def test_fix_on_a_remote_host_reaches_sdpa(
    ssh_host: SshTarget,
    models: dict[str, Path],
    offline_env: dict[str, str],
    tmp_path: Path,
    no_leftovers: None,
) -> None:
    model = models["healthy"]
    argv = serve_cmd(model, free_port(), "--attn-implementation", "flash_attention_2")
    # the server's environment travels as NAME=value in the command, through the channel
    env = [f"{k}={v}" for k, v in offline_env.items()]
    done = _fix(ssh_host, tmp_path, "--max-tokens", "4", "--request-timeout", "60",
                "--startup-timeout", "90", "--", *env, *argv, timeout=280)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on ssh://testhost: the command, its Python and its port are checked there" in (
        done.stderr
    )
    assert "warning: " not in done.stderr  # no local-Python warning for a remote server
    assert "fixed: --attn-implementation sdpa" in done.stdout, done.stdout
    works = re.search(r"the command that works on ssh://testhost:\n +(?P<line>[^\n]+)", done.stdout)
    assert works is not None, done.stdout
    line = shlex.split(works.group("line"))
    assert line[: len(env)] == env  # the remote server's environment, as given
    fixed = line[len(env) :]
    assert fixed[:3] == argv[:3] and "flash_attention_2" not in fixed
    assert fixed[fixed.index("--attn-implementation") + 1] == "sdpa"

    fs = FindingsStore.open(str(tmp_path / "f.db"))
    run = fs.latest_unfinished() or fs.run(1)
    assert run is not None and run.status == "fixed"
    assert run.fingerprint["host"] == "ssh://testhost"
    assert run.fingerprint["gpus"] == "unknown"
    assert run.trials and all(
        t.placement is not None
        and t.placement["host"] == "testhost"
        and t.placement["on"] == "ssh://testhost"
        for t in run.trials
    )
    assert not any(c.kind == "package" for t in run.trials for c in t.changes)
    # each trial's log was streamed back from the remote side and kept here
    logs = sorted((tmp_path / "runs").glob("*/server.log"))
    assert len(logs) == len(run.trials)
    assert any("Uvicorn running on" in p.read_text(errors="replace") for p in logs)
    assert processes_mentioning(str(model)) == []
