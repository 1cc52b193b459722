"""Entry points of the diagnosis engine: a log (path, stream or text) → :class:`Diagnosis`."""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from servedoctor.diagnose.envread import env_read_hypotheses
from servedoctor.diagnose.hypotheses import (
    ENOUGH_WITH_PRECEDENTS,
    fill_up,
    from_hits,
    localise,
    rank,
    setting_of,
    why_none,
)
from servedoctor.diagnose.locate import frames_near, locate
from servedoctor.diagnose.match import Hit, match_rules
from servedoctor.diagnose.observe import Observations, Text, named, observe
from servedoctor.diagnose.owner import (
    THROWN_ID,
    culprit_build,
    culprit_release,
    engine_release,
    native_library,
    owner_hypotheses,
)
from servedoctor.diagnose.precedent import (
    Reading,
    precedent_hypotheses,
    precedents_for,
)
from servedoctor.diagnose.selection import KERNEL_CLASSES, failing_job, move_off
from servedoctor.errors import UserError
from servedoctor.knowledge.registry import Registry, default_registry
from servedoctor.knowledge.signatures import engine_of_text, release_range
from servedoctor.logs.events import Event, extract
from servedoctor.logs.model import Frame
from servedoctor.logs.scan import Scanner, ScanStats
from servedoctor.model import Diagnosis, Evidence, Hypothesis
from servedoctor.redact import redact_text
from servedoctor.textclip import clip

#: Error class when no rule classifies a failure event, by event kind.
KIND_CLASS: dict[str, str] = {
    "kernel_assert": "device_assert",
    "oom": "cuda_oom",
    "nccl": "nccl_error",
}


def diagnose_path(
    path: str | Path,
    *,
    engine: str = "auto",
    phase_hint: str | None = None,
    command_flags: Mapping[str, str | None] | None = None,
    engine_version: str | None = None,
    arch: str | None = None,
    registry: Registry | None = None,
) -> Diagnosis:
    """Diagnose one log file (``-`` reads stdin). Bad input raises :class:`UserError`."""
    with _open_log(path) as (name, stream):
        return diagnose_stream(
            stream,
            name=name,
            engine=engine,
            phase_hint=phase_hint,
            command_flags=command_flags,
            engine_version=engine_version,
            arch=arch,
            registry=registry,
        )


@contextmanager
def _open_log(path: str | Path) -> Iterator[tuple[str, BinaryIO]]:
    """The log's display name and byte stream, after the checks that make it bad input."""
    name = str(path)
    if name == "-":
        yield "<stdin>", _checked_stdin()
        return
    p = Path(path)
    if not p.exists():
        raise UserError(f"{name}: no such file")
    try:
        with p.open("rb") as f:
            head = f.read(8192)
            if not head:
                raise UserError(f"{name}: empty file, nothing to diagnose")
            if _looks_binary(head):
                raise UserError(f"{name}: binary file, not a text log")
            if f.seekable():
                f.seek(0)
                yield name, f
            else:  # a pipe or FIFO (``<(zcat log.gz)``): what was read is put back in front
                yield name, io.BufferedReader(_Prepend(head, f))
    except PermissionError as exc:
        raise UserError(f"{name}: cannot read ({exc.strerror})") from exc
    except IsADirectoryError as exc:
        raise UserError(f"{name}: is a directory, not a log file") from exc


def _checked_stdin() -> BinaryIO:
    """Standard input after the same checks a file gets (empty, binary)."""
    stream = sys.stdin.buffer
    head = stream.read(8192)
    if not head:
        raise UserError("<stdin>: empty input, nothing to diagnose")
    if _looks_binary(head):
        raise UserError("<stdin>: binary input, not a text log")
    return io.BufferedReader(_Prepend(head, stream))


