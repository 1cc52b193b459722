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

from servedoctor.logs.lines import Line, clean

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


def _blocks(stream: BinaryIO, size: int) -> Iterator[bytes]:
    """Blocks ending at a newline (the last one may not)."""
    carry = b""
    while True:
        chunk = stream.read(size)
        if not chunk:
            break
        data = carry + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            if len(carry) > 4 * size:  # a single huge line: emit it in pieces
                yield carry
                carry = b""
            continue
        yield data[: cut + 1]
        carry = data[cut + 1 :]
    if carry:
        yield carry


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
        for lo, hi in _merge(windows):
            # snap to whole lines
            lo = 0 if lo == 0 else block.rfind(b"\n", 0, lo) + 1
            nl = block.find(b"\n", hi - 1) if hi < len(block) else -1
            hi = len(block) if nl < 0 else nl + 1
            number = first_number + block.count(b"\n", 0, lo)
            yield from _lines_of(block, number, lo, hi)

    def __iter__(self) -> Iterator[Line]:
        lim = self.limits
        ring: deque[tuple[int, bytes]] = deque()
        ring_bytes = 0
        next_number = 1
        last_block = b""
        for block in _blocks(self.stream, lim.block_bytes):
            number = next_number
            newlines = block.count(b"\n")
            next_number += newlines
            self.stats.bytes_read += len(block)
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
