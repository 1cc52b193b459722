"""The part of a server log a report shows: the lines around the evidence, and the tail.

A log can be gigabytes long, so it is never loaded whole: the tail is read by seeking back
from the end, and the lines around evidence are found by one pass that counts newlines in
fixed-size chunks (memory stays at one chunk, whatever the log's size).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from servedoctor.logs.lines import decode
from servedoctor.redact import redact_text

__all__ = ["ExcerptLine", "excerpt", "read_lines", "scan", "tail_lines"]

_CHUNK = 4 << 20
_KEEP = 1 << 16  # of a line that spans chunks, only its end is kept
_MAX_CHARS = 400  # one excerpt line, cut (a 64 KiB progress line says nothing more)


@dataclass(frozen=True, slots=True)
class ExcerptLine:
    number: int  # 1-based line of the log; 0 for a gap marker
    text: str
    role: str = "context"  # error | frame | clue | context | gap


def _clean(raw: bytes) -> str:
    text = decode(raw.rstrip(b"\r\n").split(b"\r")[-1])  # a progress bar: its last state
    if len(text) > _MAX_CHARS:
        text = text[:_MAX_CHARS] + " …"
    return redact_text(text)


def scan(path: Path, wanted: Iterable[int]) -> tuple[dict[int, str], int]:
    """Line number → text for the wanted lines, and the number of lines in the log, in one
    chunked pass (only chunks that hold a wanted line are split into lines)."""
    want = sorted({n for n in wanted if n > 0})
    wanted_set = set(want)
    found: dict[int, str] = {}
    line = 1  # the number of the line the next byte belongs to
    partial = b""
    last = b"\n"
    try:
        f = path.open("rb")
    except OSError:
        return {}, 0
    buf = bytearray(_CHUNK)  # reused: a chunk with no wanted line is counted, never copied
    with f:
        while n := f.readinto(buf):
            last = bytes(buf[n - 1 : n])
            newlines = buf.count(b"\n", 0, n)
            i = bisect_left(want, line)
            if i == len(want) or want[i] > line + newlines:
                line += newlines
                if newlines:
                    partial = bytes(buf[max(buf.rfind(b"\n", 0, n) + 1, n - _KEEP) : n])
                else:
                    partial = (partial + bytes(buf[:n]))[-_KEEP:]
                continue
            pieces = (partial + bytes(buf[:n])).split(b"\n")
            partial = pieces.pop()[-_KEEP:]
            for piece in pieces:
                if line in wanted_set:
                    found[line] = _clean(piece)
                line += 1
    total = line - 1 if last == b"\n" else line
    if partial and last != b"\n" and line in wanted_set:
        found[line] = _clean(partial)
    return found, total


def read_lines(path: Path, wanted: Iterable[int]) -> dict[int, str]:
    """Line number → text for the wanted lines."""
    return scan(path, wanted)[0]


def tail_lines(path: Path, count: int, *, total: int) -> list[str]:
    """The last ``count`` lines of a log of ``total`` lines, read backwards from the end."""
    try:
        size = path.stat().st_size
    except OSError:
        return []
    if size == 0 or count <= 0:
        return []
    with path.open("rb") as f:
        block = b""
        pos = size
        while pos > 0 and block.count(b"\n") <= count:
            step = min(max(_CHUNK // 16, 1), pos)
            pos -= step
            f.seek(pos)
            block = f.read(step) + block
    pieces = block.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    if pos > 0:
        pieces = pieces[1:]  # the first piece may be a line cut in the middle
    return [_clean(p) for p in pieces[-min(count, total) :]]


def excerpt(
    path: Path,
    roles: Mapping[int, str],
    *,
    radius: int = 3,
    tail: int = 40,
) -> list[ExcerptLine]:
    """Lines around each evidence line (``roles``: line → role) and the log's tail, in
    order; a gap marker stands where lines are left out."""
    around = {
        n
        for line, role in roles.items()
        if role in ("error", "frame")
        for n in range(max(1, line - radius), line + radius + 1)
    }
    texts, total = scan(path, around | set(roles))
    tail_texts = tail_lines(path, tail, total=total)
    first_tail = total - len(tail_texts) + 1
    for i, text in enumerate(tail_texts):
        texts.setdefault(first_tail + i, text)
    out: list[ExcerptLine] = []
    previous = 0
    for n in sorted(texts):
        if previous and n > previous + 1:
            out.append(ExcerptLine(0, f"{n - previous - 1} lines", "gap"))
        elif not previous and n > 1:
            out.append(ExcerptLine(0, f"{n - 1} lines", "gap"))
        out.append(ExcerptLine(n, texts[n], roles.get(n, "context")))
        previous = n
    return out
