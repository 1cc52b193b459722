"""Raw bytes of one log line → a cleaned :class:`Line`.

Cleaning removes ANSI colour codes, keeps the last state of a ``\\r``-redrawn progress bar,
decodes invalid UTF-8 with replacement characters, and peels the prefixes servers put
before the message (timestamps, TP/DP ranks, process tags), as listed in ``prefixes.yaml``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from servedoctor.datafile import load_yaml

_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_RANK_IN_SOURCE = re.compile(r"(?:TP|DP|EP|PP|rank[= ]?)\d+")
#: The most characters of a line's text that are kept; the rest is cut, the cut marked.
MAX_LINE_CHARS = 20_000
#: The most bytes of one line that are ever decoded or held (a line is cut there).
MAX_LINE_BYTES = 64 << 10
CUT_MARK = " …[cut]"


@dataclass(frozen=True, slots=True)
class Line:
    """One cleaned line. ``text`` is the message; ``full`` keeps the prefix for display."""

    number: int
    text: str
    full: str
    rank: str | None = None
    source: str | None = None
    level: str | None = None
    forms: tuple[str, ...] = ()  # the prefixes peeled (prefixes.yaml names), outermost first


@dataclass(frozen=True, slots=True)
class _SignalNames:
    """Signals' names in other locales (``signal_names.yaml``) and their English."""

    search: re.Pattern[str]  # a name as the whole message, or before "(core dumped)" or a path
    english: dict[str, str]
    ascii_names: re.Pattern[str]  # the names written in ASCII letters: a quick first test


@lru_cache(maxsize=1)
def _signal_names() -> _SignalNames:
    raw = load_yaml(Path(__file__).parent / "signal_names.yaml")
    english = {name: str(entry["english"]) for entry in raw for name in entry["names"]}
    words = sorted((n for n in english if english[n] != n), key=len, reverse=True)
    alternation = "|".join(re.escape(w) for w in words)
    search = re.compile(rf"(?:(?<=\s)|^)({alternation})(?=\s*$|\s+\(|\s{{2,}}|\s+\S+/)")
    ascii_names = re.compile("|".join(re.escape(w) for w in words if w.isascii()))
    return _SignalNames(search, english, ascii_names)


def in_english(text: str) -> str:
    """A shell's report of a signal in another locale (``Erreur de segmentation``), in the
    English the patterns read; any other text as it is."""
    if len(text) > 300:
        return text  # a shell's line is short
    names = _signal_names()
    if text.isascii() and not names.ascii_names.search(text):
        return text
    return names.search.sub(lambda m: names.english[m.group(1)], text)


@dataclass(frozen=True, slots=True)
class _Prefix:
    name: str
    regex: re.Pattern[str]


@lru_cache(maxsize=1)
def _prefixes() -> tuple[_Prefix, ...]:
    raw = load_yaml(Path(__file__).parent / "prefixes.yaml")
    return tuple(_Prefix(name=p["name"], regex=re.compile(p["pattern"])) for p in raw)


_GROUPS = ("msg", "rank", "source", "level")


@lru_cache(maxsize=1)
def _any_prefix() -> tuple[re.Pattern[str], dict[int, tuple[str, tuple[str | None, ...]]]]:
    """All prefixes in one anchored alternation, tried in order as the list is.

    An alternation at a fixed position takes its first alternative that matches, so the
    prefix this finds is the one the loop over :func:`_prefixes` would take, with the same
    groups; one search instead of one per prefix. Each alternative is wrapped in a group
    that closes last, so ``lastindex`` says which matched; the value maps it to the prefix's
    name and the group names (renamed apart) of ``msg``, ``rank``, ``source`` and ``level``.
    """
    parts: list[str] = []
    names: list[tuple[str, str, tuple[str | None, ...]]] = []
    for i, prefix in enumerate(_prefixes()):
        pattern = prefix.regex.pattern
        own = set(prefix.regex.groupindex)
        pattern = re.sub(r"\(\?P<(\w+)>", rf"(?P<\1__{i}>", pattern)
        pattern = re.sub(r"\(\?P=(\w+)\)", rf"(?P=\1__{i})", pattern)
        parts.append(f"(?P<p__{i}>{pattern})")
        groups = tuple(f"{g}__{i}" if g in own else None for g in _GROUPS)
        names.append((f"p__{i}", prefix.name, groups))
    regex = re.compile("|".join(parts))
    return regex, {regex.groupindex[wrap]: (name, groups) for wrap, name, groups in names}