class _Prepend(io.RawIOBase):
    """A stream that first yields ``head`` (already read to check it), then the rest."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        if self._head:
            n = min(len(view), len(self._head))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(view))
        view[: len(data)] = data
        return len(data)


def diagnose_text(
    text: str,
    *,
    name: str = "<text>",
    engine: str = "auto",
    phase_hint: str | None = None,
    command_flags: Mapping[str, str | None] | None = None,
    engine_version: str | None = None,
    arch: str | None = None,
    registry: Registry | None = None,
) -> Diagnosis:
    return diagnose_stream(
        io.BytesIO(text.encode("utf-8")),
        name=name,
        engine=engine,
        phase_hint=phase_hint,
        command_flags=command_flags,
        engine_version=engine_version,
        arch=arch,
        registry=registry,
    )


def _looks_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    controls = sum(1 for b in head if b < 9 or (13 < b < 32 and b != 27))
    return controls > len(head) // 10


def diagnose_stream(
    stream: BinaryIO,
    *,
    name: str,
    engine: str = "auto",
    phase_hint: str | None = None,
    command_flags: Mapping[str, str | None] | None = None,
    engine_version: str | None = None,
    arch: str | None = None,
    registry: Registry | None = None,
) -> Diagnosis:
    scanner = Scanner(stream)
    reading = Reading()
    events = extract(reading.watch(scanner))
    obs = observe(
        events,
        engine=engine,
        command_flags=command_flags,
        engine_version=engine_version,
        last_line=scanner.stats.lines,
    )
    return diagnose_observations(
        obs,
        name=name,
        phase_hint=phase_hint,
        arch=arch,
        registry=registry or default_registry(),
        stats=scanner.stats,
        reading=reading,
    )


def _phase_default(root: Hit | None, classifiers: list[Hit]) -> str | None:
    """The phase to assume when frames, words and markers say nothing: the root rule's
    default, else the label of another rule of the same class that fired with it (a rule
    that knows the context, e.g. torch.compile around a Triton launcher build failure)."""
    if root is None:
        return None
    if root.rule.labels.phase_default:
        return root.rule.labels.phase_default
    same = [
        h
        for h in classifiers
        if h is not root and h.rule.labels.error_class == root.rule.labels.error_class
    ]
    for hit in sorted(same, key=lambda h: -h.rule.priority):
        labels = hit.rule.labels
        if labels.phase or labels.phase_default:
            return labels.phase or labels.phase_default
    return None


#: Native frames a backtrace needs before it counts as a crash on its own.
CRASH_STACK_FRAMES = 2


def _root_failure(obs: Observations) -> Event | None:
    """The first failure that is not a consequence (NCCL timeouts follow other failures);
    without any, a native backtrace (gdb's, c10's) is printed only by a process that crashed."""
    failures = obs.failures
    primary = [e for e in failures if e.kind != "nccl"]
    if primary:
        # a traceback with an exception beats the loose lines around it
        with_exc = [e for e in primary if e.kind in ("traceback", "exception", "kernel_assert")]
        return (with_exc or primary)[0]
    if failures:
        return failures[0]
    native = [
        e
        for e in obs.events
        if e.kind == "stack" and sum(f.file == "<native>" for f in e.frames) >= CRASH_STACK_FRAMES
    ]
    return native[0] if native else None


def _root_text(event: Event | None, hit: Hit | None) -> Text | None:
    if hit is not None and hit.text is not None:
        return hit.text
    if event is None:
        return None
    if event.kind == "traceback" and event.fields.get("exc_line"):
        message = str(event.fields.get("message") or "").split("\n")[0]
        return Text(
            int(event.fields["exc_line"]),
            f"{event.fields['exc_type']}: {message}",
            event,
            "exception",
        )
    return Text(event.line, event.text, event, "line")


def class_fallbacks(
    error_class: str,
    *,
    engine: str | None,
    engine_version: str | None = None,
    phase: str | None = None,
    registry: Registry | None = None,
) -> tuple[Hypothesis, ...]:
    """The generic changes for a failure the log does not explain (a server that exited or
    hung without an error line): the class's fallbacks and the engine's releases."""
    rules = (registry or default_registry()).area("diagnose")
    obs = Observations(events=[], engine=engine, engine_version=engine_version)
    hits = match_rules(rules, obs, error_class=error_class, phase=phase, contextual=True)
    fallbacks = from_hits([h for h in hits if h.rule.fallback], obs, root=None)
    releases = engine_release(
        (), error_class=error_class, engine=engine, engine_version=engine_version
    )
    return rank(fill_up([], [*fallbacks, *releases]))


_EXC_TYPE = re.compile(r"^\s*(?:[\w.]+\.)?(?P<type>[A-Z]\w*(?:Error|Exception))\b")


def _exc_type(event: Event | None, text: Text | None) -> str | None:
    """The exception type of the root failure: its traceback's, or the one its line starts with."""
    if event is not None and event.fields.get("exc_type"):
        return str(event.fields["exc_type"])
    m = _EXC_TYPE.match(text.text) if text is not None else None
    return m.group("type") if m else None


