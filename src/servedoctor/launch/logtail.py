"""The server's log path: the server writes a private raw file; a tailer masks and parses it.

Design (issue "a log path that never back-pressures the server"):

* The server's stdout and stderr *are* ``server.raw.log`` in the run folder, opened
  ``O_APPEND`` with mode 0600 (:func:`open_raw`). Nothing of ours sits between the server and
  its writes, so a slow or wedged supervisor can never slow or block the server.
* :class:`LogTail`, a thread of the supervisor, follows that file from its own offset. It
  cuts the bytes into lines (linear: terminators are searched in new bytes only), masks
  secrets and appends the result to ``server.log`` — the masked log every other command
  reads — and only then hands the lines on for parsing.
* Secrets: masking must see whole lines, and masking at the server's speed is not possible
  (``redact_text`` runs at a few MB/s and is quadratic in the length of a word), so it cannot
  sit in a copy thread between the server and its pipe without back-pressuring it. Instead
  the unmasked bytes exist only in the raw file, private to the user (0600), which is deleted
  once all of it has been transcribed (end of the run, or end of the server for
  ``--keep-running``, when ``relay.py`` takes over the tailing). Should the supervisor be
  killed, the reaper stops the server and the raw file stays behind, still private, so
  nothing is lost. Lines are masked only when they may hold a secret (:func:`may_hold_secret`,
  a superset of what ``redact_text`` masks), and a long line is masked window by window.
* A line is cut for parsing at :data:`BOUND` (64 KiB): the parser sees its head once, marked
  ``cut``; the whole line is kept on disk, written in segments, so memory and work stay
  linear however long it grows.
* A write error of the transcript (``ENOSPC`` first of all) is kept in :attr:`LogTail.error`
  at once; the supervisor reports it and stops the server.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from servedoctor.redact import redact_text

RAW_NAME = "server.raw.log"
BOUND = 64 * 1024  # a line is parsed up to this many bytes
_READ = 1024 * 1024  # bytes read from the raw file at a time
_PEEK = 4096  # an unterminated tail up to this long is shown early (a progress bar)
_WINDOW = 2048  # masking works on at most this many bytes at a time
_IDLE_S = 0.02  # how long the tailer sleeps at the end of the file

_TERM = re.compile(rb"\r\n|\n|\r")
#: Whatever ``redact_text`` can mask needs one of these (a superset): a secret word of a
#: field name, a token prefix, ``Bearer`` or the ``@`` of URL user info.
_MAYBE_SECRET = re.compile(
    rb"(?i)secret|passw|passphrase|credential|auth|api[\W_]*key|private[\W_]*key"
    rb"|access[\W_]*key|token(?![a-z])|hf_|sk-|gh[pousr]_|akia|bearer|@"
)


@dataclass(frozen=True)
class TailLine:
    """One line (or progress-bar update) of the server's output, masked."""

    number: int  # 1-based line number in server.log (\r updates share their line's number)
    text: str  # decoded, without its terminator; at most BOUND bytes of it
    t: float  # time.monotonic() when it was read
    partial: bool = False  # an unterminated tail (a progress bar being drawn), seen early
    cut: bool = False  # the line is longer than BOUND: this is its head, the rest on disk


