"""Events → :class:`Observations`: what the diagnosis reasons over.

Holds the texts rules are matched against (each with its line number and event), the
effective flags (config dump, then the server's own overrides, then the command), the
phase markers, and the engine the log came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from servedoctor.engines import all_engines, build_of, engine_for_command
from servedoctor.engines.adapter import engines_knowing, version_from_fields
from servedoctor.engines.effective import parse_effective_config
from servedoctor.logs.model import Event

GENERIC_ENGINE = "openai"

FAILURE_KINDS = frozenset(
    {"traceback", "exception", "kernel_assert", "cuda_error", "oom", "nccl", "fatal"}
)


@dataclass(frozen=True, slots=True)
class Text:
    """One string a rule can match: a line of the log, or a traceback frame."""

    line: int
    text: str
    event: Event
    role: str = "line"  # line | exception | message | frame


def normalise_flag(name: str) -> str:
    return name.strip().lstrip("-").replace("-", "_").lower()


@dataclass
class Observations:
    events: list[Event]
    texts: list[Text] = field(default_factory=list)
    flags: dict[str, str] = field(default_factory=dict)
    flag_sources: dict[str, str] = field(default_factory=dict)
    config_fields: set[str] = field(default_factory=set)  # names the server's dump printed
    overrides: list[Event] = field(default_factory=list)
    phases: list[Event] = field(default_factory=list)
    engine: str | None = None
    #: the package the server is installed as (a fork's own name where the log shows one)
    distribution: str | None = None
    engine_version: str | None = None
    # the newest release that prints the engine messages this log printed, where the log
    # states no version (``servedoctor.knowledge.signatures``): changes are spelled for it
    release_bound: str | None = None
    #: the oldest release that prints the engine's own messages this log printed
    release_floor: str | None = None
    last_line: int = 0

    @property
    def failures(self) -> list[Event]:
        return [e for e in self.events if e.kind in FAILURE_KINDS]

    def flag(self, name: str) -> str | None:
        return self.flags.get(normalise_flag(name))

    def last_phase_before(self, line: int, *, strictly: bool = False) -> Event | None:
        """The last phase marker at or before ``line`` (``strictly``: before it)."""
        before = [p for p in self.phases if p.line < line or (p.line == line and not strictly)]
        return before[-1] if before else None


def _texts_of(event: Event) -> Iterable[Text]:
    if event.kind in ("traceback", "stack"):
        if event.fields.get("header"):
            yield Text(event.line, str(event.fields["header"]), event, "line")
        for frame in event.frames:
            yield Text(frame.at, f"{frame.render()}  {frame.code}".rstrip(), event, "frame")
        exc_line = event.fields.get("exc_line")
        if exc_line:
            message = str(event.fields.get("message") or "").split("\n")
            head = f"{event.fields.get('exc_type')}: {message[0]}"
            yield Text(exc_line, head, event, "exception")
            for offset, extra in enumerate(message[1:], start=1):
                yield Text(exc_line + offset, extra, event, "message")
        return
    yield Text(event.line, untypeset(event.text), event, "line")


#: A dash an editor made of ``--`` or ``-`` before an option's name (``–max-input-tokens``),
#: and curly quotes: what a line pasted through a word processor or a forum looks like.
_TYPESET_DASH = re.compile(r"(?<![\w-])[\u2013\u2014](?=[A-Za-z])")
_TYPESET_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def untypeset(text: str) -> str:
    """A line as the program printed it before an editor typeset it: a dash before a word is
    an option's ``--``, curly quotes are straight. Ranges (``0.8–0.10``) keep their dash."""
    if text.isascii():
        return text
    return _TYPESET_DASH.sub("--", text).translate(_TYPESET_QUOTES)


