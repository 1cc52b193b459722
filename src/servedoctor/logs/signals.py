"""One-line signals (``signals.yaml``) and the index of engine phase markers.

Both are tried on every line, so each comes with a combined prefilter: the common line costs
one or two regex searches, not one per pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from servedoctor.datafile import load_yaml
from servedoctor.engines import EngineSpec, PhaseMarker
from servedoctor.logs.lines import Line
from servedoctor.logs.model import Event, EventKind

_SIZE = r"[\d.]+ ?[KMGT]i?B"
_OOM_TRIED = re.compile(rf"Tried to allocate (?P<v>{_SIZE})")
_OOM_CAP = re.compile(rf"total capacity of (?P<v>{_SIZE})")
_OOM_FREE = re.compile(rf"(?P<v>{_SIZE}) is free")
_OOM_REQ = re.compile(rf"Requested\s*:\s*(?P<v>{_SIZE})")


@dataclass(frozen=True, slots=True)
class Signal:
    kind: EventKind
    regex: re.Pattern[str]
    name: str | None = None


@lru_cache(maxsize=1)
def signals() -> tuple[Signal, ...]:
    raw = load_yaml(Path(__file__).parent / "signals.yaml")
    return tuple(
        Signal(kind=s["kind"], regex=re.compile(s["pattern"]), name=s.get("name")) for s in raw
    )


def scoped(pattern: str) -> str:
    """A pattern that can sit inside an alternation: a leading (?i) becomes (?i:...).

    Named groups become plain groups, since names repeat across the patterns combined.
    """
    pattern = re.sub(r"\(\?P<\w+>", "(?:", pattern)
    if pattern.startswith("(?i)"):
        return f"(?i:{pattern[4:]})"
    return f"(?:{pattern})"


@lru_cache(maxsize=1)
def any_signal() -> re.Pattern[str]:
    return re.compile("|".join(scoped(s.regex.pattern) for s in signals()))


@dataclass(frozen=True)
class MarkerIndex:
    """Engine phase markers, indexed so the common line costs a few regex searches."""

    frequent: tuple[tuple[re.Pattern[str], tuple[tuple[EngineSpec, PhaseMarker], ...]], ...]
    markers: tuple[tuple[EngineSpec, PhaseMarker], ...]
    any_marker: re.Pattern[str]
    any_config: re.Pattern[str]

    #: which of ``frequent`` short texts seen lately matched (-1: none)
    seen: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def frequent_events(self, line: Line) -> list[Event]:
        text = line.text
        which = self.seen.get(text)
        if which is None:
            which = next(
                (i for i, (regex, _) in enumerate(self.frequent) if regex.search(text)), -1
            )
            if len(text) <= SEEN_TEXT_CHARS:
                if len(self.seen) >= SEEN_KEPT:
                    self.seen.clear()
                self.seen[text] = which
        if which < 0:
            return []
        return [phase_event(line, spec, marker) for spec, marker in self.frequent[which][1]]


SEEN_KEPT = 4096
SEEN_TEXT_CHARS = 400


_INDEXES: dict[tuple[int, ...], MarkerIndex] = {}


def marker_index(engines: tuple[EngineSpec, ...]) -> MarkerIndex:
    key = tuple(id(spec) for spec in engines)
    if key not in _INDEXES:
        _INDEXES[key] = _build_marker_index(engines)
    return _INDEXES[key]


def _build_marker_index(engines: tuple[EngineSpec, ...]) -> MarkerIndex:
    frequent: dict[str, list[tuple[EngineSpec, PhaseMarker]]] = {}
    markers: list[tuple[EngineSpec, PhaseMarker]] = []
    for spec in engines:
        for marker in spec.phases:
            if marker.frequent:
                frequent.setdefault(marker.pattern, []).append((spec, marker))
            else:
                markers.append((spec, marker))
    never = "(?!x)x"
    return MarkerIndex(
        frequent=tuple((re.compile(p), tuple(o)) for p, o in frequent.items()),
        markers=tuple(markers),
        any_marker=re.compile("|".join(scoped(m.pattern) for _, m in markers) or never),
        any_config=re.compile(
            "|".join(scoped(r.pattern) for spec in engines for r in spec.config_re) or never
        ),
    )


def phase_event(line: Line, spec: EngineSpec, marker: PhaseMarker) -> Event:
    return Event(
        kind="phase",
        line=line.number,
        text=line.text,
        rank=line.rank,
        fields={
            "phase": marker.phase,
            "label": marker.label,
            "engine": spec.name,
            "frequent": marker.frequent,
        },
    )


def oom_fields(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, regex in (("tried", _OOM_TRIED), ("capacity", _OOM_CAP), ("free", _OOM_FREE)):
        m = regex.search(text)
        if m:
            out[key] = m.group("v")
    m = _OOM_REQ.search(text)
    if m and "tried" not in out:
        out["tried"] = m.group("v")
    return out


# --- traceback assembly ------------------------------------------------------------------