def open_raw(run_dir: Path) -> int:
    """The server's stdout/stderr: the private raw log, opened for appending."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
    return os.open(run_dir / RAW_NAME, flags, 0o600)


def may_hold_secret(data: bytes) -> bool:
    return _MAYBE_SECRET.search(data) is not None


def _safe_cut(buf: bytes, start: int, end: int) -> int:
    """Where to cut ``buf[start:end]`` (≤ ``end``): after a space that does not part a field's
    name from its value (``--api-key x``, ``token: x``, ``Bearer x``); else at ``end``."""
    lo = max(start + 1, end - 1024)
    i = end
    for _ in range(64):
        i = buf.rfind(b" ", lo, i)
        if i < 0:
            break
        word = buf[max(buf.rfind(b" ", max(start, i - 256), i) + 1, start) : i]
        after = buf[i + 1 : i + 2]
        if (
            word
            and not word.startswith(b"-")
            and word[-1:] not in (b":", b"=")
            and after not in (b":", b"=", b" ")
            and word.lower() not in (b"bearer", b"basic", b"token", b"digest")
        ):
            return i + 1
    return end


def mask(data: bytes) -> bytes:
    """Mask secrets line by line; only lines that may hold one are looked at, in windows."""
    out: list[bytes] = []
    pos = 0
    while (m := _MAYBE_SECRET.search(data, pos)) is not None:
        start = data.rfind(b"\n", pos, m.start()) + 1 or pos
        end = data.find(b"\n", m.end())
        end = len(data) if end < 0 else end + 1
        out.append(data[pos:start])
        while start < end:
            cut = end if end - start <= _WINDOW else _safe_cut(data, start, start + _WINDOW)
            out.append(_redact(data[start:cut]))
            start = cut
        pos = end
    if pos == 0:
        return data
    out.append(data[pos:])
    return b"".join(out)


def _redact(piece: bytes) -> bytes:
    text = piece.decode("utf-8", errors="surrogateescape")
    masked = redact_text(text)
    return piece if masked == text else masked.encode("utf-8", errors="surrogateescape")


def _text(data: bytes) -> str:
    return data.rstrip(b"\r\n").decode("utf-8", errors="replace")


class Cutter:
    """Raw bytes in; masked bytes for server.log and :class:`TailLine` for the parser out.

    Work is linear in the bytes: terminators are searched in new bytes only, and a line
    longer than ``bound`` is written out in segments as it grows (its head parsed once).
    """

    def __init__(self, bound: int = BOUND) -> None:
        self.bound = bound
        self.number = 1
        self._pending: list[bytes] = []  # the current line's bytes not written yet
        self._size = 0
        self._cut = False  # the current line passed the bound (its head went to the parser)
        self._carry = b""  # a trailing \r, maybe the first half of \r\n

    @property
    def held(self) -> int:
        """Raw bytes read but not written out yet (an unterminated line)."""
        return self._size + len(self._carry)

    def feed(self, data: bytes, now: float) -> tuple[bytes, list[TailLine]]:
        if self._carry:
            data, self._carry = self._carry + data, b""
        if data.endswith(b"\r"):
            data, self._carry = data[:-1], b"\r"
        out: list[bytes] = []
        lines: list[TailLine] = []
        pos = 0
        for m in _TERM.finditer(data):
            self._add(data[pos : m.end()], out, lines, now)
            self._close(m.group() == b"\r", out, lines, now)
            pos = m.end()
        if pos < len(data):
            self._add(data[pos:], out, lines, now)
        if self._pending and not self._cut and self._size <= _PEEK:
            head = mask(b"".join(self._pending))
            lines.append(TailLine(self.number, _text(head), now, partial=True))
        return b"".join(out), lines

    def flush(self, now: float) -> tuple[bytes, list[TailLine]]:
        """The end of the file: an unterminated last line counts as a line."""
        out: list[bytes] = []
        lines: list[TailLine] = []
        if self._carry:
            self._add(self._carry, out, lines, now)
            self._carry = b""
            self._close(True, out, lines, now)
        elif self._pending:
            self._close(False, out, lines, now)
        return b"".join(out), lines

    def _add(self, piece: bytes, out: list[bytes], lines: list[TailLine], now: float) -> None:
        self._pending.append(piece)
        self._size += len(piece)
        if self._size <= self.bound + 4096:
            return
        buf = b"".join(self._pending)
        off = 0
        if not self._cut:
            lines.append(TailLine(self.number, _text(mask(buf[: self.bound])), now, cut=True))
            self._cut = True
        while len(buf) - off > self.bound + 4096:
            cut = _safe_cut(buf, off, off + self.bound)
            out.append(mask(buf[off:cut]))
            off = cut
        self._pending, self._size = [buf[off:]], len(buf) - off

    def _close(self, progress: bool, out: list[bytes], lines: list[TailLine], now: float) -> None:
        whole = mask(b"".join(self._pending))
        out.append(whole)
        if not self._cut:
            lines.append(TailLine(self.number, _text(whole), now))
        self._pending, self._size, self._cut = [], 0, False
        if not progress:
            self.number += 1


class LogTail(threading.Thread):
    """Raw file → server.log (masked, written first) → batches of :class:`TailLine`."""

    def __init__(
        self,
        raw_path: Path,
        log_path: Path,
        lines: queue.Queue[Sequence[TailLine]],
        *,
        offset: int = 0,
    ) -> None:
        super().__init__(name="servedoctor-log-tail", daemon=True)
        self.raw_path = raw_path
        self._raw = os.open(raw_path, os.O_RDONLY | os.O_CLOEXEC)
        os.lseek(self._raw, offset, os.SEEK_SET)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        self._log = os.open(log_path, flags, 0o644)
        self._lines = lines
        self._cut = Cutter()
        self._halt = threading.Event()
        self._lock = threading.Lock()  # one reader of the raw file at a time
        self._unwritten = b""  # masked bytes a failed write left
        self._spill: list[TailLine] = []  # lines the full queue refused while stopping
        self._finished = False
        self._at_end = False  # finish() read and wrote everything
        self._direct: Callable[[Sequence[TailLine]], None] | None = None
        self.offset = offset  # raw bytes read
        self.last_read = time.monotonic()
        self.error: OSError | None = None  # the first failed write of server.log

    @property
    def transcribed(self) -> int:
        """Raw offset up to which server.log holds everything (where a relay goes on)."""
        return self.offset - self._cut.held

    @property
    def complete(self) -> bool:
        return self._at_end and not self._unwritten

    def run(self) -> None:
        while not self._halt.is_set():
            if self.error is not None or not self._pass():
                self._halt.wait(_IDLE_S)

    def stop(self) -> None:
        """Stop following (the raw file stays, e.g. for a relay to go on)."""
        self._halt.set()
        if self.is_alive():
            self.join(timeout=5.0)

    def finish(self, take: Callable[[Sequence[TailLine]], None], *, read_rest: bool = True) -> None:
        """The server is gone: stop, read the file to its end, write the last line; every
        line not taken from the queue yet goes to ``take``, in order. Without ``read_rest``
        (the disk is full) nothing more is written: the rest stays in the raw file."""
        if self._finished:
            return
        self._finished = True
        self.stop()
        while True:
            try:
                take(self._lines.get_nowait())
            except queue.Empty:
                break
        spill, self._spill = self._spill, []
        self._direct = take
        self._put(spill)
        while read_rest and self.error is None and self._pass():
            pass
        if read_rest and self.error is None:
            with self._lock:
                data, lines = self._cut.flush(time.monotonic())
                self._write(data)
            self._put(lines)
            self._at_end = self.error is None
        self.close()
        if self.complete:
            with contextlib.suppress(OSError):
                self.raw_path.unlink()

    def close(self) -> None:
        """Close both files (after :meth:`stop`; the raw file stays where it is)."""
        for fd in (self._raw, self._log):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._raw = self._log = -1

    def _pass(self) -> bool:
        """One read of the raw file; False at its end."""
        with self._lock:
            try:
                data = os.read(self._raw, _READ)
            except OSError as exc:
                self.error = exc
                return False
            if not data:
                return False
            now = time.monotonic()
            self.offset += len(data)
            self.last_read = now
            out, lines = self._cut.feed(data, now)
            self._write(out)
        self._put(lines)
        return True

    def _write(self, data: bytes) -> None:
        data = self._unwritten + data
        self._unwritten = b""
        while data and self.error is None:
            try:
                n = os.write(self._log, data)
            except InterruptedError:
                continue
            except OSError as exc:
                self.error = exc
                break
            data = data[n:]
        self._unwritten = data

    def _put(self, lines: Sequence[TailLine]) -> None:
        if not lines:
            return
        if self._direct is not None:
            self._direct(lines)
            return
        while True:  # a bounded queue: a slow parser slows the tailer, never the server
            try:
                self._lines.put(lines, timeout=0.1)
                return
            except queue.Full:
                if self._halt.is_set():
                    self._spill.extend(lines)
                    return


def describe_write_error(exc: OSError, path: Path) -> str:
    """One line: ``disk full (ENOSPC) writing …`` or the error's name and text."""
    code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    what = "disk full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "cannot write the log"
    return f"{what} ({code}: {exc.strerror or exc}) writing {path}"
