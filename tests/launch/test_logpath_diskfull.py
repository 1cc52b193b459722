"""A full disk is reported at once as such (not as a stall), and the server is stopped."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from servedoctor.launch import LaunchOptions, launch
from servedoctor.launch.logtail import LogTail, TailLine, describe_write_error

pytestmark = pytest.mark.timeout(60)

#: Writes 1 KiB lines as fast as it can, forever (until a write fails or it is stopped).
FLOOD = """
import sys
line = b"x" * 1023 + b"\\n"
while True:
    sys.stdout.buffer.write(line * 64)
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (root and a working ``mount`` only; skipped otherwise)."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_disk_full_is_reported_within_seconds(small_disk: Path) -> None:
    started = time.monotonic()
    cmd = [sys.executable, "-c", FLOOD, "--port", "1"]  # never ready: port 1 is not served
    result = launch(cmd, LaunchOptions(runs_dir=small_disk, grace_s=1.0))
    assert time.monotonic() - started < 15
    assert result.failure is not None and result.failure.kind == "log_write"
    assert result.failure.detail.startswith("disk full (ENOSPC"), result.failure.detail
    assert result.leftover_processes == 0
    record = json.loads((result.run_dir / "run.json").read_text())
    assert record["outcome"] == "failed" and record["failure"]["kind"] == "log_write"


def test_write_error_is_kept_with_its_cause(tmp_path: Path) -> None:
    raw = tmp_path / "server.raw.log"
    raw.write_bytes(b"hello\n" * 1000)
    lines: queue.Queue[Sequence[TailLine]] = queue.Queue()
    tail = LogTail(raw, Path("/dev/full"), lines)  # every write: ENOSPC
    tail.start()
    deadline = time.monotonic() + 5
    while tail.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    got: list[TailLine] = []
    tail.finish(got.extend)
    assert tail.error is not None and not tail.complete
    assert describe_write_error(tail.error, Path("server.log")).startswith("disk full (ENOSPC")
    assert raw.exists()  # not transcribed: the raw file stays
