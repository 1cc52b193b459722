"""The one seam between experiments and the command model (``servedoctor.engines.command``).

Experiments need four things from a server command: apply one :class:`Change`, render the
argv, the environment overrides, and the flags it sets away from their defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from servedoctor.engines.adapter import engines_knowing
from servedoctor.engines.command import ServerCommand, parse_command
from servedoctor.engines.inventory import inventory
from servedoctor.errors import UserError
from servedoctor.model import Change

__all__ = ["CommandLike", "SetFlag", "canonical", "knows_flag", "parse", "set_flags", "value_of"]


class CommandLike(Protocol):
    @property
    def engine(self) -> str: ...

    @property
    def env(self) -> Mapping[str, str]: ...

    def apply(self, change: Change) -> CommandLike: ...

    def render(self) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class SetFlag:
    """A flag the command sets: canonical name, raw value (``None`` = bare switch), and
    whether that is the engine's default (then dropping it would change nothing)."""

    name: str
    value: str | None
    is_default: bool = False


def parse(argv: Sequence[str]) -> ServerCommand:
    """Parse a server command (env prefixes and docker wrappers allowed)."""
    if not argv:
        raise UserError("no server command given (put it after --)")
    return parse_command(argv)


def canonical(command: CommandLike, name: str) -> str:
    """The canonical spelling of a flag for this command's engine."""
    return command.canonical(name) if isinstance(command, ServerCommand) else name


def knows_flag(command: CommandLike, name: str) -> bool:
    """False only when neither the engine's flag table nor its inventory (any release
    read from its parser) has ``name``."""
    if not isinstance(command, ServerCommand):
        return True
    if command.engine in engines_knowing(name):
        return True
    if command.table is None:
        return inventory(command.engine) is None
    return command.spec(name) is not None or command.table.negated(name) is not None


def value_of(command: CommandLike, name: str) -> str | None:
    """The value in effect of a flag (``--x-y`` or ``x_y``) or an env var in the command."""
    if name in command.env:
        return command.env[name]
    if not isinstance(command, ServerCommand):
        return None
    flag = name if name.startswith("-") else "--" + name.replace("_", "-")
    try:
        return command.get(flag)
    except UserError:
        return None


def set_flags(command: CommandLike) -> list[SetFlag]:
    """Flags the command sets explicitly, in order (last occurrence of each)."""
    if not isinstance(command, ServerCommand):
        return []
    out: dict[str, SetFlag] = {}
    for parsed in command.flags:
        spec = command.spec(parsed.name)
        is_default = False
        if spec is not None and spec.default is not None and not parsed.negated:
            try:
                is_default = command.value(parsed.name) == spec.default
            except UserError:
                is_default = False
        out[parsed.name] = SetFlag(parsed.name, parsed.value, is_default)
    return list(out.values())
