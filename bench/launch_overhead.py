"""How fast `servedoctor launch` reacts, and what supervising costs, on a real server.

(a) Time from the server's death (or its fatal log line) to the diagnosis printed by
    `servedoctor launch --json` (goal ≤ 1 s). The exit instant comes from a pidfd on the
    server's pid, the fatal line's instant from the server itself; baseline in the same run:
    diagnosing the same log alone (`diagnose_path`).
(b) The supervisor's CPU while the server idles (goal < 1 % of one core): before readiness (a
    server that never gets ready) and while a generation request hangs on the real
    `transformers serve`; baselines in the same windows: the server's own CPU and a `sleep`.

Run: .venv/bin/python bench/launch_overhead.py   (needs the realserver extra; ~1.5 min)
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "tests" / "realserver"))

import tinymodels  # noqa: E402

from servedoctor.diagnose import diagnose_path  # noqa: E402

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_cli(args: list[str], runs: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    cmd = [
        str(BIN / "servedoctor"),
        "launch",
        "--exit-after-smoke",
        "--json",
        "--quiet",
        "--runs-dir",
        str(runs),
        "--grace",
        "3",
        *args,
    ]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env}
    )


def server_pid(runs: Path, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in runs.glob("*/run.json"):
            pid = json.loads(path.read_text()).get("pid")
            if pid:
                return int(pid)
        time.sleep(0.01)
    raise RuntimeError("no server pid in run.json")


def wait_exit(pid: int) -> float:
    """time.time() at which ``pid`` (not our child) exits, through a pidfd."""
    fd = os.pidfd_open(pid)
    try:
        select.select([fd], [], [])
        return time.time()
    finally:
        os.close(fd)


def printed_at(cli: subprocess.Popen[str]) -> tuple[float, dict[str, object]]:
    assert cli.stdout is not None
    line = cli.stdout.readline()
    t = time.time()
    cli.wait(timeout=60)
    return t, json.loads(line)


def diagnosis_latency_exit(models: Path, env: dict[str, str], runs: Path) -> tuple[float, Path]:
    port = free_port()
    cli = start_cli(
        [
            "--",
            str(BIN / "transformers"),
            "serve",
            str(models / "segv"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--trust-remote-code",
        ],
        runs,
        env,
    )
    t_exit = wait_exit(server_pid(runs))
    t_print, out = printed_at(cli)
    assert out["outcome"] == "failed" and out["diagnosis"] is not None, out
    return t_print - t_exit, Path(str(out["log"]))


def diagnosis_latency_fatal(runs: Path) -> float:
    code = (
        "import time; print('Scheduler hit an exception', time.time(), flush=True); time.sleep(600)"
    )
    cli = start_cli(["--", sys.executable, "-c", code, "sglang.launch_server"], runs, {})
    server_pid(runs)
    t_print, out = printed_at(cli)
    log = Path(str(out["log"])).read_text()
    t_fatal = float(log.split("Scheduler hit an exception", 1)[1].split()[0])
    assert out["failure"]["kind"] == "fatal_line", out  # type: ignore[index]
    return t_print - t_fatal


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def idle_cpu(runs: Path, window: float) -> tuple[float, float]:
    """Supervisor and `sleep` CPU % while a server that never gets ready idles."""
    sleeper = subprocess.Popen(["sleep", "600"])
    cli = start_cli(
        [
            "--stall-timeout",
            "all=600",
            "--",
            "python3",
            "-c",
            "import time; print('Started server process', flush=True); time.sleep(600)",
        ],
        runs,
        {},
    )
    server_pid(runs)
    time.sleep(1.0)
    sup, slp = psutil.Process(cli.pid), psutil.Process(sleeper.pid)
    a, b = cpu_s(sup), cpu_s(slp)
    time.sleep(window)
    sup_pct = 100 * (cpu_s(sup) - a) / window
    slp_pct = 100 * (cpu_s(slp) - b) / window
    cli.send_signal(2)
    cli.wait(timeout=30)
    sleeper.kill()
    sleeper.wait()
    return sup_pct, slp_pct


def hang_cpu(models: Path, env: dict[str, str], runs: Path, window: float) -> tuple[float, float]:
    """Supervisor and server CPU % while a generation request hangs on transformers serve."""
    port = free_port()
    cli = start_cli(
        [
            "--request-timeout",
            str(window + 30),
            "--",
            str(BIN / "transformers"),
            "serve",
            str(models / "hang"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--trust-remote-code",
        ],
        runs,
        env,
    )
    pid = server_pid(runs)
    log = next(runs.glob("*/server.log"))
    deadline = time.monotonic() + 90
    while log.read_text(errors="replace").count("[Request received]") < 2:
        if time.monotonic() > deadline:
            raise RuntimeError("the liveness request never reached the server")
        time.sleep(0.05)
    time.sleep(1.0)
    sup, srv = psutil.Process(cli.pid), psutil.Process(pid)
    a, b = cpu_s(sup), cpu_s(srv)
    time.sleep(window)
    sup_pct = 100 * (cpu_s(sup) - a) / window
    srv_pct = 100 * (cpu_s(srv) - b) / window
    cli.send_signal(2)
    cli.wait(timeout=60)
    return sup_pct, srv_pct


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="sd-bench-") as tmp:
        root = Path(tmp)
        env = {**OFFLINE, "HF_HOME": str(root / "hf")}
        os.environ.update(env)
        models = root / "models"
        tinymodels.build_set(models)

        exits = []
        log = None
        for i in range(3):
            latency, log = diagnosis_latency_exit(models, env, root / f"exit{i}")
            exits.append(latency)
        fatals = [diagnosis_latency_fatal(root / f"fatal{i}") for i in range(3)]
        assert log is not None
        t = time.perf_counter()
        diagnose_path(log, engine="transformers")
        alone = time.perf_counter() - t
        print("(a) death → printed diagnosis (servedoctor launch --json), goal ≤ 1 s")
        print(
            f"    server SIGSEGV → diagnosis: {', '.join(f'{x:.3f}' for x in exits)} s "
            f"(median {sorted(exits)[1]:.3f} s)"
        )
        print(
            f"    fatal line (alive) → diagnosis: {', '.join(f'{x:.3f}' for x in fatals)} s "
            f"(median {sorted(fatals)[1]:.3f} s; includes the 0.5 s quiet wait for the "
            "traceback and SIGTERM)"
        )
        print(f"    baseline, diagnose_path on the same log alone: {alone:.3f} s")

        window = 10.0
        sup, slp = idle_cpu(root / "idle", window)
        print(f"(b) supervisor CPU while the server idles ({window:g} s windows), goal < 1 %")
        print(
            f"    before readiness (port polled every 0.5 s): supervisor {sup:.2f} % "
            f"· baseline `sleep` {slp:.2f} %"
        )
        sup2, srv2 = hang_cpu(models, env, root / "hang", window)
        print(
            f"    transformers serve, request hung: supervisor {sup2:.2f} % "
            f"· baseline the server itself {srv2:.2f} %"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
