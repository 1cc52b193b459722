"""A rule's change → one concrete :class:`Change` for this engine, version and setting.

Shared by the diagnosis (hypotheses) and the preflight (risks). A proposal is dropped, never
printed half-made, when a placeholder has no value, the value is out of range for the knob,
the engine cannot express the knob at this version, the flag does not exist in the engine's
inventory, or the change is already in effect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from servedoctor.engines import all_engines
from servedoctor.engines.adapter import choose, knobs_of, spell
from servedoctor.engines.inventory import inventory, same_spelling
from servedoctor.engines.spec import engine_distribution
from servedoctor.knowledge.facts import is_system_package
from servedoctor.knowledge.knobs import fill, free_port, knob, vocabulary
from servedoctor.knowledge.schema import ChangeSpec
from servedoctor.knowledge.versionwords import (
    LATEST_RELEASE,
    build_from,
    release_before,
    release_from,
)
from servedoctor.model import REMOVE, Change


@dataclass(frozen=True, slots=True)
class Setting:
    """Where a change will be applied: the engine, its version, and what is in effect."""

    engine: str | None
    version: str | None
    value_of: Callable[[str], str | None]  # flag or env name → value in effect, or None
    #: does the server itself show this spelling in effect (its config dump)? By default:
    #: whatever has a value (a command the user typed).
    shown: Callable[[str], bool] | None = None
    #: are the server's flags known (its command, its config dump)? When they are not (a log
    #: excerpt), a switch the failure shows on can only be proposed as "take it away".
    flags_known: bool = True
    #: the oldest release the log's own messages allow when its release is only bounded
    #: (``version`` is then the newest): a variable only that older part reads is still
    #: offered, as a server ignores a variable it does not read but refuses a flag it lacks
    floor: str | None = None
    #: the package the server is installed as, where the log names a fork of the engine
    package: str | None = None

    def in_effect(self, name: str) -> bool:
        if self.shown is not None:
            return self.shown(name)
        return self.value_of(name) is not None


def propose(spec: ChangeSpec, groups: Mapping[str, str], setting: Setting) -> Change | None:
    if spec.engines and (setting.engine or "null") not in spec.engines:
        return None
    if not spec.native and is_native(setting.engine):
        return None
    change = _from_knob(spec, groups, setting) if spec.knob else _direct(spec, groups, setting)
    if change is None or already_in_effect(change, setting) or _not_installable(change, setting):
        return None
    return change


def is_native(engine: str | None) -> bool:
    """Is the engine one compiled binary (llama.cpp, Ollama)?"""
    spec = all_engines().get(engine or "")
    return spec is not None and spec.native


def _not_installable(change: Change, setting: Setting) -> bool:
    """A Python package change for a server that is one compiled binary (llama.cpp, Ollama);
    the system stacks it runs on (ROCm) still apply."""
    if not is_native(setting.engine) or change.kind != "package":
        return False
    spec = all_engines()[setting.engine or ""]
    own = {spec.distribution, setting.package}
    return change.name not in own and not is_system_package(change.name)


def fill_text(template: str, groups: Mapping[str, str], setting: Setting) -> str:
    """A cause or summary with its placeholders filled where the log gives them."""
    return fill(template, groups, lambda key: _lookup(key, None, setting, groups)) or template


def release_accepting(flag: str, value: str | None, setting: Setting) -> str | None:
    """The engine's release that accepts a flag (and value) its parser refused, read from the
    inventory: the first release that has it, when the installed one does not; the latest
    when the flag takes names from a registry (parsers, backends) that grows per release."""
    inv = inventory(setting.engine) if setting.engine else None
    if inv is None or inv.replacement(flag, setting.version) is not None:
        return None  # the release has the flag under another spelling: no release to move to
    first = inv.first_accepting(flag, value, setting.version)
    if first is not None and inv.unknown_version == "any":
        return build_from(inv.released(first) or first)  # a date-labelled build (llama.cpp)
    if first is not None:
        return release_from(first)
    found = inv.flag(flag, setting.version)
    if (
        value is not None
        and found is not None
        and found.choices_at(inv.resolve(setting.version)) is None
    ):
        return LATEST_RELEASE
    return None


def _lookup(
    key: str, target: str | None, setting: Setting, groups: Mapping[str, str] | None = None
) -> str | None:
    if key == "engine":  # the package the server itself is installed as
        return setting.package or engine_distribution(setting.engine)
    if key == "release_before":  # the engine's release before the one the log states
        return release_before(setting.version) if setting.version else None
    if key == "release_accepting" and groups and ("unknown" in groups or "choice" in groups):
        # a flag the parser did not know, or a choice it did not list
        return release_accepting(groups["flag"], groups.get("choice"), setting)
    if key == "replacement" and groups and "flag" in groups:
        inv = inventory(setting.engine) if setting.engine else None
        return inv.replacement(groups["flag"], setting.version) if inv is not None else None
    if key == "refused_value" and groups and "flag" in groups:  # what the command gave it
        return groups.get("value") or setting.value_of(groups["flag"])
    if key == "current":
        return setting.value_of(target) if target else None
    if key.startswith("flag:"):
        return setting.value_of(key[5:])
    return None


def knob_id_of(spec: ChangeSpec, groups: Mapping[str, str]) -> str | None:
    """The knob a change names, or the one whose config field the rule captured."""
    assert spec.knob is not None
    if not spec.knob.startswith("{"):
        return spec.knob
    field = groups.get(spec.knob.strip("{}"))
    found = vocabulary().for_field(field) if field else None
    return found.id if found else None


def _respelled(spec: ChangeSpec, groups: Mapping[str, str], engine: str | None) -> str | None:
    """The one knob a captured flag spells for this engine in some release (a refused old
    spelling, ``--guided-decoding-backend`` → the grammar backend), or None."""
    assert spec.knob is not None
    name = groups.get(spec.knob.strip("{}"), "") if spec.knob.startswith("{") else ""
    found = knobs_of(name, engine) if name.startswith("-") else frozenset()
    return next(iter(found)) if len(found) == 1 else None


def _from_knob(spec: ChangeSpec, groups: Mapping[str, str], setting: Setting) -> Change | None:
    knob_id = knob_id_of(spec, groups)
    refused = None
    if knob_id is None:
        knob_id = _respelled(spec, groups, setting.engine)
        refused = groups.get((spec.knob or "").strip("{}"))
    if knob_id is None:
        return None
    kind = knob(knob_id)
    chosen = choose(knob_id, setting.engine, setting.version, setting.in_effect)
    target = chosen.target if chosen is not None else None
    own = chosen.default if chosen is not None else None  # the engine's value when unset

    def lookup(key: str) -> str | None:
        found = _lookup(key, target, setting)
        return own if found is None and key == "current" else found

    raw = fill(spec.value, groups, lookup)
    if raw is None and spec.default is not None:
        raw = fill(spec.default, groups, lookup)
    if raw is None and kind.value == "port":
        raw = free_port()
    if raw is None and kind.value not in ("none",):
        return None
    value = kind.check(raw if kind.value != "none" else None)
    if value is None:
        return None
    present = not setting.flags_known or (
        target is not None and setting.value_of(target) not in (None, "false", "False")
    )

    def spelled(version: str | None) -> Change | None:
        return spell(
            knob_id,
            value or None,
            engine=setting.engine,
            version=version,
            present=present,
            in_effect=setting.in_effect,
        )

    change = spelled(setting.version)
    if change is None and setting.floor is not None:
        older = spelled(setting.floor)
        change = older if older is not None and older.kind == "env" else None
    if change is not None and refused is not None and same_spelling(change.name, refused):
        return None  # this release spells the knob as the flag it refused: no other spelling
    return change


def _direct(spec: ChangeSpec, groups: Mapping[str, str], setting: Setting) -> Change | None:
    assert spec.kind is not None and spec.name is not None
    lookup: Callable[[str], str | None] = lambda key: _lookup(key, None, setting, groups)  # noqa: E731
    name = fill(spec.name, groups, lookup)
    value = fill(spec.value, groups, lookup)
    if value is None and spec.default is not None:
        value = fill(spec.default, groups, lookup)
    if name is None or (spec.value is not None and value is None):
        return None
    value = value or None  # an empty default: the flag is a switch
    if spec.kind == "flag" and not name.startswith("-"):
        return None  # not a flag (a captured env var name)
    if spec.kind == "flag" and value != REMOVE and not _flag_exists(name, setting, value):
        return None  # not one this engine has (taking away a flag it refused always is)
    return Change(kind=spec.kind, name=name, value=value)


def _flag_exists(name: str, setting: Setting, value: str | None) -> bool:
    """The engine has the flag (any flag, when its inventory is unknown); a flag that takes
    a value is not proposed without one."""
    inv = inventory(setting.engine) if setting.engine else None
    if inv is None or _a_fork(setting):
        return True  # a fork (ik_llama.cpp) has flags of its own
    flag = inv.accepts_spelling(name, setting.version)
    return flag is not None and (value is not None or flag.type == "bool" or flag.nargs == "0")


def _a_fork(setting: Setting) -> bool:
    """The log names a build of the engine that is not its own distribution."""
    own = engine_distribution(setting.engine) if setting.engine else None
    return setting.package is not None and own is not None and setting.package != own


def already_in_effect(change: Change, setting: Setting) -> bool:
    if change.kind == "package" or change.value == REMOVE:
        return False
    current = setting.value_of(change.name)
    if current is None:
        return False
    wanted = "true" if change.value is None else change.value
    return current.lower() == wanted.lower()
