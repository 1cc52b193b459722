"""Cleaned lines → :class:`Event` values.

One pass, line by line, with a little state per rank (interleaved ranks each build their own
traceback). Recognised: Python tracebacks (chained, truncated, rich-boxed), thread dumps
(faulthandler, py-spy), C++ backtraces, CUDA kernel assertion floods folded into one event,
the one-line signals of ``signals.yaml`` (CUDA errors, OOM with its numbers, NCCL, overrides,
version warnings, JIT builds), phase markers of the engine specs, and the config dump.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import lru_cache
from typing import Any, Generic, TypeVar

from servedoctor.engines import EngineSpec, all_engines
from servedoctor.logs.lines import Line
from servedoctor.logs.model import Event, EventKind, Frame
from servedoctor.logs.signals import any_signal, marker_index, oom_fields, phase_event, signals
from servedoctor.logs.traceback import (
    BOX_FRAME,
    CHAIN,
    EXC,
    EXC_STANDALONE,
    FRAME,
    FRAME_HEAD,
    FRAME_TAIL,
    KERNEL_ASSERT,
    MAX_FRAMES,
    MAX_MESSAGE_LINES,
    NATIVE_FRAME,
    PYSPY_FRAME,
    TB_HEAD,
    THREAD_HEAD,
    OpenTraceback,
)

__all__ = ["Event", "EventExtractor", "EventKind", "Frame", "extract"]

_NOTABLE = re.compile(
    r"(?i)error|fail|fatal|warn|assert|exception|unsupported|not supported|not compatible|"
    r"insufficient|undefined symbol|cannot|could not|unable to|no module|not found|time(?:d )?out|"
    r"killed|abort|panic|invalid|mismatch|refused|denied|in use|\bnan\b|not implemented|"
    r"access violation|illegal instruction"
)
#: Distinct line texts whose screening verdicts are remembered (then forgotten at once).
VERDICTS_KEPT = 4096
VERDICT_TEXT_CHARS = 400
_LOUD_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL", "E", "F", "WARN", "WARNING", "W"})

#: What the structural patterns say of one line's text: traceback head, thread-dump head,
#: chain line, native frame (its function), Python or boxed frame (file, line, function).
_T = TypeVar("_T")
_Shape = tuple[bool, bool, bool, str | None, tuple[str, int, str] | None]


def _shape_of(text: str) -> _Shape:
    native = NATIVE_FRAME.match(text)
    frame = FRAME.match(text) or (BOX_FRAME.search(text) if "│" in text else None)
    return (
        TB_HEAD.search(text) is not None,
        THREAD_HEAD.match(text.strip()) is not None,
        CHAIN.search(text) is not None,
        native.group("func").strip()[:240] if native else None,
        (frame.group("file"), int(frame.group("line")), frame.group("func") or "<module>")
        if frame
        else None,
    )


def _standalone_of(text: str) -> tuple[str, str] | None:
    m = EXC_STANDALONE.match(text.strip())
    return (m.group("type"), m.group("msg")) if m else None


def _exc_of(stripped: str) -> tuple[str, str | None] | None:
    m = EXC.match(stripped)
    return (m.group("type"), m.group("msg")) if m else None


def _notable_of(text: str) -> bool:
    return _NOTABLE.search(text) is not None


class _Remembered(Generic[_T]):
    """``of``, its answers for short texts remembered: the frames and code lines of one
    traceback printed again and again are looked at once."""

    def __init__(self, of: Callable[[str], _T]) -> None:
        self.of = of
        self.cached = lru_cache(maxsize=VERDICTS_KEPT)(of)

    def __call__(self, text: str) -> _T:
        return self.cached(text) if len(text) <= VERDICT_TEXT_CHARS else self.of(text)


_shape = _Remembered(_shape_of)
_standalone = _Remembered(_standalone_of)
_exc = _Remembered(_exc_of)
_notable = _Remembered(_notable_of)


#: What gdb prints under a native frame: its arguments wrapped onto indented lines, or with
#: ``bt`` and sources, the frame's source line (``598\t  return …``). The stack goes on.
GDB_CONTINUATION = re.compile(r"^(?:[ \t]{2,}\S|\t\S|\d+\t)")


class EventExtractor:
    """Feed cleaned lines in order; collect events. Memory stays bounded per traceback."""

    def __init__(self, engines: Iterable[EngineSpec] | None = None) -> None:
        self.engines = list(engines) if engines is not None else list(all_engines().values())
        self._index = marker_index(tuple(self.engines))
        self._open: dict[str | None, OpenTraceback] = {}
        self._chain_pending: set[str | None] = set()
        self._asserts: dict[tuple[str, str], Event] = {}
        self._signal_counts: dict[tuple[str, str], int] = {}
        self._orphan_code: dict[str | None, tuple[int, str]] = {}
        self._frame_heads: dict[str | None, str] = {}  # a frame's file, its line to come
        self._verdicts: dict[str, tuple[bool, bool, bool, bool]] = {}
        #: lines whose text went through the combined signal and marker searches
        self.screened = 0

    # Each handler returns True when it consumed the line.
    def feed(self, line: Line) -> Iterator[Event]:
        key = line.rank or line.source
        head = self._frame_heads.pop(key, None)
        if head is not None and (tail := FRAME_TAIL.match(line.text)):
            # the rest of a frame wrapped after its file: read the two lines as one
            joined = f'  File "{head}", line {tail.group("line")}, in {tail.group("func")}'
            line = replace(line, text=joined)
        elif (wrapped := FRAME_HEAD.match(line.text)) is not None:
            self._frame_heads[key] = wrapped.group("file")
            return
        text = line.text
        tb = self._open.get(key)
        if tb is None:
            frequent = self._index.frequent_events(line)
            if frequent:
                # per-batch status lines (Decode batch..., stats) say nothing else: fast path
                yield from frequent
                return
        if tb is not None and line.number - tb.last > 60:
            yield from self._close(key)
            tb = None

        tb_head, thread_head, chain, native_func, frame = _shape(text)
        if tb_head:
            yield from self._close(key)
            self._open[key] = OpenTraceback(
                start=line.number,
                rank=line.rank,
                header=True,
                chained=key in self._chain_pending,
                boxed="╭" in text or "─" in text,
                last=line.number,
            )
            self._chain_pending.discard(key)
            # "Scheduler hit an exception: Traceback..." is a fatal marker as well
            yield from self._one_liners(line)
            return
        if thread_head:
            yield from self._close(key)
            self._open[key] = OpenTraceback(
                start=line.number,
                rank=line.rank,
                header=True,
                chained=False,
                stack=True,
                last=line.number,
                header_text=text.strip(),
            )
            return
        if chain:
            yield from self._close(key)
            self._chain_pending.add(key)
            return

        if native_func is not None:
            if tb is None or not tb.native:
                yield from self._close(key)
                tb = OpenTraceback(
                    start=line.number,
                    rank=line.rank,
                    header=False,
                    chained=False,
                    stack=True,
                    native=True,
                    last=line.number,
                )
                self._open[key] = tb
            if len(tb.frames) < MAX_FRAMES:
                tb.frames.append(
                    Frame(
                        file="<native>",
                        line=None,
                        func=native_func,
                        at=line.number,
                    )
                )
            tb.last = line.number
            yield from self._one_liners(line, inside_traceback=True)
            return
        if tb is not None and tb.native:
            if line.number - tb.last <= 1 and GDB_CONTINUATION.match(text):
                tb.last = line.number  # the rest of a frame's arguments, or its source line
                return
            yield from self._close(key)
            tb = None

        if frame is None and tb is not None and tb.stack:
            pyspy = PYSPY_FRAME.match(text)
            if pyspy is not None:
                frame = (pyspy.group("file"), int(pyspy.group("line")), pyspy.group("func"))
        if frame is not None:
            if tb is None or tb.exc_type is not None:
                yield from self._close(key)
                tb = OpenTraceback(
                    start=line.number,
                    rank=line.rank,
                    header=False,
                    chained=key in self._chain_pending,
                    last=line.number,
                    stack=" in " in text and ", in " not in text and "File" in text,
                )
                self._chain_pending.discard(key)
                self._open[key] = tb
                orphan = self._orphan_code.pop(key, None)
                if orphan is not None and line.number - orphan[0] <= 3:
                    # a truncated excerpt often starts with the code of a frame it cut off
                    tb.frames.append(
                        Frame(file="?", line=None, func="?", code=orphan[1], at=orphan[0])
                    )
                    tb.start = orphan[0]
            if len(tb.frames) < MAX_FRAMES:
                tb.frames.append(Frame(file=frame[0], line=frame[1], func=frame[2], at=line.number))
            tb.last = line.number
            return

        if tb is not None:
            consumed = self._continue(tb, line)
            if consumed:
                yield from self._one_liners(line, inside_traceback=True)
                return
            yield from self._close(key)

        if text[:1].isspace() and text.strip():
            self._orphan_code[key] = (line.number, text.strip()[:300])
        em = _standalone(text)
        if em:
            # an exception line without its traceback (an excerpt): keep its message lines
            self._open[key] = OpenTraceback(
                start=line.number,
                rank=line.rank,
                header=False,
                chained=False,
                exc_type=em[0],
                message=[em[1]],
                exc_line=line.number,
                last=line.number,
            )
            yield from self._one_liners(line, inside_traceback=True)
            return
        yield from self._one_liners(line)

    def _continue(self, tb: OpenTraceback, line: Line) -> bool:
        """Code lines, the exception line and its message continue an open traceback."""
        text = line.text
        stripped = text.strip()
        if tb.exc_type is None:
            if tb.boxed and (stripped.startswith(("│", "╰", "╭")) or not stripped):
                tb.last = line.number
                return True
            if text[:1].isspace() and stripped and tb.frames:
                if not tb.frames[-1].code and not set(stripped) <= set("^~ "):
                    last = tb.frames[-1]
                    tb.frames[-1] = Frame(last.file, last.line, last.func, stripped[:300], last.at)
                tb.last = line.number
                return True
            if stripped in ("...", "") and line.number - tb.last <= 1:
                # TGI relays a shard's stderr with a blank line after every line: a blank
                # line inside the frames does not end the traceback
                tb.last = line.number
                return True
            m = _exc(stripped)
            if m and not stripped.startswith("Traceback"):
                tb.exc_type = m[0]
                tb.message = [m[1] or ""]
                tb.exc_line = line.number
                tb.last = line.number
                return True
            return False
        # message continuation: until a blank line or a structural line
        if not stripped or len(tb.message) >= MAX_MESSAGE_LINES:
            return False
        if FRAME.match(text) or TB_HEAD.search(text) or KERNEL_ASSERT.search(text):
            return False
        if line.number - tb.last > 1:
            return False
        tb.message.append(stripped[:500])
        tb.last = line.number
        return True

    def _close(self, key: str | None) -> Iterator[Event]:
        tb = self._open.pop(key, None)
        if tb is not None and (tb.frames or tb.exc_type or tb.header_text):
            yield tb.event()

    def _screen(self, text: str) -> tuple[bool, bool, bool, bool]:
        """Whether ``text`` may be a kernel assertion, a phase marker, a config line or a
        signal: the costly combined searches, remembered for lines that repeat (the frames
        and code lines of the same traceback printed again and again)."""
        verdict = self._verdicts.get(text)
        if verdict is not None:
            return verdict
        self.screened += 1
        if KERNEL_ASSERT.search(text) is not None:
            return True, False, False, False  # the rest is not looked at
        verdict = (
            False,
            self._index.any_marker.search(text) is not None,
            self._index.any_config.search(text) is not None,
            any_signal().search(text) is not None,
        )
        if len(text) <= VERDICT_TEXT_CHARS:
            if len(self._verdicts) >= VERDICTS_KEPT:
                self._verdicts.clear()
            self._verdicts[text] = verdict
        return verdict

    def _one_liners(self, line: Line, *, inside_traceback: bool = False) -> Iterator[Event]:
        text = line.text
        maybe_assert, maybe_marker, maybe_config, maybe_signal = self._screen(text)
        m = KERNEL_ASSERT.search(text) if maybe_assert else None
        if m:
            fold = (m.group("kernel").strip(), m.group("cond"))
            known = self._asserts.get(fold)
            if known is None:
                self._asserts[fold] = Event(
                    kind="kernel_assert",
                    line=line.number,
                    text=text,
                    rank=line.rank,
                    fields={
                        "kernel": fold[0],
                        "condition": fold[1],
                        "source": f"{m.group('file')}:{m.group('line')}",
                    },
                )
            else:
                self._asserts[fold] = Event(
                    kind="kernel_assert",
                    line=known.line,
                    end_line=line.number,
                    text=known.text,
                    rank=known.rank,
                    fields=known.fields,
                    count=known.count + 1,
                )
            return
        if maybe_marker:
            for spec, marker in self._index.markers:
                if marker.regex.search(text):
                    yield phase_event(line, spec, marker)
        if maybe_config:
            for spec in self.engines:
                if any(r.search(text) for r in spec.config_re):
                    yield Event(
                        kind="config",
                        line=line.number,
                        text=text[:200],
                        rank=line.rank,
                        fields={"engine": spec.name, "line": text},
                    )
                    break
        matched_signal = False
        for signal in signals() if maybe_signal else ():
            sm = signal.regex.search(text)
            if sm is None:
                continue
            if signal.kind == "warning" and matched_signal:
                continue
            fields: dict[str, Any] = {k: v for k, v in sm.groupdict().items() if v}
            if signal.kind == "oom":
                fields.update(oom_fields(text))
            if signal.name:
                fields["name"] = signal.name
            dedup = (signal.kind, text if signal.kind != "nccl" else text[:80])
            seen = self._signal_counts.get(dedup, 0)
            self._signal_counts[dedup] = seen + 1
            if seen:
                continue
            matched_signal = True
            yield Event(
                kind=signal.kind, line=line.number, text=text, rank=line.rank, fields=fields
            )
        if inside_traceback:
            return
        em = _standalone(text)
        if em:
            yield Event(
                kind="exception",
                line=line.number,
                text=text.strip(),
                rank=line.rank,
                fields={"exc_type": em[0], "message": em[1]},
            )
        elif not matched_signal and ((line.level or "").upper() in _LOUD_LEVELS or _notable(text)):
            yield Event(
                kind="notable",
                line=line.number,
                text=text,
                rank=line.rank,
                fields={"level": line.level},
            )

    def finish(self) -> Iterator[Event]:
        for key in list(self._open):
            yield from self._close(key)
        yield from self._asserts.values()


MAX_EVENTS = 20_000
TAIL_LINES = 16
#: Kinds whose repeats fold: the first occurrence counts them, the latest stays as well.
FOLD_KINDS = frozenset({"traceback", "stack", "exception", "notable", "warning"})
_DIGITS = re.compile(r"\d+")


def _signature(event: Event) -> tuple[Any, ...] | None:
    """What makes a repeat of ``event`` the same: its stack and its words, numbers aside."""
    if event.kind not in FOLD_KINDS:
        return None
    fields = event.fields
    return (
        event.kind,
        event.rank,
        _DIGITS.sub("#", event.text),
        _DIGITS.sub("#", str(fields.get("message") or "")),
        fields.get("exc_type"),
        fields.get("header"),
        fields.get("chained"),
        fields.get("truncated"),
        fields.get("level"),
        tuple((f.file, f.line, f.func, f.code) for f in event.frames),
    )


class _Fold:
    """The first and the latest occurrence of one signature, and how many there were."""

    __slots__ = ("count", "first", "latest")

    def __init__(self, event: Event) -> None:
        self.first = event
        self.latest = event
        self.count = event.count


class _Events:
    """The event list of :func:`extract`, in bounded memory and amortised constant time.

    Repeats of a traceback, exception or loud line (same stack, same words up to numbers)
    fold into their first occurrence, which counts them; the latest one is kept as well
    (rules that look at the end of the log see it) and those in between are dropped. Past
    ``MAX_EVENTS`` the list is thinned (:func:`_thin`) to at most ``3/4`` of that, so each
    thinning is paid for by the events appended since the last one.
    """

    def __init__(self) -> None:
        self.items: list[Event] = []
        self._folds: dict[tuple[Any, ...], _Fold] = {}
        self._dropped: set[int] = set()  # ids of events in ``items`` to leave out
        #: spans of dropped repeats, the latest ones: they still cover the last lines
        self.dropped_spans: deque[tuple[int, int]] = deque(maxlen=4 * TAIL_LINES)

    def add(self, event: Event) -> None:
        items = self.items
        if (
            event.kind == "phase"
            and event.fields.get("frequent")
            and items
            and items[-1].kind == "phase"
            and items[-1].fields.get("label") == event.fields.get("label")
            and items[-1].fields.get("engine") == event.fields.get("engine")
        ):
            items[-1] = event
            return
        signature = _signature(event)
        if signature is not None:
            fold = self._folds.get(signature)
            if fold is None:
                self._folds[signature] = _Fold(event)
            else:
                fold.count += event.count
                if fold.latest is not fold.first:
                    self._dropped.add(id(fold.latest))
                    self.dropped_spans.append((fold.latest.line, fold.latest.last_line))
                fold.latest = event
        items.append(event)
        if len(items) > MAX_EVENTS:
            self._compact()
            if len(items) > MAX_EVENTS * 3 // 4:
                self.items = _thin(self.items)
                kept = {id(e) for e in self.items}
                self._folds = {k: f for k, f in self._folds.items() if id(f.first) in kept}
                for fold in self._folds.values():
                    if id(fold.latest) not in kept:
                        fold.latest = fold.first

    def _compact(self) -> None:
        if self._dropped:
            self.items = [e for e in self.items if id(e) not in self._dropped]
            self._dropped.clear()

    def done(self) -> list[Event]:
        """The events, each fold's first occurrence carrying the count of its repeats."""
        self._compact()
        counted = {id(f.first): f for f in self._folds.values() if f.count != f.first.count}
        if counted:
            self.items = [
                replace(e, count=counted[id(e)].count) if id(e) in counted else e
                for e in self.items
            ]
        return self.items