#: How many of the log's last lines are compared with the engines' own messages.
TEXT_LINES = 200


def _own_lines(obs: Observations) -> list[str]:
    """The log's last lines that are not traceback frames (what engines print themselves)."""
    return [t.text for t in obs.texts if t.role != "frame"][-TEXT_LINES:]


def _engine_of_text(obs: Observations) -> str | None:
    """The engine whose own source holds a line the log's end printed (a log naming none)."""
    return engine_of_text(_own_lines(obs))


#: A line in which the server reports a problem it copes with and goes on ("Ignore import
#: error when loading sglang.srt.models.x: …", "Could not find libnccl-net.so. Using internal
#: net plugin", "…, falling back to simple order"): the failure only when nothing else failed.
_WENT_ON = re.compile(
    r"(?i)\b(?:ignor(?:e|ed|ing)\s+(?:\w+\s+){0,2}(?:error|exception)s?\b"
    r"|using (?:the )?internal\b|fall(?:s|ing)? ?back to\b)"
)


def _root_rank(hit: Hit) -> tuple[bool, int, int]:
    """The root failure's hit: one on a line where the server did not say it went on, the
    rule of highest priority, the earliest line."""
    went_on = hit.text is not None and _WENT_ON.search(hit.text.text) is not None
    return (not went_on, hit.rule.priority, -hit.line)


def _engine_of_own_messages(hits: list[Hit]) -> str | None:
    """The one engine whose own messages (mined from its source) the log printed."""
    named = {e for h in hits if h.rule.when.engine_or_unknown for e in h.rule.when.engine}
    return named.pop() if len(named) == 1 else None


