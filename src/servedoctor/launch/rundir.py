"""The run directory: ``<runs>/<time>-<engine>/server.log`` written as produced, and run.json.

Runs go under the user's state directory (``$XDG_STATE_HOME/servedoctor/runs``, else
``~/.local/state/servedoctor/runs``) unless ``--runs-dir``, ``$SERVEDOCTOR_RUNS_DIR`` or a
config file says otherwise; a run directory's path is always absolute, so run.json and the
findings store still name it after a ``cd``.

The log pump reads the server's output pipe, writes each piece to ``server.log`` (secrets
masked) and flushes it *before* handing the lines on for parsing, so the log on disk is
never behind what the supervisor has seen, even if servedoctor itself is killed.
"""

from __future__ import annotations

import json
import os
import queue
import re
import select
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from servedoctor.config import builtin_runs_dir
from servedoctor.redact import redact_text

LOG_NAME = "server.log"
RUN_JSON = "run.json"

_PIECE = re.compile(rb"[^\r\n]*(?:\r\n|\n|\r)")  # a line or a \r-terminated progress update


@dataclass(frozen=True)
class LogLine:
    """One line (or progress-bar update) of the server's output."""

    number: int  # 1-based line number in server.log (\r updates share their line's number)
    text: str  # decoded, without its terminator
    t: float  # time.monotonic() when it was read
    partial: bool = False  # an unterminated tail (a progress bar being drawn), seen early


def default_runs_dir() -> Path:
    """Where runs go when nothing says otherwise (the user's state directory)."""
    return builtin_runs_dir()


def make_run_dir(runs_dir: Path, engine: str, *, now: datetime | None = None) -> Path:
    """Create ``runs_dir/<YYYYmmdd-HHMMSS>-<engine>`` (``-2``, ``-3``... if taken); the
    path returned is absolute."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    runs_dir = Path(os.path.abspath(Path(runs_dir).expanduser()))
    runs_dir.mkdir(parents=True, exist_ok=True)
    base = runs_dir / f"{stamp}-{engine}"
    for n in range(1, 1000):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"cannot create a run directory under {runs_dir}")


def write_run_json(run_dir: Path, record: dict[str, Any]) -> Path:
    """Write run.json atomically (a reader never sees half a file)."""
    path = run_dir / RUN_JSON
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def redact_bytes(piece: bytes) -> bytes:
    """Mask secrets in one line, keeping undecodable bytes as they were."""
    text = piece.decode("utf-8", errors="surrogateescape")
    masked = redact_text(text)
    return piece if masked == text else masked.encode("utf-8", errors="surrogateescape")


class LineSplitter:
    """Bytes in, complete pieces out; a trailing partial piece waits for more bytes."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, data: bytes) -> Iterator[bytes]:
        buf = self._rest + data
        end = 0
        for m in _PIECE.finditer(buf):
            if m.end() == len(buf) and buf.endswith(b"\r"):
                break  # maybe the \r of a \r\n split across reads
            end = m.end()
            yield m.group(0)
        self._rest = buf[end:]

    @property
    def tail(self) -> bytes:
        return self._rest

    def flush(self) -> Iterator[bytes]:
        if self._rest:
            rest, self._rest = self._rest, b""
            yield rest


class LogPump(threading.Thread):
    """Pipe → server.log (flushed) → queue of :class:`LogLine` for the supervisor."""

    def __init__(self, fd: int, log: BinaryIO, lines: queue.Queue[LogLine | None]) -> None:
        super().__init__(name="servedoctor-log-pump", daemon=True)
        self._fd = fd
        self._log = log
        self._lines = lines
        self._split = LineSplitter()
        self._halt = threading.Event()
        self._number = 1
        self.bytes_read = 0
        self.last_read = time.monotonic()
        self.eof = threading.Event()

    def stop(self) -> None:
        """Stop reading (the pipe stays open, e.g. to hand it to a relay)."""
        self._halt.set()
        self.join(timeout=2.0)

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                ready, _, _ = select.select([self._fd], [], [], 0.2)
                if not ready:
                    continue
                data = os.read(self._fd, 65536)
                if not data:
                    break
                self._take(self._split.feed(data))
                self._peek()
            else:
                return
            self._take(self._split.flush())
        except OSError:
            pass
        finally:
            if not self._halt.is_set():
                self.eof.set()
                self._lines.put(None)

    def _peek(self) -> None:
        """Show the supervisor a progress bar still being drawn (not written yet)."""
        tail = self._split.tail.rstrip(b"\r")
        if tail:
            text = redact_bytes(tail).decode("utf-8", errors="replace")
            self._lines.put(LogLine(self._number, text, time.monotonic(), partial=True))

    def _take(self, pieces: Iterator[bytes]) -> None:
        batch = [redact_bytes(p) for p in pieces]
        if not batch:
            return
        self._log.write(b"".join(batch))
        self._log.flush()  # on disk before anyone parses it
        now = time.monotonic()
        self.last_read = now
        for piece in batch:
            self.bytes_read += len(piece)
            text = piece.rstrip(b"\r\n").decode("utf-8", errors="replace")
            self._lines.put(LogLine(self._number, text, now))
            if not piece.endswith(b"\r"):
                self._number += 1
