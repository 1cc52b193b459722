"""Real launches (a tiny server that dies by SIGKILL): where the run goes, and reading it back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)

DIES = """
import os, signal, sys, time
print("INFO: starting server", flush=True)
print("greeting=" + os.environ.get("GREETING", "-"), flush=True)
time.sleep(0.2)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SERVEDOCTOR_", "XDG_"))}
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        **more,
    )
    return env


def sd(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servedoctor", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=80,
    )  # fmt: skip


def test_launch_goes_to_the_state_dir_and_diagnose_last_reads_the_signal(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "dies.py").write_text(DIES)
    env = _env(tmp_path)
    r = sd(
        work,
        env,
        "launch",
        "--exit-after-smoke",
        "-q",
        "--json",
        "--grace",
        "1",
        "--",
        sys.executable,
        "dies.py",
        "--port",
        "18979",
        "--tp",
        "2",
    )
    assert r.returncode == 1, r.stderr
    result = json.loads(r.stdout)
    runs = tmp_path / "state" / "servedoctor" / "runs"
    run_dir = Path(result["run_dir"])
    assert run_dir.is_absolute() and run_dir.parent == runs
    assert result["log"] == str(run_dir / "server.log")
    assert not (work / "runs").exists()  # nothing lands in the current folder
    record = json.loads((run_dir / "run.json").read_text())
    assert record["run_dir"] == str(run_dir) and record["log"] == str(run_dir / "server.log")

    other = tmp_path / "elsewhere"
    other.mkdir()
    r = sd(other, env, "diagnose", "--json", "last")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert d["file"] == str(run_dir / "server.log")
    assert d["error_class"] == "other" and d["phase"] == record["phases"][-1]["name"]
    assert (
        d["summary"] == "killed by SIGKILL (the kernel's OOM killer is the usual cause; see dmesg)"
    )
    assert d["evidence"][-1]["text"] == "greeting=-"

    r = sd(other, env, "diagnose", "--json", str(run_dir))
    assert r.returncode == 1 and json.loads(r.stdout) == d

    r = sd(other, env, "runs")
    assert r.returncode == 0 and run_dir.name in r.stdout and str(run_dir) in r.stdout
    r = sd(other, env, "runs", "show", "last")
    assert (
        r.returncode == 0
        and "dies.py --port 18979 --tp 2" in r.stdout
        and "exit      -9" in r.stdout
    )


def test_launch_takes_defaults_from_the_project_config(tmp_path: Path) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "dies.py").write_text(DIES)
    (work / "servedoctor.toml").write_text(
        'runs_dir = "myruns"\nrequest_timeout = 33\nstartup_timeout = 44\ngrace = 1\n'
        '[env]\nGREETING = "hello from config"\n'
    )
    r = sd(
        work,
        _env(tmp_path),
        "launch",
        "--exit-after-smoke",
        "-q",
        "--json",
        "--request-timeout",
        "7",
        "--",
        sys.executable,
        "dies.py",
        "--port",
        "18978",
    )
    assert r.returncode == 1, r.stderr
    run_dir = Path(json.loads(r.stdout)["run_dir"])
    assert run_dir.parent == work / "myruns"  # relative to the config file's folder
    record = json.loads((run_dir / "run.json").read_text())
    assert record["options"]["request_timeout"] == 7.0  # the command line wins
    assert record["options"]["startup_timeout"] == 44.0  # the project file
    assert record["env_overrides"] == {"GREETING": "hello from config"}
    assert "greeting=hello from config" in (run_dir / "server.log").read_text()

    # $SERVEDOCTOR_RUNS_DIR beats the project file
    r = sd(work, _env(tmp_path, SERVEDOCTOR_RUNS_DIR=str(tmp_path / "envruns")), "runs", "--json")
    assert r.returncode == 0 and r.stdout == ""
    r = sd(work, _env(tmp_path), "runs", "--json")
    assert [json.loads(x)["path"] for x in r.stdout.splitlines()] == [str(run_dir)]


def test_a_bad_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "servedoctor.toml").write_text("grace = [1\n")
    r = sd(work, _env(tmp_path), "launch", "--exit-after-smoke", "--", sys.executable, "-c", "pass")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "servedoctor.toml: not valid TOML" in r.stderr
