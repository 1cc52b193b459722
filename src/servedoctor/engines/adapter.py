"""Engine adapters: a knob → this engine's flag or environment variable, for its version.

Each ``engines/knobs/<engine>.yaml`` lists, per knob, the spellings the engine has had
(newest first). The adapter takes the first one that the engine's inventory (read from its
released parser, ``engines/inventory``) has at the user's version and does not deprecate
there, else the first that exists at all; engines without an inventory rely on the
spelling's ``versions`` range. A knob no spelling covers is not expressible: the caller
drops the proposal rather than print a flag the server will reject.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from servedoctor.datafile import load_yaml
from servedoctor.engines.inventory import Inventory, inventory, known_inventories
from servedoctor.knowledge.knobs import knob, vocabulary
from servedoctor.model import REMOVE, Change, ChangeKind

KNOBS_DIR = Path(__file__).parent / "knobs"
COMMON = "common"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Spelling(_Strict):
    """One way an engine expresses a knob."""

    flag: str | None = Field(default=None, pattern=r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
    env: str | None = Field(default=None, pattern=r"^[A-Z][A-Z0-9_]*$")
    value: str | None = Field(default=None, description="fixed value (switch knobs)")
    values: dict[str, str] | None = Field(
        default=None, description="engine-neutral choice → this engine's word; others unsupported"
    )
    remove: bool = Field(default=False, description="the knob is 'take this flag away'")
    default: str | None = Field(
        default=None,
        description="the engine's own value when the command does not set it (what a "
        "'{current/2}' step starts from)",
    )
    versions: str = Field(default="", description="PEP 440 range where this spelling holds")

    @model_validator(mode="after")
    def _one_target(self) -> Spelling:
        if (self.flag is None) == (self.env is None):
            raise ValueError("a spelling names exactly one of flag or env")
        return self

    @field_validator("versions")
    @classmethod
    def _specifier(cls, v: str) -> str:
        try:
            SpecifierSet(v)
        except InvalidSpecifier as exc:
            raise ValueError(f"bad version range {v!r}") from exc
        return v

    @property
    def target(self) -> str:
        return self.flag or self.env or ""

    def holds_for(self, version: str | None) -> bool:
        if not self.versions or version is None:
            return True
        try:
            return Version(version) in SpecifierSet(self.versions)
        except InvalidVersion:
            return True


class Adapter(_Strict):
    engine: str
    knobs: dict[str, list[Spelling]]
    not_common: list[str] = Field(
        default_factory=list,
        description="common knobs this engine does not read (PyTorch's allocator for ggml)",
    )

    @model_validator(mode="after")
    def _known_knobs(self) -> Adapter:
        vocab = vocabulary()
        for knob_id in self.knobs:
            if vocab.get(knob_id) is None:
                raise ValueError(f"{self.engine}: unknown knob {knob_id!r}")
        return self


@cache
def adapter(engine: str) -> Adapter | None:
    path = KNOBS_DIR / f"{engine}.yaml"
    if not path.is_file():
        return None
    return Adapter.model_validate(load_yaml(path))


def known_adapters() -> list[str]:
    return sorted(p.stem for p in KNOBS_DIR.glob("*.yaml") if p.stem != COMMON)


def spellings(knob_id: str, engine: str | None) -> list[Spelling]:
    """Every spelling of a knob for an engine: its own first, then the common ones."""
    out: list[Spelling] = []
    own = adapter(engine) if engine else None
    if own is not None:
        out.extend(own.knobs.get(knob_id, []))
    common = adapter(COMMON)
    if common is not None and (own is None or knob_id not in own.not_common):
        out.extend(common.knobs.get(knob_id, []))
    return out


def choose(
    knob_id: str,
    engine: str | None,
    version: str | None,
    in_effect: Callable[[str], bool] | None = None,
) -> Spelling | None:
    """The spelling to use for ``engine`` at ``version`` (``None`` = its latest). A spelling
    the server itself reports in effect (its config dump names it) exists there: it wins."""
    candidates = [s for s in spellings(knob_id, engine) if s.holds_for(version)]
    if in_effect is not None:
        shown = [s for s in candidates if in_effect(s.target)]
        if shown:
            return shown[0]
    inv = inventory(engine) if engine else None
    if inv is None:
        return candidates[0] if candidates else None
    if version is None:
        return _portable(candidates, inv)
    fallback: Spelling | None = None
    known = inv.resolve(version)
    for spelling in candidates:
        if spelling.env is not None:
            return spelling
        flag = inv.flag(spelling.target, known)
        if flag is None:
            continue
        if not flag.deprecated(known):
            return spelling
        fallback = fallback or spelling
    return fallback


def _portable(candidates: list[Spelling], inv: Inventory) -> Spelling | None:
    """With no version known, a spelling every release read accepts (the newest's preferred
    where several do), else an environment variable, else what the newest release takes."""
    latest = inv.latest

    def rank(spelling: Spelling) -> tuple[int, int] | None:
        if spelling.env is not None:
            return (1, 0)
        flag = inv.flag(spelling.target, latest)
        if flag is None:
            return None
        everywhere = all(inv.flag(spelling.target, v) is not None for v in inv.versions)
        return (0 if everywhere else 2, int(flag.deprecated(latest)))

    ranked = [(r, n, s) for n, s in enumerate(candidates) if (r := rank(s)) is not None]
    return min(ranked, key=lambda t: (t[0], t[1]))[2] if ranked else None


def spell(
    knob_id: str,
    value: str | None,
    *,
    engine: str | None,
    version: str | None,
    present: bool = True,
    in_effect: Callable[[str], bool] | None = None,
) -> Change | None:
    """The change that sets ``knob_id`` to ``value`` (already checked by the knob), or
    ``None`` when this engine and version cannot express it. ``present`` says whether a
    'remove' spelling's flag is in the command at all."""
    spelling = choose(knob_id, engine, version, in_effect)
    if spelling is None:
        return None
    kind: ChangeKind = "flag" if spelling.flag else "env"
    if spelling.remove:
        return Change(kind=kind, name=spelling.target, value=REMOVE) if present else None
    if spelling.value is not None:
        word: str | None = spelling.value
    elif spelling.values is not None:
        if value is None or value not in spelling.values:
            return None
        word = spelling.values[value]
    else:
        word = value or None
    if kind == "env" and word is None:
        return None
    if kind == "flag" and word is not None and not _choice_ok(engine, version, spelling, word):
        return None
    return Change(kind=kind, name=spelling.target, value=word)