def diagnose_observations(
    obs: Observations,
    *,
    name: str,
    phase_hint: str | None,
    arch: str | None,
    registry: Registry,
    stats: ScanStats | None = None,
    reading: Reading | None = None,
) -> Diagnosis:
    rules = registry.area("diagnose")
    found = precedents_for(reading)
    hits = match_rules(rules, obs, arch=arch, phase=None)
    if obs.engine is None and (engine := _engine_of_own_messages(hits) or _engine_of_text(obs)):
        # the log names no engine, but it printed this engine's own text
        obs = named(obs, engine)
        hits = match_rules(rules, obs, arch=arch, phase=None)
    if obs.engine is not None and obs.engine_version is None:
        # no version line: the engine's own messages bound the release that printed them
        bounds = release_range(_own_lines(obs), obs.engine)
        if bounds is not None:
            obs = replace(obs, release_floor=bounds[0], release_bound=bounds[1])
    classifiers = [h for h in hits if h.rule.labels.error_class]
    root_hit = max(classifiers, key=_root_rank) if classifiers else None
    root_event = root_hit.text.event if root_hit and root_hit.text else _root_failure(obs)

    error_class: str | None
    guessed = False  # the class is the precedents' vote, not a rule's or an event's
    if root_hit is not None:
        error_class = root_hit.rule.labels.error_class
    elif root_event is not None:
        error_class = KIND_CLASS.get(root_event.kind, "other")
    elif reading is not None and reading.error_line is not None:
        # no rule and no traceback, but a line reports a failure in words
        line, text = reading.error_line
        root_event = Event(kind="notable", line=line, text=text)
        error_class = (found.guess("error_class", reading.words) if found else None) or "other"
        guessed = True
    else:
        error_class = None

    extras: dict[str, object] = {
        "lines": stats.lines if stats else None,
        "lines_read": stats.lines_cleaned if stats else None,
        "truncated": stats.truncated_last_line if stats else False,
        "events": len(obs.events),
        "flags_in_effect": dict(sorted(obs.flags.items())),
    }
    if error_class is None:
        return Diagnosis(
            file=name,
            error_class=None,
            phase=None,
            component=None,
            culprit=None,
            summary="No failure found in the log.",
            engine=obs.engine,
            extras=extras,
        )

    root_text = _root_text(root_event, root_hit)
    labels = root_hit.rule.labels if root_hit else None
    loc = locate(
        obs,
        error_class=error_class,
        root=root_event,
        root_text=root_text.text if root_text else "",
        rule_phase=labels.phase if labels else None,
        rule_component=labels.component if labels else None,
        rule_culprit=labels.culprit if labels else None,
        phase_hint=phase_hint,
        phase_default=_phase_default(root_hit, classifiers),
    )
    if found and reading and loc.phase and loc.phase_source == "class":
        # only the class's default said when: the precedents' vote knows more
        voted = found.outvotes("phase", reading.words, loc.phase)
        if voted is not None:
            loc = replace(loc, phase=voted, phase_source="precedents")
    context_hits = match_rules(
        rules,
        obs,
        arch=arch,
        error_class=error_class,
        phase=loc.phase,
        component=loc.component,
        culprit=loc.culprit,
        contextual=True,
        root_line=root_text.line if root_text else None,
    )
    fallback_hits = [h for h in context_hits if h.rule.fallback]
    context_hits = [h for h in context_hits if not h.rule.fallback]
    component, culprit = loc.component, loc.culprit
    for hit in context_hits:
        if component in (None, "unknown") and hit.rule.labels.component:
            component = hit.rule.labels.component
        if culprit is None and hit.rule.labels.culprit:
            culprit = hit.rule.labels.culprit

    supporting = [h for h in hits if h is not root_hit and not h.rule.labels.error_class]
    hypotheses = from_hits([*supporting, *context_hits], obs, root=root_hit)
    first = localise(loc.sync_frame, error_class, obs)
    if first is not None:
        hypotheses.insert(0, first)
    frames = frames_near(obs, root_event)
    exc_type = _exc_type(root_event, root_text)
    message = root_text.text if root_text else ""
    raised_by = owner_hypotheses(
        frames,
        exc_type=exc_type,
        message=message,
        engine=obs.engine,
        engine_version=obs.engine_version,
    )
    if raised_by and component in (None, "unknown"):
        component = "environment"  # another package's release does not fit the server
    crash_from = root_text.line if root_text else (root_event.line if root_event else 0)
    native = native_library(
        obs.events, [t.text for t in obs.texts if t.line >= crash_from], engine=obs.engine
    )
    if native is not None and all(
        c.name != native.changes[0].name for h in raised_by for c in h.changes
    ):
        raised_by.append(native)
        if native.id == THROWN_ID:
            if component in (None, "unknown", "model"):
                # the frames that reached the library (a model registry importing it) are not
                # where the fault is: the library's build does not fit the install
                component = "environment"
            if error_class == "other" and loc.phase in ("startup", "load"):
                error_class = "abi_mismatch"  # a library that throws while it is imported
    job = failing_job(obs, message, culprit) if error_class in KERNEL_CLASSES else None
    if job is not None:
        if component in (None, "unknown", "environment"):
            component = job.component
        moved = move_off(job, obs)
        if moved is not None:
            hypotheses.append(moved)
    read = env_read_hypotheses(frames, exc_type=exc_type, message=message)
    if read:
        component = "environment"  # the value came from the environment, not the server
    hypotheses += read + raised_by
    build = culprit_build(error_class, culprit, obs.engine)
    if build is not None and all(
        c.name != build.changes[0].name for h in hypotheses for c in h.changes
    ):
        hypotheses.append(build)
    fallbacks = from_hits(fallback_hits, obs, root=None)
    releases = engine_release(
        frames,
        error_class=error_class,
        engine=obs.engine,
        engine_version=obs.engine_version,
        distribution=obs.distribution,
        recognised=root_hit is not None and not root_hit.rule.fallback,
    )
    library = culprit_release(error_class, culprit, obs.engine)
    if library is not None:
        releases.insert(0, library)
    hypotheses = fill_up(hypotheses, [*fallbacks, *releases])
    later: list[Hypothesis] = []
    if found is not None and reading is not None:
        if root_hit is None or root_hit.rule.changes:  # a rule can say the fix is no setting
            # slots the rules left free: what fixed the most similar public failures; the
            # next ones follow the ranked three, for `fix` to try after them
            similar = precedent_hypotheses(found, reading.words, setting_of(obs))
            hypotheses = fill_up(hypotheses, similar)
            if obs.engine_version is None:
                # a flag refused by another release (or another server) costs a restart;
                # past the ranked three, a release the log does not state gets none
                similar = [h for h in similar if all(c.kind != "flag" for c in h.changes)]
            later = fill_up(hypotheses, similar, enough=ENOUGH_WITH_PRECEDENTS)[len(hypotheses) :]
        if component in (None, "unknown"):
            component = found.guess("component", reading.words) or component
    fallback_ids = {h.rule.id for h in fallback_hits}

    evidence = _evidence(obs, root_text, root_event, loc.sync_frame, [*supporting, *context_hits])
    summary = _summary(error_class, loc.phase, component, culprit, root_text, loc.sync_frame)
    if not any(h.changes for h in hypotheses):
        reason = (
            f"the fix is outside the server: {root_hit.rule.fix}"
            if root_hit is not None and not root_hit.rule.changes
            else None
        )
        summary += f" No change to try: {(reason or why_none(obs, error_class)).rstrip('.')}."
    extras["phase_source"] = loc.phase_source
    if guessed:
        extras["class_source"] = "precedents"
    extras["engine_version"] = obs.engine_version
    if obs.release_bound:
        extras["release_bound"] = obs.release_bound
    if obs.release_floor:
        extras["release_floor"] = obs.release_floor
    return Diagnosis(
        file=name,
        error_class=error_class,
        phase=loc.phase,
        component=component or "unknown",
        culprit=culprit,
        summary=redact_text(summary),
        evidence=tuple(Evidence(e.line, redact_text(e.text), e.role) for e in evidence),
        hypotheses=rank(hypotheses) + tuple(later),
        rules=tuple(
            dict.fromkeys(
                [
                    *(h.rule.id for h in ([root_hit] if root_hit else [])),
                    *(h.rule.id for h in classifiers),
                    *(h.rule.id for h in supporting),
                    *(h.rule.id for h in context_hits),
                    *(h.rule for h in hypotheses if h.rule in fallback_ids),
                ]
            )
        ),
        engine=obs.engine,
        sync_point=loc.sync_frame is not None,
        extras=extras,
    )


