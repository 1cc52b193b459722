"""Fetch the lines around evidence lines from a log file, for display."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from servedoctor.logs.lines import decode

MAX_CONTEXT_BYTES = 64 << 20


def read_context(path: str | Path, lines: Iterable[int], *, radius: int = 2) -> dict[int, str]:
    """Line number → text for each wanted line ± ``radius``; empty for large or odd inputs."""
    p = Path(path)
    wanted: set[int] = set()
    for n in lines:
        wanted.update(range(max(1, n - radius), n + radius + 1))
    if not wanted or not p.is_file() or p.stat().st_size > MAX_CONTEXT_BYTES:
        return {}
    last = max(wanted)
    found: dict[int, str] = {}
    with p.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if number in wanted:
                found[number] = decode(raw.rstrip(b"\n"))
            if number >= last:
                break
    return found