def _stringify(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def observe(
    events: list[Event],
    *,
    engine: str | None = None,
    command_flags: Mapping[str, str | None] | None = None,
    engine_version: str | None = None,
    last_line: int = 0,
) -> Observations:
    obs = Observations(
        events=events, last_line=last_line or max((e.last_line for e in events), default=0)
    )
    votes: dict[str, int] = {}
    # a line that is a phase marker of several engines ("Application startup complete"), or
    # one any OpenAI server prints (uvicorn's "Started server process"), tells none apart
    marking: dict[int, set[str]] = {}
    generic: set[int] = set()
    for event in events:
        if event.kind == "phase" and event.fields["engine"] == GENERIC_ENGINE:
            generic.add(event.line)
        elif event.kind == "phase":
            marking.setdefault(event.line, set()).add(event.fields["engine"])
    for event in events:
        obs.texts.extend(_texts_of(event))
        if event.kind == "phase":
            obs.phases.append(event)
            if len(marking.get(event.line, ())) == 1 and event.line not in generic:
                votes[event.fields["engine"]] = votes.get(event.fields["engine"], 0) + 1
        elif event.kind == "config":
            votes[event.fields["engine"]] = votes.get(event.fields["engine"], 0) + 3
            for key, value in (parse_effective_config(event.fields["line"]) or {}).items():
                obs.flags[normalise_flag(key)] = _stringify(value)
                obs.flag_sources[normalise_flag(key)] = "config"
                obs.config_fields.add(normalise_flag(key))
        elif event.kind == "override":
            obs.overrides.append(event)
    for event in obs.overrides:
        name = normalise_flag(event.fields.get("name", ""))
        value = event.fields.get("value")
        if name and value is not None:
            obs.flags[name] = str(value)
            obs.flag_sources[name] = "override"
    for key, value in (command_flags or {}).items():
        obs.flags[normalise_flag(key)] = "true" if value is None else str(value)
        obs.flag_sources[normalise_flag(key)] = "command"
    if engine and engine != "auto":
        obs.engine = engine
    else:
        text_votes = _engine_votes(obs.texts)
        for name, n in text_votes.items():
            votes[name] = votes.get(name, 0) + 2 * n
        for name in _entry_programs(events):
            votes[name] = votes.get(name, 0) + ENTRY_VOTES
        if not votes:
            votes = _field_votes(obs.texts)
        votes = _drop_embedded(votes)
        obs.engine = max(votes, key=lambda k: votes[k]) if votes else None
    obs.phases = _phases_of(obs.phases, obs.engine)
    obs.distribution = _distribution(obs)
    obs.engine_version = (
        engine_version
        or _version_in_log(obs)
        or version_from_fields(obs.engine, sorted(obs.config_fields))
    )
    return obs


def _phases_of(markers: list[Event], engine: str | None) -> list[Event]:
    """The engine's own phase markers, else the generic ones (any OpenAI server's)."""
    wanted = engine if engine in {p.fields["engine"] for p in markers} else GENERIC_ENGINE
    return [p for p in markers if p.fields["engine"] == wanted]


def named(obs: Observations, engine: str) -> Observations:
    """A copy of ``obs`` for a log found to be ``engine``'s after it was observed (its own
    messages name it): that engine's phase markers and version line are read."""
    markers = [e for e in obs.events if e.kind == "phase"]
    copy = replace(obs, engine=engine, phases=_phases_of(markers, engine))
    copy.distribution = _distribution(copy)
    copy.engine_version = obs.engine_version or _version_in_log(copy)
    return copy


def _distribution(obs: Observations) -> str | None:
    return build_of(obs.engine, (t.text for t in obs.texts[:5000]))


def _version_in_log(obs: Observations) -> str | None:
    """The engine's version as the log states it (vLLM prints it at start-up)."""
    spec = all_engines().get(obs.engine or "")
    if spec is None or not spec.version_re:
        return None
    for text in obs.texts[:5000]:
        for regex in spec.version_re:
            m = regex.search(text.text)
            if m is not None:
                return m.group("version")
    return None


#: The weight of a traceback's entry program (the module the user ran): it outweighs a few
#: lines of another engine the server imported (SGLang importing vLLM's kernels).
ENTRY_VOTES = 10
_LAUNCHER_FRAME = re.compile(r"(?:^|[\\/])(?:runpy\.py|<frozen [\w.]+>)$|[\\/]importlib[\\/]")


def _entry_programs(events: list[Event]) -> set[str]:
    """The engines whose own entry module a traceback starts in (``sglang/launch_server.py``
    under runpy, ``vllm/entrypoints/…`` behind a console script)."""
    found: set[str] = set()
    for event in events:
        if event.kind != "traceback" or not event.frames:
            continue
        outer = [f for f in event.frames[:3] if not _LAUNCHER_FRAME.search(f.file)]
        if not outer:
            continue
        module = re.sub(r"\.py$", "", outer[0].file.replace("\\", "/")).replace("/", ".")
        spec = engine_for_command([module])
        if spec.name != "openai":
            found.add(spec.name)
    return found


def _drop_embedded(votes: dict[str, int]) -> dict[str, int]:
    """Lines of an engine another one runs inside it (llama.cpp's inside Ollama's log) are
    that other engine's once its own lines are there too."""
    outer = [spec for spec in all_engines().values() if votes.get(spec.name)]
    dropped = {inner for spec in outer for inner in spec.embeds}
    return {name: n for name, n in votes.items() if name not in dropped}


#: pip building (or failing to build) a distribution: the log is that package's install
_PIP_BUILD = re.compile(
    r"(?:Building wheel for|Failed building wheel for|Failed to build|Could not build wheels "
    r"for)\s+(?P<dist>[A-Za-z][\w.-]*)"
)


def _engine_votes(texts: list[Text]) -> dict[str, int]:
    """Lines that name an engine (its module paths, its distinctive messages, pip building
    the engine's own distribution)."""
    votes: dict[str, int] = {}
    sample = [t.text for t in texts[:2000]]
    by_distribution = {
        spec.distribution.lower(): spec.name
        for spec in all_engines().values()
        if spec.distribution and not spec.native
    }
    for spec in all_engines().values():
        for text in sample:
            if any(r.search(text) for r in spec.log_re):
                votes[spec.name] = votes.get(spec.name, 0) + 1
    for text in sample:
        for m in _PIP_BUILD.finditer(text):
            name = by_distribution.get(m.group("dist").lower())
            if name is not None:
                votes[name] = votes.get(name, 0) + 1
    return votes


_FIELD = re.compile(
    r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)+|[`'\"]([a-z][a-z0-9]*(?:_[a-z0-9]+)+)[`'\"]"
)


def _field_votes(texts: list[Text]) -> dict[str, int]:
    """Weak evidence, used only when nothing else names the engine: flags and config fields
    the log's messages name (``--max-model-len``, `gpu_memory_utilization`) that only one
    engine's parser has."""
    votes: dict[str, int] = {}
    for text in texts[:2000]:
        for m in _FIELD.finditer(text.text):
            engines = engines_knowing(m.group(1) or m.group(0))
            if len(engines) == 1:
                (name,) = engines
                votes[name] = votes.get(name, 0) + 1
    return votes
