"""Raw bytes of one log line → a cleaned :class:`Line`.

Cleaning removes ANSI colour codes, keeps the last state of a ``\\r``-redrawn progress bar,
decodes invalid UTF-8 with replacement characters, and peels the prefixes servers put
before the message (timestamps, TP/DP ranks, process tags), as listed in ``prefixes.yaml``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from servedoctor.datafile import load_yaml

_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_RANK_IN_SOURCE = re.compile(r"(?:TP|DP|EP|PP|rank[= ]?)\d+")
MAX_LINE_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class Line:
    """One cleaned line. ``text`` is the message; ``full`` keeps the prefix for display."""

    number: int
    text: str
    full: str
    rank: str | None = None
    source: str | None = None
    level: str | None = None


@dataclass(frozen=True, slots=True)
class _Prefix:
    name: str
    regex: re.Pattern[str]


@lru_cache(maxsize=1)
def _prefixes() -> tuple[_Prefix, ...]:
    raw = load_yaml(Path(__file__).parent / "prefixes.yaml")
    return tuple(_Prefix(name=p["name"], regex=re.compile(p["pattern"])) for p in raw)


def decode(raw: bytes) -> str:
    """Bytes → the visible text of the line: last ``\\r`` state, no ANSI, no controls."""
    if b"\r" in raw:
        parts = [p for p in raw.split(b"\r") if p.strip()]
        raw = parts[-1] if parts else b""
    text = raw.decode("utf-8", errors="replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = _CONTROL.sub("", text)
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + " …[cut]"
    return text.rstrip()


def _from_json(text: str) -> tuple[str, str | None, str | None] | None:
    """TGI and other tracing subscribers print JSON lines: pull out message and level."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    raw_fields = obj.get("fields")
    fields: dict[str, object] = raw_fields if isinstance(raw_fields, dict) else {}
    message = fields.get("message") or obj.get("message") or obj.get("msg")
    if not isinstance(message, str):
        return None
    level = obj.get("level")
    rank = fields.get("rank")
    return message, (str(level) if level else None), (f"rank={rank}" if rank is not None else None)


def clean(number: int, raw: bytes) -> Line:
    full = decode(raw)
    text, rank, source, level = full, None, None, None
    if text.startswith("{") and text.endswith("}"):
        parsed = _from_json(text)
        if parsed is not None:
            text, level, rank = parsed
    for _ in range(3):
        for prefix in _prefixes():
            m = prefix.regex.match(text)
            if m is None:
                continue
            groups = m.groupdict()
            text = groups["msg"]
            rank = (groups.get("rank") or "").strip() or rank
            source = groups.get("source") or source
            level = groups.get("level") or level
            break
        else:
            break
    if rank is None and source:
        m2 = _RANK_IN_SOURCE.search(source)
        rank = m2.group(0) if m2 else None
    return Line(number=number, text=text, full=full, rank=rank, source=source, level=level)