#: Cleaned forms of short raw lines that repeat (traceback frames, their code lines).
_CLEANED: dict[bytes, Line] = {}
CLEANED_KEPT = 4096
CLEANED_RAW_BYTES = 400


def _last_state(raw: bytes) -> tuple[int, int]:
    """Bounds of the last non-blank ``\\r`` segment of ``raw`` (a redrawn bar's last state).

    Walks back from the end, so the work is the blank segments passed over plus a bounded
    look at the segment found; a segment longer than the line bound counts as non-blank.
    """
    end = len(raw)
    while True:
        start = raw.rfind(b"\r", 0, end) + 1
        if end - start > MAX_LINE_BYTES or raw[start:end].strip():
            return start, end
        if start == 0:
            return 0, 0
        end = start - 1


def decode(raw: bytes) -> str:
    """Bytes → the visible text of the line: last ``\\r`` state, no ANSI, no controls.

    A line longer than ``MAX_LINE_BYTES`` is cut there before anything else reads it (and
    its text at ``MAX_LINE_CHARS``), the cut marked with ``CUT_MARK``, so the work and the
    memory spent on one line are bounded whatever its length.
    """
    start, end = (0, len(raw)) if b"\r" not in raw else _last_state(raw)
    cut = end - start > MAX_LINE_BYTES
    if cut:
        stop = start + MAX_LINE_BYTES
        # do not split a UTF-8 sequence: back off to the start of the character
        while stop > start + MAX_LINE_BYTES - 4 and raw[stop] & 0xC0 == 0x80:
            stop -= 1
        end = stop
    if start or end != len(raw):
        raw = raw[start:end]
    text = raw.decode("utf-8", errors="replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = _CONTROL.sub("", text)
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + CUT_MARK
    elif cut:
        text = text.rstrip() + CUT_MARK
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
    """The cleaned line; a short raw line seen lately is not cleaned again."""
    if len(raw) > CLEANED_RAW_BYTES:
        return _clean(number, raw)
    known = _CLEANED.get(raw)
    if known is None:
        known = _clean(number, raw)
        if len(_CLEANED) >= CLEANED_KEPT:
            _CLEANED.clear()
        _CLEANED[raw] = known
        return known
    return replace(known, number=number)


def _clean(number: int, raw: bytes) -> Line:
    full = decode(raw)
    text, rank, source, level = full, None, None, None
    if text.startswith("{") and text.endswith("}"):
        parsed = _from_json(text)
        if parsed is not None:
            text, level, rank = parsed
    any_prefix, group_names = _any_prefix()
    forms: list[str] = []
    for _ in range(3):
        m = any_prefix.match(text)
        if m is None:
            break
        form, (g_msg, g_rank, g_source, g_level) = group_names[m.lastindex or 0]
        forms.append(form)
        assert g_msg is not None
        text = m.group(g_msg)
        rank = ((m.group(g_rank) if g_rank else None) or "").strip() or rank
        source = (m.group(g_source) if g_source else None) or source
        level = (m.group(g_level) if g_level else None) or level
    text = in_english(text)
    if rank is None and source:
        m2 = _RANK_IN_SOURCE.search(source)
        rank = m2.group(0) if m2 else None
    return Line(
        number=number,
        text=text,
        full=full,
        rank=rank,
        source=source,
        level=level,
        forms=tuple(forms),
    )