#: distinct process names kept from line prefixes
MAX_SOURCES = 32


def extract(lines: Iterable[Line], engines: Iterable[EngineSpec] | None = None) -> list[Event]:
    """The events of ``lines`` in line order (kernel-assert folds carry their first line).

    Runs of the same per-batch phase marker keep only their last event, repeats of a
    traceback or a loud line fold into their first occurrence (the latest kept too), and
    past ``MAX_EVENTS`` the oldest notable lines and warnings are dropped, so memory stays
    bounded on logs of any size and each event is handled a bounded number of times.
    """
    extractor = EventExtractor(engines)
    collected = _Events()
    tail: deque[Line] = deque(maxlen=TAIL_LINES)
    sources: dict[str, int] = {}  # process names from line prefixes → first line
    forms: dict[str, int] = {}  # line formats (prefixes.yaml names) → first line
    for line in lines:
        tail.append(line)
        if line.source and line.source not in sources and len(sources) < MAX_SOURCES:
            sources[line.source] = line.number
        for form in line.forms:
            forms.setdefault(form, line.number)
        for event in extractor.feed(line):
            collected.add(event)
    for event in extractor.finish():
        collected.add(event)
    events = collected.done()
    # the last lines, whatever they say: where a log stops is evidence too (a stall)
    numbers = {t.number for t in tail}
    first = min(numbers, default=0)
    spans = [(e.line, e.last_line) for e in events if e.last_line >= first]
    spans.extend(collected.dropped_spans)
    covered = {n for n in numbers if any(lo <= n <= hi for lo, hi in spans)}
    events.extend(
        Event(kind="tail", line=t.number, text=t.text, rank=t.rank)
        for t in tail
        if t.number not in covered and t.text.strip()
    )
    # the processes that wrote the log (which engine, which of its processes) are evidence
    # the cleaned lines no longer show
    events.extend(
        Event(kind="process", line=n, text=f"process {name}", fields={"source": name})
        for name, n in sources.items()
    )
    # so are the formats its lines are written in (vLLM's logger, llama.cpp's server)
    events.extend(
        Event(kind="format", line=n, text=f"format {name}", fields={"format": name})
        for name, n in forms.items()
    )
    events.sort(key=lambda e: e.line)
    return events


def _thin(events: list[Event]) -> list[Event]:
    """Drop the older half of the low-value events (notable lines, warnings, phases); when
    that is not enough, keep the first quarter and the latest of what is left."""
    low = {"notable", "warning", "phase", "selection"}
    half = len(events) // 2
    kept = [e for i, e in enumerate(events) if i >= half or e.kind not in low]
    quarter = MAX_EVENTS // 4
    if len(kept) > 3 * quarter:
        kept = kept[:quarter] + kept[len(kept) - 2 * quarter :]
    return kept
