"""``servedoctor runs``, ``runs show``, ``runs clean`` and ``diagnose RUN_DIR|last`` on run
folders written here (fabricated run.json + server.log, as the supervisor writes them)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psutil
import pytest

from clihelp import isolate, sd
from servedoctor.launch.record import death_signal, find_run, list_runs
from servedoctor.launch.rundir import make_run_dir
from servedoctor.launch.stale import find_stale_runs

LOG = "INFO: starting server\nLoading safetensors checkpoint shards: 100% 2/2\n"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No config file or state of the machine leaks in."""
    isolate(tmp_path, monkeypatch, "cwd")


def fabricate(
    runs: Path,
    name: str,
    *,
    started: datetime,
    outcome: str = "failed",
    duration: float | None = 3.5,
    phases: tuple[str, ...] = ("startup", "load"),
    log: str = LOG,
    **extra: Any,
) -> Path:
    run = runs / name
    run.mkdir(parents=True)
    (run / "server.log").write_text(log)
    spans = [
        {"name": p, "label": p, "start": float(i), "end": float(i + 1)}
        for i, p in enumerate(phases)
    ]
    record: dict[str, Any] = {
        "schema": 1,
        "outcome": outcome,
        "engine": "sglang",
        "command": [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "/m",
            "--tp-size",
            "2",
            "--api-key",
            "***",
        ],
        "env_overrides": {"NCCL_DEBUG": "INFO"},
        "started_at": started.isoformat(timespec="seconds"),
        "run_dir": str(run),
        "log": str(run / "server.log"),
        "phases": spans,
        "duration_s": duration,
        **extra,
    }
    (run / "run.json").write_text(json.dumps(record))
    return run


NOW = datetime.now(timezone.utc)


def three_runs(runs: Path) -> dict[str, Path]:
    return {
        "old": fabricate(
            runs, "20260101-000000-sglang", started=NOW - timedelta(days=30), exit_code=-9
        ),
        "mid": fabricate(
            runs,
            "20260102-000000-sglang",
            started=NOW - timedelta(days=2),
            outcome="healthy",
            exit_code=-15,
        ),
        "new": fabricate(
            runs,
            "20260103-000000-sglang",
            started=NOW - timedelta(minutes=5),
            failure={
                "kind": "process_exit",
                "phase": "load",
                "detail": "server process ended: exit 1",
                "at_s": 1.5,
                "line": None,
            },
            diagnosis={
                "file": "x",
                "error_class": "oom",
                "phase": "load",
                "component": "model_load",
                "culprit": None,
                "summary": "CUDA out of memory while loading weights",
                "evidence": [],
                "hypotheses": [
                    {
                        "id": "h1",
                        "cause": "weights do not fit",
                        "confidence": 0.8,
                        "changes": [{"kind": "flag", "name": "--tp-size", "value": "4"}],
                        "references": [],
                    }
                ],
            },
        ),
    }


def test_runs_lists_newest_first_with_absolute_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "state" / "servedoctor" / "runs"  # the default under XDG_STATE_HOME
    made = three_runs(runs)
    code, out, _ = sd(capsys, "runs")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["id", "started", "engine", "outcome", "phase", "duration", "path"]
    assert [line.split()[0] for line in lines[1:]] == [made[k].name for k in ("new", "mid", "old")]
    assert lines[1].split()[-1] == str(made["new"]) and lines[1].split()[4] == "failed"
    assert lines[1].split()[5] == "load" and "3.5 s" in lines[1]

    code, out, _ = sd(capsys, "runs", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in rows] == [made[k].name for k in ("new", "mid", "old")]
    assert rows[1] == {
        "id": made["mid"].name,
        "started_at": (NOW - timedelta(days=2)).isoformat(timespec="seconds"),
        "engine": "sglang",
        "outcome": "healthy",
        "phase": "load",
        "duration_s": 3.5,
        "path": str(made["mid"]),
    }


def test_runs_empty_and_elsewhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = sd(capsys, "runs")
    assert code == 0 and "no runs yet in " + str(tmp_path / "state" / "servedoctor" / "runs") in out
    three_runs(tmp_path / "other")
    code, out, _ = sd(capsys, "runs", "--runs-dir", str(tmp_path / "other"), "--json")
    assert code == 0 and len(out.splitlines()) == 3


