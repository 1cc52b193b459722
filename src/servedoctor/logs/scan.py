"""Stream a log and choose which lines get full attention, in bounded memory.

Logs of a long-running server are mostly per-batch lines; the story that matters is the
start-up header and the end. The scanner therefore

* cleans every line of the first ``head_bytes`` (config dump, start-up phases, warnings);
* keeps the last ``tail_bytes`` in a ring and cleans all of it at end of stream;
* screens the middle with a few byte-literal searches (C speed) and cleans only windows
  around a hit, plus the last lines of each block so the latest phase marker is known.

Memory is bounded by the ring and one block, whatever the file size; stdin works the same.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from servedoctor.logs.lines import MAX_LINE_BYTES, Line, clean

#: Literals that any line worth reading in the middle of a log contains one of. Traceback
#: frames need none: the exception line that ends them has one, and the window reaches back.
SCREEN: tuple[bytes, ...] = (
    b"rror",  # Error, error, CUDAError...
    b"RROR",
    b"xception",
    b"ailed",  # also kernel assertions: "Assertion `...` failed"
    b"imeout",
    b"atal",
)


@dataclass(frozen=True, slots=True)
class ScanLimits:
    block_bytes: int = 1 << 20
    head_bytes: int = 1 << 20
    tail_bytes: int = 2 << 20
    before_hit: int = 16 << 10
    after_hit: int = 32 << 10
    block_tail: int = 2 << 10


@dataclass(slots=True)
class ScanStats:
    bytes_read: int = 0
    lines: int = 0
    lines_cleaned: int = 0
    truncated_last_line: bool = False


def _blocks(stream: BinaryIO, size: int, line_bound: int) -> Iterator[tuple[bytes, int]]:
    """Blocks ending at a newline (the last one may not), each with the count of bytes of
    the stream left out of it.

    A line longer than ``line_bound`` keeps its first ``line_bound + 1`` bytes (one more
    than the cleaner keeps, so it marks the cut) and, when it is a ``\\r``-redrawn line,
    as many of its last bytes; the rest is skipped as it streams by. No line is held,
    copied or rescanned whole, however long.
    """
    keep = line_bound + 1
    carry = b""
    head: bytes | None = None  # the kept start of an overlong line being skipped
    tail = b""
    seen_cr = False
    skipped = 0
    while True:
        chunk = stream.read(size)
        if not chunk:
            break
        if head is not None:
            nl = chunk.find(b"\n")
            part = chunk if nl < 0 else chunk[:nl]
            seen_cr = seen_cr or b"\r" in part
            skipped += len(part)
            tail = (tail + part)[-keep:] if seen_cr else b""
            if nl < 0:
                continue
            carry = head + (b"\r" + tail if seen_cr else b"")
            skipped -= len(carry) - len(head)
            head, tail, seen_cr = None, b"", False
            chunk = chunk[nl:]
        data = carry + chunk
        cut = data.rfind(b"\n")
        if cut >= 0:
            yield data[: cut + 1], skipped
            skipped = 0
            carry = data[cut + 1 :]
        else:
            carry = data
        if len(carry) > keep:
            # the start of an overlong line: keep its head, skip the rest
            head, rest = carry[:keep], carry[keep:]
            seen_cr = b"\r" in rest
            tail = rest[-keep:] if seen_cr else b""
            skipped += len(rest)
            carry = b""
    if head is not None:
        carry = head + (b"\r" + tail if seen_cr else b"")
        skipped -= len(carry) - len(head)
    if carry:
        yield carry, skipped


def _lines_of(
    block: bytes, first_number: int, start: int = 0, end: int | None = None
) -> Iterator[Line]:
    """Clean the lines of ``block[start:end]``; ``first_number`` numbers ``block[start]``."""
    piece = block[start:end]
    if piece.endswith(b"\n"):
        piece = piece[:-1]
    for offset, raw in enumerate(piece.split(b"\n")):
        yield clean(first_number + offset, raw)


def _merge(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(windows):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


class Scanner:
    """Iterate over the lines of a stream that deserve to be read closely."""

    def __init__(self, stream: BinaryIO, limits: ScanLimits | None = None) -> None:
        self.stream = stream
        self.limits = limits or ScanLimits()
        self.stats = ScanStats()

    def _screen(self, block: bytes, first_number: int) -> Iterator[Line]:
        lim = self.limits
        windows: list[tuple[int, int]] = []
        for literal in SCREEN:
            pos = block.find(literal)
            while pos >= 0:
                windows.append((max(0, pos - lim.before_hit), min(len(block), pos + lim.after_hit)))
                pos = block.find(literal, pos + lim.after_hit)
        windows.append((max(0, len(block) - lim.block_tail), len(block)))
        done = 0  # windows grow to whole lines: never clean a line twice
        number, counted = first_number, 0
        for lo, hi in _merge(windows):
            # snap to whole lines
            lo = 0 if lo == 0 else block.rfind(b"\n", 0, lo) + 1
            nl = block.find(b"\n", hi - 1) if hi < len(block) else -1
            hi = len(block) if nl < 0 else nl + 1
            lo = max(lo, done)
            if lo >= hi:
                continue
            number += block.count(b"\n", counted, lo)
            counted = done = hi
            yield from _lines_of(block, number, lo, hi)
            number += block.count(b"\n", lo, hi)

    def __iter__(self) -> Iterator[Line]:
        lim = self.limits
        ring: deque[tuple[int, bytes]] = deque()
        ring_bytes = 0
        next_number = 1
        last_block = b""
        for block, skipped in _blocks(self.stream, lim.block_bytes, MAX_LINE_BYTES):
            number = next_number
            newlines = block.count(b"\n")
            next_number += newlines
            self.stats.bytes_read += len(block) + skipped
            last_block = block
            if self.stats.bytes_read <= lim.head_bytes:
                yield from self._count(_lines_of(block, number))
                continue
            ring.append((number, block))
            ring_bytes += len(block)
            while ring_bytes - len(ring[0][1]) >= lim.tail_bytes:
                old_number, old = ring.popleft()
                ring_bytes -= len(old)
                yield from self._count(self._screen(old, old_number))
        for number, block in ring:
            yield from self._count(_lines_of(block, number))
        self.stats.lines = (
            next_number - 1 + (0 if last_block.endswith(b"\n") or not last_block else 1)
        )
        self.stats.truncated_last_line = bool(last_block) and not last_block.endswith(b"\n")

    def _count(self, lines: Iterator[Line]) -> Iterator[Line]:
        for line in lines:
            self.stats.lines_cleaned += 1
            yield line