def _evidence(
    obs: Observations,
    root_text: Text | None,
    root_event: Event | None,
    sync_frame: Frame | None,
    clues: list[Hit],
) -> list[Evidence]:
    found: dict[int, Evidence] = {}

    def add(line: int, text: str, role: str) -> None:
        if line > 0 and line not in found:
            found[line] = Evidence(line=line, text=text.strip()[:400], role=role)  # type: ignore[arg-type]

    if root_text is not None:
        add(root_text.line, root_text.text, "error")
    if root_event is not None:
        if root_event.kind == "kernel_assert":
            add(root_event.line, f"{root_event.text}  (×{root_event.count})", "error")
        for frame in root_event.frames[-2:]:
            add(frame.at, f"{frame.render()}  {frame.code}".rstrip(), "frame")
        marker = obs.last_phase_before(root_event.line)
        if marker is not None:
            add(marker.line, marker.text, "context")
    for event in obs.events:
        if event.kind == "kernel_assert" and event is not root_event:
            add(event.line, f"{event.text}  (×{event.count})", "context")
    for hit in clues:
        if hit.text is not None:
            add(hit.text.line, hit.text.text, "clue")
    return sorted(found.values(), key=lambda e: e.line)[:12]


def _summary(
    error_class: str,
    phase: str | None,
    component: str | None,
    culprit: str | None,
    root_text: Text | None,
    sync_frame: Frame | None,
) -> str:
    where = f" in {component}" if component and component != "unknown" else ""
    who = f" ({culprit})" if culprit else ""
    what = f": {clip(root_text.text, 160)}" if root_text else ""
    text = f"{error_class} during {phase or 'an unknown phase'}{where}{who}{what}"
    if sync_frame is not None:
        where = f"{Path(sync_frame.file).name}:{sync_frame.func}"
        code = f" (`{sync_frame.code}`)" if sync_frame.code else ""
        text += f" — raised at a synchronisation point, {where}{code}, "
        text += "not by the kernel that failed"
    return text + ("" if text.endswith(".") else ".")