def _choice_ok(engine: str | None, version: str | None, spelling: Spelling, word: str) -> bool:
    inv = inventory(engine) if engine else None
    if inv is None or spelling.flag is None:
        return True
    known = inv.resolve(version)
    flag = inv.flag(spelling.flag, known)
    if flag is None:
        return True
    if flag.type_at(known) == "bool" and flag.nargs is None:
        return False  # a switch in this release (llama.cpp's -fa before it took on|off|auto)
    choices = flag.choices_at(known)
    return choices is None or word in choices


@cache
def engines_knowing(spelling: str) -> frozenset[str]:
    """The engines whose parser, in any release read, has this flag or config field."""
    flag = spelling if spelling.startswith("-") else "--" + spelling.replace("_", "-")
    found = set()
    for engine in known_inventories():
        inv = inventory(engine)
        if inv is not None and any(inv.flag(flag, v) is not None for v in inv.versions):
            found.add(engine)
    return frozenset(found)


def _spelled_as(target: str, engine: str | None) -> Iterator[tuple[str, Spelling]]:
    """Each knob spelling, for ``engine`` in any version or the common table, whose flag or
    variable is ``target`` (a flag's ``_`` and ``-`` alike)."""

    def key(name: str) -> str:
        return name.strip().replace("_", "-").lower() if name.startswith("-") else name

    wanted = key(target)
    for name in (engine, COMMON):
        table = adapter(name) if name else None
        for knob_id, options in table.knobs.items() if table else []:
            for spelling in options:
                if key(spelling.target) == wanted:
                    yield knob_id, spelling


def knobs_of(target: str, engine: str | None) -> frozenset[str]:
    """The knobs whose spelling, for ``engine`` in any version, is this flag or variable."""
    return frozenset(knob_id for knob_id, _ in _spelled_as(target, engine))


def meanings_of(target: str, value: str, engine: str | None) -> frozenset[tuple[str, str]]:
    """The (knob, engine-neutral choice) pairs that ``target`` set to ``value`` spells for
    ``engine`` in any version: ``VLLM_ATTENTION_BACKEND=TRITON_ATTN_VLLM_V1`` (vLLM 0.10) and
    ``=TRITON_ATTN`` (0.11) both mean the portable attention backend."""
    found: set[tuple[str, str]] = set()
    for knob_id, spelling in _spelled_as(target, engine):
        if spelling.value is not None and spelling.value == value:
            found.add((knob_id, ""))
        found.update((knob_id, c) for c, word in (spelling.values or {}).items() if word == value)
    return frozenset(found)


def version_from_fields(engine: str | None, fields: list[str]) -> str | None:
    """The newest release whose parser has the most of these config fields: a server's
    config dump names its own flags, so it dates the release that printed it."""
    inv = inventory(engine) if engine else None
    if inv is None or not fields:
        return None
    flags = ["--" + f.replace("_", "-") for f in fields]
    best: tuple[int, int] | None = None
    chosen = None
    for rank, version in enumerate(inv.versions):
        known = sum(inv.flag(f, version) is not None for f in flags)
        if known and (best is None or (known, rank) >= best):
            best, chosen = (known, rank), version
    return chosen


def other_spellings(change: Change, engine: str | None) -> list[Change]:
    """The same intent in this engine's other spellings (another release's flag, or the
    environment variable an older release read), for when the server refused ``change``."""
    out: list[Change] = []
    for knob_id in sorted(knobs_of(change.name, engine)):
        options = spellings(knob_id, engine)
        source = next((o for o in options if o.target == change.name), None)
        switch = knob(knob_id).value == "none"
        neutral = None if switch else change.value
        if source is not None and source.values and change.value is not None:
            neutral = next((k for k, v in source.values.items() if v == change.value), None)
        for option in options:
            if option.target == change.name or option.remove:
                continue
            kind: ChangeKind = "flag" if option.flag else "env"
            if option.value is not None:
                value: str | None = option.value
            elif option.values is not None:
                value = option.values.get(neutral or "")
                if value is None:
                    continue
            else:
                value = neutral
            alt = Change(kind=kind, name=option.target, value=value)
            if alt not in out and alt != change:
                out.append(alt)
    return out
