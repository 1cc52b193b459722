"""The live phase timeline, from the engine's phase markers, progress bars and memory lines.

Fed one log line at a time; knows the current phase, when each began and ended, the last
state of every progress bar, and the last memory figures the log printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from servedoctor.engines import EngineSpec
from servedoctor.launch.types import PhaseSpan

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def clean(text: str) -> str:
    """Drop ANSI colour and cursor codes."""
    return _ANSI.sub("", text) if "\x1b" in text else text


@dataclass(frozen=True)
class ProgressState:
    name: str
    done: int | None
    total: int | None
    percent: float | None

    @property
    def fraction(self) -> float | None:
        if self.done is not None and self.total:
            return min(1.0, self.done / self.total)
        return None if self.percent is None else self.percent / 100.0


@dataclass(frozen=True)
class LineFacts:
    """What one line told the timeline."""

    phase_changed: bool = False
    progress: ProgressState | None = None
    memory: tuple[str, float] | None = None  # (name, GiB)
    ready: bool = False
    fatal: bool = False


_TO_GIB = {"GiB": 1.0, "GB": 1e9 / 2**30, "MiB": 1 / 1024, "MB": 1e6 / 2**30}


class Timeline:
    """Phase spans in seconds since launch; the first phase is 'startup'."""

    def __init__(self, spec: EngineSpec, *, t0: float) -> None:
        self._spec = spec
        self._t0 = t0
        self._spans: list[PhaseSpan] = [PhaseSpan("startup", "process started", 0.0)]
        self.progress: dict[str, ProgressState] = {}
        self.memory_gib: dict[str, float] = {}
        self.ready_seen = False
        self.fatal_line: tuple[int, str] | None = None

    @property
    def phase(self) -> str:
        return self._spans[-1].name

    @property
    def label(self) -> str:
        return self._spans[-1].label

    @property
    def phase_started(self) -> float:
        """Seconds since launch at which the current phase began."""
        return self._spans[-1].start

    def spans(self, *, now: float | None = None) -> tuple[PhaseSpan, ...]:
        """All spans; the last one ends at ``now`` (seconds since launch) when given."""
        if now is None:
            return tuple(self._spans)
        last = self._spans[-1]
        return (*self._spans[:-1], PhaseSpan(last.name, last.label, last.start, now))

    def enter(self, phase: str, label: str, t: float) -> bool:
        """Start a phase (``t``: monotonic time); False if it is the current one already."""
        last = self._spans[-1]
        if last.name == phase:
            return False
        at = max(t - self._t0, last.start)
        self._spans[-1] = PhaseSpan(last.name, last.label, last.start, at)
        self._spans.append(PhaseSpan(phase, label, at))
        return True

    def feed(self, number: int, text: str, t: float, *, partial: bool = False) -> LineFacts:
        line = clean(text)
        if not line.strip():
            return LineFacts()
        spec = self._spec
        changed = False
        marker = spec.phase_of(line)
        if marker is not None:
            changed = self.enter(marker.phase, marker.label, t)
        progress = None
        for bar in spec.progress:
            m = bar.regex.search(line)
            if m:
                progress = _progress(bar.name, m)
                self.progress[bar.name] = progress
                break
        memory = None
        for fig in spec.memory:
            m = fig.regex.search(line)
            if m:
                memory = (fig.name, float(m.group("value")) * _TO_GIB[fig.unit])
                self.memory_gib[fig.name] = memory[1]
        ready = fatal = False
        if not partial:
            if any(r.search(line) for r in spec.ready_re):
                ready = self.ready_seen = True
            if self.fatal_line is None and any(r.search(line) for r in spec.fatal_re):
                fatal = True
                self.fatal_line = (number, line)
        return LineFacts(changed, progress, memory, ready, fatal)


def _progress(name: str, m: re.Match[str]) -> ProgressState:
    groups = m.groupdict()

    def _int(key: str) -> int | None:
        value = groups.get(key)
        return None if value is None else int(value)

    percent = groups.get("percent")
    return ProgressState(
        name, _int("done"), _int("total"), None if percent is None else float(percent)
    )