def test_runs_show_last_and_by_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    made = three_runs(tmp_path / "state" / "servedoctor" / "runs")
    code, out, _ = sd(capsys, "runs", "show", "last")
    assert code == 0, out
    assert f"run       {made['new'].name}" in out
    assert (
        "command   NCCL_DEBUG=INFO python -m sglang.launch_server --model-path /m --tp-size 2 --api-key '***'"
        in out
    )
    assert "startup" in out and "load" in out
    assert "failure   process_exit in load at 1.5 s — server process ended: exit 1" in out
    assert "diagnosis oom · load · model_load" in out
    assert "CUDA out of memory while loading weights" in out
    assert "1. (0.80) weights do not fit → try --tp-size 4" in out

    code, out, _ = sd(capsys, "runs", "show", "20260101", "--json")  # a unique prefix
    assert code == 0 and json.loads(out)["exit_code"] == -9
    code, _, err = sd(capsys, "runs", "show", "2026")
    assert code == 2 and "names 3 runs" in err
    code, _, err = sd(capsys, "runs", "show", "nope")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no run 'nope'" in err


def test_runs_clean_keeps_live_runs_and_reports_freed_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "state" / "servedoctor" / "runs"
    made = three_runs(runs)
    (made["old"] / "server.log").write_text("x" * 4096)
    old = NOW - timedelta(days=20)
    me = psutil.Process()
    live = fabricate(
        runs,
        "20260104-000000-sglang",
        started=old,
        outcome="running",
        duration=None,
        supervisor={"pid": me.pid, "create_time": me.create_time()},
    )
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    gone = fabricate(
        runs,
        "20260105-000000-sglang",
        started=old,
        outcome="running",
        duration=None,
        supervisor={"pid": int(done.stdout), "create_time": 1.0},
    )

    code, out, _ = sd(capsys, "runs", "clean", "--older-than", "7d", "--dry-run")
    assert (
        code == 0
        and out.startswith("would remove 2 runs older than 7d")
        and "kept 1 still running" in out
    )
    assert all(p.exists() for p in (*made.values(), live, gone))

    assert [s.run_dir.name for s in find_stale_runs(runs)] == [gone.name]  # as clean marks it
    size = sum(f.stat().st_size for run in (made["old"], gone) for f in run.iterdir())
    code, out, _ = sd(capsys, "runs", "clean", "--older-than", "7d")
    assert code == 0, out
    assert (
        out
        == f"removed 2 runs older than 7d from {runs}, freed {size / 1024:.1f} KiB; kept 1 still running\n"
    )
    assert not made["old"].exists() and not gone.exists()
    assert made["mid"].exists() and made["new"].exists() and live.exists()

    code, out, _ = sd(capsys, "runs", "clean", "--older-than", "1d")
    assert code == 0 and out.startswith("removed 1 run ") and not made["mid"].exists()
    code, _, err = sd(capsys, "runs", "clean", "--older-than", "a week")
    assert code == 2 and "--older-than wants an age" in err


@pytest.mark.parametrize(
    ("extra", "summary"),
    [
        (
            {"exit_code": -9},
            "killed by SIGKILL (the kernel's OOM killer is the usual cause; see dmesg)",
        ),
        (
            {"exit_code": 137},
            "killed by SIGKILL (the kernel's OOM killer is the usual cause; see dmesg)",
        ),
        ({"exit_code": 139}, "killed by SIGSEGV (segmentation fault)"),
        ({"exit_code": -6}, "killed by SIGABRT (aborted)"),
        ({"signal": "SIGKILL", "exit_code": None}, "killed by SIGKILL (the kernel's OOM killer"),
        ({"signal": 11}, "killed by SIGSEGV (segmentation fault)"),
    ],
)
def test_diagnose_run_dir_killed_by_a_signal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: dict[str, Any], summary: str
) -> None:
    failure = {
        "kind": "process_exit",
        "phase": "load",
        "detail": "server process ended",
        "at_s": 1.0,
        "line": None,
    }
    run = fabricate(
        tmp_path / "runs",
        "20260101-000000-sglang",
        started=NOW,
        failure=failure,
        phases=("startup", "load", "memory_setup"),
        **extra,
    )
    code, out, _ = sd(capsys, "diagnose", "--json", str(run))
    assert code == 1, out
    d = json.loads(out)
    assert list(d) == [
        "file",
        "error_class",
        "phase",
        "component",
        "culprit",
        "summary",
        "evidence",
        "hypotheses",
    ]
    assert d["error_class"] == "other" and d["summary"].startswith(summary)
    assert d["phase"] == "memory_setup"  # the last phase the timeline reached
    assert d["file"] == str(run / "server.log")
    assert d["evidence"][-1] == {
        "line": 2,
        "text": "Loading safetensors checkpoint shards: 100% 2/2",
    }


