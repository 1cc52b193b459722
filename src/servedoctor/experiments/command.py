"""The one seam between experiments and the command model.

Experiments need four things from a server command: apply one :class:`Change`, render the
argv, the environment overrides, and the flags it sets away from their defaults. Until
``servedoctor.engines.command`` lands this module carries a minimal local stand-in with the
same API (``parse_command(argv) -> ServerCommand`` with ``apply``/``render``); switching to
the real model is the import in :func:`parse`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from servedoctor.model import REMOVE, Change

__all__ = ["CommandLike", "SetFlag", "parse", "set_flags"]

_ENV_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class CommandLike(Protocol):
    @property
    def engine(self) -> str: ...

    @property
    def env(self) -> Mapping[str, str]: ...

    def apply(self, change: Change) -> CommandLike: ...

    def render(self) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class SetFlag:
    """A flag the command sets: its name, raw value (``None`` = bare switch), default."""

    name: str
    value: str | None
    default: str | None = None


@dataclass(frozen=True)
class LocalCommand:
    """Stand-in command model: program tokens, then ``--flag [value]`` pairs, env prefixes."""

    engine: str
    program: tuple[str, ...]
    flags: tuple[tuple[str, str | None], ...]
    env: Mapping[str, str] = field(default_factory=dict)

    def apply(self, change: Change) -> LocalCommand:
        if change.kind == "env":
            env = dict(self.env)
            if change.value == REMOVE:
                env.pop(change.name, None)
            else:
                env[change.name] = change.value or ""
            return replace(self, env=env)
        if change.kind != "flag":
            raise ValueError(f"a {change.kind} change cannot be applied to a command line")
        kept = [(n, v) for n, v in self.flags if n != change.name]
        if change.value != REMOVE:
            kept.append((change.name, change.value))
        return replace(self, flags=tuple(kept))

    def render(self) -> list[str]:
        argv = list(self.program)
        for name, value in self.flags:
            argv.append(name)
            if value is not None:
                argv.append(value)
        return argv


def _parse_local(argv: Sequence[str]) -> LocalCommand:
    from servedoctor.engines import engine_for_command

    tokens = list(argv)
    env: dict[str, str] = {}
    while tokens and _ENV_PREFIX.match(tokens[0]):
        name, _, value = tokens.pop(0).partition("=")
        env[name] = value
    if tokens and tokens[0] == "env":
        tokens.pop(0)
        while tokens and _ENV_PREFIX.match(tokens[0]):
            name, _, value = tokens.pop(0).partition("=")
            env[name] = value
    program: list[str] = []
    while tokens and not tokens[0].startswith("-"):
        program.append(tokens.pop(0))
        if program[-1].rsplit("/", 1)[-1].startswith("python"):
            while len(tokens) >= 2 and tokens[0] in ("-m", "-X", "-W"):
                program += [tokens.pop(0), tokens.pop(0)]
    flags: list[tuple[str, str | None]] = []
    while tokens:
        tok = tokens.pop(0)
        if not tok.startswith("-"):
            program.append(tok)  # a stray positional: keep it with the program
            continue
        if "=" in tok:
            name, _, value = tok.partition("=")
            flags.append((name, value))
        elif tokens and not tokens[0].startswith("-"):
            flags.append((tok, tokens.pop(0)))
        else:
            flags.append((tok, None))
    engine = engine_for_command(list(program)).name
    return LocalCommand(engine=engine, program=tuple(program), flags=tuple(flags), env=env)


def parse(argv: Sequence[str]) -> CommandLike:
    """Parse a server command (env prefixes allowed) into the command model."""
    if not argv:
        from servedoctor.errors import UserError

        raise UserError("no server command given (put it after --)")
    return _parse_local(argv)


def set_flags(command: CommandLike) -> list[SetFlag]:
    """Flags the command sets explicitly, in order, with their defaults where known."""
    if isinstance(command, LocalCommand):
        return [SetFlag(name=n, value=v) for n, v in command.flags]
    return []
