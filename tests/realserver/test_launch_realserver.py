"""`servedoctor launch` against a real `transformers serve` (tiny random Llama, CPU, offline).

Each case is a real failure of a real server: nothing here is mocked. Every test also checks,
independently of servedoctor's own count, that no process of the run is left.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from realserve import SECRET_TOKEN, free_port, launch_argv, processes_mentioning, serve_cmd
from servedoctor.diagnose import diagnose_text
from servedoctor.errors import UserError
from servedoctor.launch import LaunchOptions, RunResult, launch

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(180)]

SHORT = {"startup": 60.0, "load": 60.0, "serving": 30.0}


def _engine_present() -> bool:
    """True once the diagnosis engine finds something in an obvious failure."""
    text = "RuntimeError: CUDA error: device-side assert triggered\n"
    return diagnose_text(text).error_class is not None


needs_engine = pytest.mark.skipif(not _engine_present(), reason="diagnosis engine not merged yet")


def _options(tmp_path: Path, env: dict[str, str], **kw: object) -> LaunchOptions:
    base: dict[str, object] = {
        "runs_dir": tmp_path / "runs",
        "env": env,
        "max_tokens": 4,
        "request_timeout": 20.0,
        "stall_timeouts": SHORT,
        "grace_s": 3.0,
        "quiet": True,
    }
    base.update(kw)
    return LaunchOptions(**base)  # type: ignore[arg-type]


def _run_json(result: RunResult) -> dict[str, object]:
    data = json.loads((result.run_dir / "run.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_healthy_launch_cli_json(
    models: dict[str, Path], offline_env: dict[str, str], tmp_path: Path, no_leftovers: None
) -> None:
    port = free_port()
    cmd = [
        *launch_argv(tmp_path / "runs", "--exit-after-smoke", "--json", "--max-tokens", "6"),
        *serve_cmd(models["healthy"], port),
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=150, env={**os.environ, **offline_env}
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["outcome"] == "healthy"
    names = [p["name"] for p in out["phases"]]
    assert names[0] == "startup" and "load" in names and "serving" in names
    assert all(p["end"] is not None and p["end"] >= p["start"] for p in out["phases"])
    smoke = out["smoke"]
    assert smoke["ok"] is True and smoke["tokens"] >= 1
    assert 0 < smoke["ttft_s"] <= smoke["latency_s"]
    assert isinstance(smoke["text"], str)
    assert out["liveness"]["ok"] is True
    assert out["diagnosis"] is None and out["failure"] is None
    assert out["leftover_processes"] == 0
    run = json.loads((Path(out["run_dir"]) / "run.json").read_text())
    assert run["outcome"] == "healthy"
    assert SECRET_TOKEN not in json.dumps(run)
    assert run["env_overrides"]["HF_TOKEN"] == "***"
    log = Path(out["log"]).read_text()
    assert "Uvicorn running on" in log and "Loading" in log


def test_missing_model_path(
    offline_env: dict[str, str], tmp_path: Path, no_leftovers: None
) -> None:
    missing = tmp_path / "no-such-model"
    result = launch(serve_cmd(missing, free_port()), _options(tmp_path, offline_env))
    assert result.outcome == "failed"
    assert result.failure is not None and result.failure.kind == "process_exit"
    assert result.exit_code == 1
    assert result.smoke is None
    assert result.diagnosis is not None
    assert "Repo id must be" in result.log_path.read_text() or "OSError" in (
        result.log_path.read_text()
    )
    assert result.leftover_processes == 0
    assert _run_json(result)["outcome"] == "failed"


def test_port_already_in_use(
    models: dict[str, Path], offline_env: dict[str, str], tmp_path: Path, no_leftovers: None
) -> None:
    """A port the command names that another process holds is refused before anything
    starts, naming that process (a probe would talk to it, the server could not bind)."""
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen(8)
    port = squatter.getsockname()[1]
    try:
        with pytest.raises(UserError) as refused:
            launch(serve_cmd(models["healthy"], port), _options(tmp_path, offline_env))
    finally:
        squatter.close()
    message = str(refused.value)
    assert f"port {port} on 127.0.0.1 is already taken" in message
    assert f"by pid {os.getpid()}" in message  # the process holding it, by name
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_decode_raises_server_stays_up(
    models: dict[str, Path], offline_env: dict[str, str], tmp_path: Path, no_leftovers: None
) -> None:
    result = launch(
        serve_cmd(models["raise"], free_port(), "--trust-remote-code"),
        _options(tmp_path, offline_env),
    )
    assert result.outcome == "failed"
    assert result.failure is not None and result.failure.kind == "request_error"
    assert "tiny fault" in result.failure.detail
    assert result.smoke is not None and not result.smoke.ok
    # The server stayed up and answered the next request with HTTP 500.
    assert result.liveness is not None and result.liveness.status == 500
    assert result.exit_code is not None and result.exit_code <= 0  # ended by our SIGTERM
    log = result.log_path.read_text()
    assert "Exception in ASGI application" in log and "tiny fault" in log
    assert result.diagnosis is not None
    assert result.leftover_processes == 0


@needs_engine
def test_decode_raises_phase_from_log(
    models: dict[str, Path], offline_env: dict[str, str], tmp_path: Path, no_leftovers: None
) -> None:
    result = launch(
        serve_cmd(models["raise"], free_port(), "--trust-remote-code"),
        _options(tmp_path, offline_env),
    )
    assert result.diagnosis is not None and result.diagnosis.phase == "decode"
    assert result.leftover_processes == 0


def test_generation_hangs_while_health_answers(
    models: dict[str, Path], offline_env: dict[str, str], tmp_path: Path, no_leftovers: None
) -> None:
    result = launch(
        serve_cmd(models["hang"], free_port(), "--trust-remote-code"),
        _options(tmp_path, offline_env, request_timeout=3.0),
    )
    assert result.outcome == "failed"
    assert result.smoke is not None and result.smoke.ok  # the first request was fine
    assert result.liveness is not None and result.liveness.timed_out
    assert result.failure is not None and result.failure.kind == "request_timeout"
    run = _run_json(result)
    health = run["probes"]["health_after_failure"]  # type: ignore[index]
    assert health["status"] == 200  # /health kept answering: only generation was dead
    assert result.diagnosis is not None and result.diagnosis.error_class == "hang"
    assert result.leftover_processes == 0


@pytest.mark.parametrize(("variant", "code"), [("exit", 3), ("segv", -signal.SIGSEGV)])
def test_server_dies_mid_request(
    variant: str,
    code: int,
    models: dict[str, Path],
    offline_env: dict[str, str],
    tmp_path: Path,
    no_leftovers: None,
) -> None:
    result = launch(
        serve_cmd(models[variant], free_port(), "--trust-remote-code"),
        _options(tmp_path, offline_env),
    )
    assert result.outcome == "failed"
    assert result.failure is not None and result.failure.kind == "process_exit"
    assert result.exit_code == code
    assert result.smoke is not None and not result.smoke.ok  # the request it died under
    assert result.diagnosis is not None
    assert result.log_path.stat().st_size > 0
    assert result.leftover_processes == 0


def test_ctrl_c_during_load(
    models: dict[str, Path], offline_env: dict[str, str], tmp_path: Path, no_leftovers: None
) -> None:
    runs = tmp_path / "runs"
    cmd = [
        *launch_argv(runs, "--exit-after-smoke", "--json", secret=False),
        *serve_cmd(models["slow_load"], free_port(), "--trust-remote-code"),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **offline_env},
    )
    try:
        deadline = time.monotonic() + 90
        log: Path | None = None
        while time.monotonic() < deadline:
            logs = list(runs.glob("*/server.log"))
            if logs and "Loading" in logs[0].read_text(errors="replace"):
                log = logs[0]
                break
            time.sleep(0.1)
        assert log is not None, "the server never started loading"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    out = json.loads(stdout)
    assert out["outcome"] == "interrupted"
    assert out["phases"][-1]["name"] == "load"
    run = json.loads((log.parent / "run.json").read_text())
    assert run["outcome"] == "interrupted"
    assert "Loading" in log.read_text()  # the log is kept
    assert out["leftover_processes"] == 0
    assert processes_mentioning(str(models["slow_load"])) == []
    assert sys.executable  # keep the import used