def test_the_same_log_alone_finds_no_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = fabricate(tmp_path / "runs", "20260101-000000-sglang", started=NOW, exit_code=-9)
    code, out, _ = sd(capsys, "diagnose", "--json", str(run / "server.log"))
    assert code == 0 and json.loads(out)["error_class"] is None


def test_a_signal_the_supervisor_sent_is_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "state" / "servedoctor" / "runs"
    fabricate(runs, "20260101-000000-sglang", started=NOW, outcome="healthy", exit_code=-15)
    code, out, _ = sd(capsys, "diagnose", "--json", "last")
    assert code == 0 and json.loads(out)["error_class"] is None
    # a stall the supervisor ended with SIGKILL is a hang, not the OOM killer
    stall = {
        "kind": "stall",
        "phase": "load",
        "detail": "no log line for 600 s",
        "at_s": 700.0,
        "line": None,
    }
    fabricate(
        runs,
        "20260102-000000-sglang",
        started=NOW + timedelta(seconds=1),
        exit_code=-9,
        failure=stall,
    )
    code, out, _ = sd(capsys, "diagnose", "--json", "last")
    d = json.loads(out)
    assert (
        code == 1 and d["error_class"] == "hang" and d["summary"] == "stall: no log line for 600 s"
    )


def test_diagnose_last_keeps_what_the_log_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = LOG + (
        "Traceback (most recent call last):\n"
        '  File "/sgl/model_runner.py", line 10, in load_model\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.00 GiB is free.\n"
    )
    runs = tmp_path / "state" / "servedoctor" / "runs"
    run = fabricate(runs, "20260101-000000-sglang", started=NOW, exit_code=1, log=log)
    code, out, _ = sd(capsys, "diagnose", "--json", "last")
    d = json.loads(out)
    assert code == 1 and d["error_class"] == "cuda_oom" and d["file"] == str(run / "server.log")
    code, out, _ = sd(capsys, "diagnose", run.name)  # a run id, rendered for people
    assert code == 1 and "cuda_oom" in out


def test_diagnose_run_folder_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = sd(capsys, "diagnose", "last")
    assert code == 2 and err.count("\n") == 1 and "no runs yet in" in err
    (tmp_path / "plain").mkdir()
    code, _, err = sd(capsys, "diagnose", str(tmp_path / "plain"))
    assert code == 2 and err.count("\n") == 1 and "not a run folder (no run.json)" in err


def test_death_signal_reading() -> None:
    assert death_signal({"exit_code": -9}) == "SIGKILL"
    assert death_signal({"exit_code": 134}) == "SIGABRT"
    assert death_signal({"exit_code": 1}) is None and death_signal({"exit_code": 0}) is None
    assert death_signal({"exit_code": None, "teardown": {"exit_code": -11}}) == "SIGSEGV"
    assert death_signal({"signal": "kill"}) == "SIGKILL" and death_signal({}) is None


def test_relative_runs_dir_gives_absolute_run_paths(tmp_path: Path) -> None:
    run = make_run_dir(Path("rel"), "vllm")
    assert run.is_absolute() and run.parent == tmp_path / "cwd" / "rel"
    (run / "run.json").write_text("{}")
    assert find_run(run.name, Path("rel")) == run and list_runs(Path("rel"))[0].path == run
