"""The log path against long lines: linear cutting, ready detection, Ctrl-C (real processes)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from servedoctor.launch import LaunchEvent, LaunchOptions, launch
from servedoctor.launch.logtail import BOUND, Cutter, mask, may_hold_secret
from servedoctor.redact import redact_text

HERE = Path(__file__).parent
pytestmark = pytest.mark.timeout(60)

#: ``SERVER LINE_BYTES MODE PORT``: one line of LINE_BYTES bytes (written in 4 KiB pieces),
#: then the ready line; ``serve`` serves like the fake server, ``hang`` never answers.
SERVER = """
import sys, time
sys.path.insert(0, sys.argv[4])
size, mode, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
out = sys.stdout.buffer
for _ in range(size // 4096):
    out.write(b"y" * 4096)
    out.flush()
out.write(b"\\n")
out.flush()
if mode == "hang":
    print("INFO:     still starting", flush=True)
    time.sleep(120)
import fakeserver
fakeserver.serve(port)
"""


LAUNCH = [
    sys.executable,
    "-m",
    "servedoctor",
    "launch",
    "--exit-after-smoke",
    "--quiet",
    "--grace",
    "1",
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server(size: int, mode: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-c",
        SERVER,
        str(size),
        mode,
        str(port),
        str(HERE),
        "--port",
        str(port),
    ]


def _ready_after(tmp_path: Path, size: int) -> tuple[float, list[LaunchEvent]]:
    events: list[LaunchEvent] = []
    port = _port()
    opts = LaunchOptions(runs_dir=tmp_path / str(size), grace_s=1.0, request_timeout=5.0)
    result = launch(_server(size, "serve", port), opts, on_event=events.append)
    assert result.outcome == "healthy", result.failure
    ready = [e.t for e in events if e.kind == "ready"]
    assert ready and result.leftover_processes == 0
    log = result.log_path.read_bytes()
    assert b"y" * size + b"\n" in log and b"Uvicorn running on" in log  # all of it on disk
    assert not (result.run_dir / "server.raw.log").exists()  # transcribed, then removed
    return ready[0], events


def test_512k_line_is_ready_within_seconds_and_cut_for_parsing(tmp_path: Path) -> None:
    ready, events = _ready_after(tmp_path, 512 * 1024)
    assert ready < 10.0
    long = [e for e in events if e.kind == "line" and e.data.get("cut")]
    assert len(long) == 1 and len(long[0].message) == BOUND  # parsed once, its head only


def test_64k_line_does_not_slow_ready_detection(tmp_path: Path) -> None:
    short, _ = _ready_after(tmp_path, 4096)
    long, _ = _ready_after(tmp_path, 64 * 1024)
    assert long < 5 * short, (long, short)


def test_ctrl_c_after_a_512k_line(tmp_path: Path) -> None:
    port = _port()
    sup = subprocess.Popen(
        [*LAUNCH, "--runs-dir", str(tmp_path), "--", *_server(512 * 1024, "hang", port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        logs: list[Path] = []
        while time.monotonic() < deadline:
            logs = list(tmp_path.glob("*/server.log"))
            if logs and b"still starting" in logs[0].read_bytes():
                break
            time.sleep(0.05)
        assert logs and b"still starting" in logs[0].read_bytes()
        sent = time.monotonic()
        os.killpg(sup.pid, signal.SIGINT)
        assert sup.wait(15) == 130
        assert time.monotonic() - sent < 10
        record = json.loads((logs[0].parent / "run.json").read_text())
        assert record["outcome"] == "interrupted" and record["teardown"]["leftover"] == 0
        assert record["pid"] is not None and not psutil.pid_exists(record["pid"])
    finally:
        if sup.poll() is None:
            sup.kill()


def test_cutter_is_linear_and_keeps_every_byte() -> None:
    cut = Cutter()
    line = b"z" * (4 * 1024 * 1024)
    started = time.monotonic()
    out, lines = [], []
    for i in range(0, len(line), 1000):  # a 4 MiB line in 1000-byte reads
        data, got = cut.feed(line[i : i + 1000], 0.0)
        out.append(data)
        lines += got
    for data, got in (cut.feed(b"\nnext\r\n", 0.0), cut.flush(0.0)):
        out.append(data)
        lines += got
    assert time.monotonic() - started < 5
    assert b"".join(out) == line + b"\nnext\r\n"
    full = [x for x in lines if not x.partial]
    assert [(x.number, x.cut, len(x.text)) for x in full] == [(1, True, BOUND), (2, False, 4)]


def test_crlf_and_progress_bars_across_reads() -> None:
    cut = Cutter()
    pieces = [b"bar  50%\rbar 100%\r", b"\nok\r", b"\n"]
    out, lines = zip(*(cut.feed(p, 0.0) for p in pieces), strict=True)
    assert b"".join(out) == b"".join(pieces)
    full = [(x.number, x.text) for got in lines for x in got if not x.partial]
    assert full == [(1, "bar  50%"), (1, "bar 100%"), (2, "ok")]  # \r\n split: one end


SECRETS = [
    "using token hf_abcdefghijklmnopqrstuvwxyz0123",
    "--api-key sk-abcdefghijklmnop1234 --port 1",
    "OPENAI_API_KEY=abc123",
    "url postgres://me:pw@db/x",
    "{'password': 'hunter2'}",
    "Authorization: Bearer abcdefghijkl",
    "ghp_abcdefghijklmnopqrstuvwxyz1234",
    "AKIAABCDEFGHIJKLMNOP",
    "apiKey: xyz",
    "HFToken=abc",
    "credentials=abc",
]


@pytest.mark.parametrize("line", SECRETS)
def test_masking_matches_redact_text(line: str) -> None:
    assert may_hold_secret(line.encode())
    assert mask(line.encode() + b"\n") == (redact_text(line) + "\n").encode()
    assert redact_text(line) != line


def test_secret_in_a_long_line_is_masked() -> None:
    cut = Cutter()
    data = b"w " * (100 * 1024) + b"token: hf_abcdefghijklmnopqrstuvwxyz0123 " + b"v " * 70000
    out, _ = cut.feed(data + b"\n", 0.0)
    assert b"hf_abcdefghijklmnopqrstuvwxyz0123" not in out and b"token: ***" in out
