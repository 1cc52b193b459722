"""A server command line as a structured value: :class:`ServerCommand`.

``parse_command`` takes the argv a user would type, including ``A=1 cmd`` / ``env A=1 cmd``
prefixes and ``docker run ... IMAGE cmd`` wrappers, finds the engine's entry point and parses
the flags through that engine's flag table (``engines/flags/<engine>.yaml``). Unknown flags
are kept, in place, and reported in ``unknown``; nothing is dropped. ``apply`` makes the
one-change variants experiments need, and ``render`` gives the argv back.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from servedoctor.engines.flagtable import FlagSpec, FlagTable, flag_table
from servedoctor.engines.inventory import inventory, same_spelling
from servedoctor.engines.spec import engine_for_command
from servedoctor.errors import UserError
from servedoctor.model import REMOVE, SERVER_BIN, Change

#: ``$NAME`` or ``${NAME}`` in an environment value
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")

__all__ = ["ParsedFlag", "ServerCommand", "parse_command"]

_ENV_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_PYTHON = re.compile(r"(^|/)python(\d+(\.\d+)?)?$")
_NUMBER = re.compile(r"^-\d")

#: ``python -m MODULE`` entry points and the engine each one starts.
_MODULES: dict[str, str] = {
    "sglang.launch_server": "sglang",
    "sglang.srt.server": "sglang",
    "vllm.entrypoints.openai.api_server": "vllm",
    "vllm.entrypoints.api_server": "vllm",
    "vllm.entrypoints.cli.main": "vllm",
    "transformers.commands.serving": "transformers",
    "transformers.cli.transformers": "transformers",
}
#: ``PROGRAM serve`` entry points.
_SERVE_PROGRAMS: dict[str, str] = {
    "sglang": "sglang",
    "vllm": "vllm",
    "transformers": "transformers",
    "transformers-cli": "transformers",
}
#: ``docker run`` options that take no value; every other option takes one.
_DOCKER_BOOL = {
    "--rm",
    "-d",
    "--detach",
    "-i",
    "--interactive",
    "-t",
    "--tty",
    "-it",
    "-ti",
    "-itd",
    "-dit",
    "--privileged",
    "--init",
    "-P",
    "--publish-all",
    "--read-only",
    "--sig-proxy",
    "--no-healthcheck",
    "--oom-kill-disable",
    "-q",
    "--quiet",
}


@dataclass(frozen=True, slots=True)
class ParsedFlag:
    """One flag as written: ``spelled`` as typed, ``name`` canonical (= spelled if unknown)."""

    name: str
    spelled: str
    values: tuple[str, ...] = ()
    inline: bool = False  # written as --flag=value
    known: bool = True
    negated: bool = False  # --no-NAME form of a negatable boolean

    @property
    def value(self) -> str | None:
        if not self.values:
            return None
        return " ".join(self.values)

    def render(self) -> list[str]:
        if self.inline and len(self.values) == 1:
            return [f"{self.spelled}={self.values[0]}"]
        return [self.spelled, *self.values]


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """A parsed server command.

    ``program`` is the entry point (``python -m sglang.launch_server``, ``vllm serve``);
    ``launcher`` what came before it (``docker run ... IMAGE``, ``uv run``, ``numactl ...``);
    ``positionals`` arguments without a flag (``vllm serve MODEL``); ``flags`` in order;
    ``env`` the environment overrides from prefixes and ``docker run -e``.
    """

    engine: str
    argv: tuple[str, ...]
    program: tuple[str, ...]
    flags: tuple[ParsedFlag, ...] = ()
    positionals: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    launcher: tuple[str, ...] = ()
    docker: bool = False

    # ----------------------------------------------------------------- reading
    @property
    def table(self) -> FlagTable | None:
        return flag_table(self.engine)

    @property
    def unknown(self) -> tuple[str, ...]:
        """Flags the engine's table does not list, as spelled (reported, never dropped)."""
        return tuple(f.spelled for f in self.flags if not f.known)

    def canonical(self, flag: str) -> str:
        table = self.table
        return table.canonical(flag) if table is not None else flag

    def spec(self, flag: str) -> FlagSpec | None:
        table = self.table
        return table.lookup(flag) if table is not None else None

    def find(self, flag: str) -> ParsedFlag | None:
        """The last occurrence of ``flag`` (any alias) as argparse would keep it."""
        name = self.canonical(flag)
        for parsed in reversed(self.flags):
            if parsed.name == name:
                return parsed
        return None

    def has(self, flag: str) -> bool:
        return self.get(flag) is not None

    def get(self, flag: str) -> str | None:
        """The raw value of ``flag``: its value, ``"true"``/``"false"`` for a boolean that
        is present, the positional it stands for (``vllm serve MODEL`` → ``--model``), or
        ``None`` when the command does not set it."""
        parsed = self.find(flag)
        if parsed is not None:
            if parsed.negated:
                return "false"
            if not parsed.values:
                spec = self.spec(flag)
                return "true" if spec is None or spec.type == "bool" else ""
            return parsed.value
        table = self.table
        if table is not None:
            name = self.canonical(flag)
            for index, pos_name in enumerate(table.positionals):
                if pos_name == name and index < len(self.positionals):
                    return self.positionals[index]
        return None

    def value(self, flag: str) -> Any:
        """The typed value of ``flag`` (set, or the table's default)."""
        spec = self.spec(flag)
        raw = self.get(flag)
        if spec is None:
            return raw
        if raw is None:
            return spec.default
        try:
            return spec.convert(raw)
        except ValueError as exc:
            raise UserError(f"{spec.name}: {exc}") from None

    def settings(self) -> dict[str, str]:
        """Every flag the command sets, canonical name → raw value (last one wins)."""
        out: dict[str, str] = {}
        table = self.table
        if table is not None:
            for pos_name, pos in zip(table.positionals, self.positionals, strict=False):
                out[pos_name] = pos
        for parsed in self.flags:
            got = self.get(parsed.name)
            if got is not None:
                out[parsed.name] = got
        return out

    def expanded(self, value: str) -> str:
        """An environment value as the server will see it: ``$NAME`` is the value in effect
        (``/opt/lib:$LD_LIBRARY_PATH``), ``SERVER_BIN`` the folder of the executable the command
        starts (not resolved through links: a venv's ``bin/python`` stays in the venv)."""
        if SERVER_BIN in value:
            # the executable the process starts (the interpreter before `-m` or a script)
            started = self.launcher or self.program
            first = started[0] if started else ""
            found = shutil.which(first) if first and not self.docker else None
            if found:
                value = value.replace(SERVER_BIN, os.path.dirname(os.path.abspath(found)))
            else:  # no folder to name: the rest of the value as it is
                value = value.replace(SERVER_BIN + os.pathsep, "").replace(SERVER_BIN, "")
        merged = {**os.environ, **self.env}
        return _VARIABLE.sub(lambda m: merged.get(m.group(1) or m.group(2), ""), value)

    # ----------------------------------------------------------------- changing
    def apply(self, change: Change) -> ServerCommand:
        """A copy with one flag set, replaced or removed, or one env var set or removed.

        ``value=None`` adds a boolean flag; ``value=REMOVE`` drops the flag or variable.
        """
        if change.kind == "env":
            env = dict(self.env)
            if change.value == REMOVE:
                env.pop(change.name, None)
            else:
                env[change.name] = self.expanded(change.value or "")
            return replace(self, env=env)
        if change.kind != "flag":
            raise ValueError(f"a command cannot apply a {change.kind} change ({change.name})")
        if not change.name.startswith("-"):
            raise ValueError(f"flag names start with '-': {change.name!r}")
        name = self.canonical(change.name)
        spec = self.spec(change.name)
        flags = list(self.flags)
        positionals = self.positionals
        if change.value == REMOVE:
            flags = [f for f in flags if f.name != name]
            positionals = self._without_positional(name)
            return replace(self, flags=tuple(flags), positionals=positionals)
        table = self.table
        if (
            table is not None
            and name in table.positionals
            and change.value is not None
            and table.positionals.index(name) < len(positionals)
            and self.find(name) is None
        ):
            index = table.positionals.index(name)
            positionals = (*positionals[:index], change.value, *positionals[index + 1 :])
            return replace(self, positionals=positionals)
        new = self._flag_for(change, name, spec)
        # a spelling the release refused, which this change spells as the release does
        # (llama.cpp's removed --draft-max → --spec-draft-n-max; SGLang's --reasoning_parser)
        refused = {f.spelled for f in flags if self._succeeds(change.name, f.spelled)}
        flags = [f for f in flags if f.spelled not in refused or f.name == name]
        existing = [i for i, f in enumerate(flags) if f.name == name]
        if existing:
            keep = existing[-1]
            old = flags[keep]
            respelled = old.spelled in refused or new.negated
            new = replace(new, spelled=new.spelled if respelled else old.spelled)
            if old.inline and len(new.values) == 1:
                new = replace(new, inline=True)
            flags[keep] = new
            flags = [f for i, f in enumerate(flags) if f.name != name or i == keep]
        else:
            positionals = self._without_positional(name)
            flags.append(new)
        return replace(self, flags=tuple(flags), positionals=positionals)

    def _succeeds(self, spelling: str, written: str) -> bool:
        """Is ``spelling`` what the engine's inventory names instead of ``written``?"""
        inv = inventory(self.engine)
        found = inv.replacement(written) if inv is not None and written != spelling else None
        return found is not None and same_spelling(found, spelling)

    def _without_positional(self, name: str) -> tuple[str, ...]:
        table = self.table
        if table is None or name not in table.positionals:
            return self.positionals
        index = table.positionals.index(name)
        if index >= len(self.positionals):
            return self.positionals
        return self.positionals[:index] + self.positionals[index + 1 :]

    def _flag_for(self, change: Change, name: str, spec: FlagSpec | None) -> ParsedFlag:
        value = change.value
        if spec is not None and spec.type == "bool" and value is not None:
            on = spec.convert(value)
            if not on:
                if not spec.negatable:
                    raise ValueError(f"{spec.name} cannot be switched off; remove it instead")
                return ParsedFlag(name, "--no-" + spec.name[2:], negated=True)
            value = None
        if value is None:
            return ParsedFlag(name, change.name, (), known=spec is not None)
        values = tuple(value.split()) if spec is not None and spec.nargs != "1" else (value,)
        return ParsedFlag(name, change.name, values, known=spec is not None)

    # ----------------------------------------------------------------- rendering
    def render(self) -> list[str]:
        """The argv to run. Env overrides are separate (``env``), except under ``docker
        run`` where they must travel inside the container as ``-e NAME=VALUE``."""
        out = list(self.launcher)
        if self.docker and self.env:
            out = _docker_with_env(out, self.env)
        out.extend(self.program)
        out.extend(self.positionals)
        for parsed in self.flags:
            out.extend(parsed.render())
        return out

    def render_shell(self) -> str:
        """A one-line shell form, env prefix included (for display only)."""
        import shlex

        prefix = [] if self.docker else [f"{k}={v}" for k, v in self.env.items()]
        return shlex.join([*prefix, *self.render()])


def parse_command(argv: Sequence[str]) -> ServerCommand:
    """Parse a server command line; see the module docstring for what it understands."""
    tokens = [str(t) for t in argv]
    if not tokens:
        raise UserError("empty server command")
    env: dict[str, str] = {}
    rest = _strip_env_prefix(tokens, env)
    launcher: list[str] = []
    docker = False
    if len(rest) >= 2 and rest[0].rsplit("/", 1)[-1] in {"docker", "podman"} and rest[1] == "run":
        launcher, rest, image = _split_docker(rest, env)
        docker = True
        rest = _strip_env_prefix(rest, env)
        if not rest or rest[0].startswith("-"):
            # The image's own entry point runs: guess the engine from the image name.
            return _parse_args(_engine_from_image(image), tokens, (), rest, env, launcher, docker)
    start, end, found = _find_entry(rest)
    engine = found if found is not None else engine_for_command(rest).name
    if found is None:
        start, end = 0, 1
    launcher = launcher + rest[:start]
    return _parse_args(engine, tokens, tuple(rest[start:end]), rest[end:], env, launcher, docker)


def _strip_env_prefix(tokens: list[str], env: dict[str, str]) -> list[str]:
    index = 0
    if tokens and tokens[0].rsplit("/", 1)[-1] == "env":
        index = 1
    while index < len(tokens):
        m = _ENV_ASSIGN.match(tokens[index])
        if not m:
            break
        env[m.group(1)] = m.group(2)
        index += 1
    return tokens[index:]


def _split_docker(tokens: list[str], env: dict[str, str]) -> tuple[list[str], list[str], str]:
    """Split ``docker run OPTS IMAGE CMD...`` into (wrapper without -e, CMD, IMAGE)."""
    wrapper = tokens[:2]
    index = 2
    while index < len(tokens):
        tok = tokens[index]
        if not tok.startswith("-"):
            break
        opt, eq, inline = tok.partition("=")
        if opt in _DOCKER_BOOL:
            wrapper.append(tok)
            index += 1
            continue
        if eq:
            value, step = inline, 1
        elif index + 1 < len(tokens):
            value, step = tokens[index + 1], 2
        else:
            raise UserError(f"docker option {opt} needs a value")
        if opt in {"-e", "--env"} and "=" in value:
            name, _, val = value.partition("=")
            env[name] = val
        else:  # includes `-e NAME` (passes the host's value through): kept as written
            wrapper.extend(tokens[index : index + step])
        index += step
    if index >= len(tokens):
        raise UserError("docker run command has no image")
    image = tokens[index]
    wrapper.append(image)
    return wrapper, tokens[index + 1 :], image


def _docker_with_env(wrapper: list[str], env: Mapping[str, str]) -> list[str]:
    image = wrapper[-1]
    pairs = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
    return [*wrapper[:-1], *pairs, image]


def _engine_from_image(image: str) -> str:
    name = image.lower()
    for engine in ("sglang", "vllm", "transformers"):
        if engine in name:
            return engine
    raise UserError(f"docker image {image!r} runs its own entry point; cannot tell the engine")


def _find_entry(tokens: list[str]) -> tuple[int, int, str | None]:
    """Where the engine's entry point sits in ``tokens``: (start, end, engine)."""
    for i, tok in enumerate(tokens):
        base = tok.rsplit("/", 1)[-1]
        if _PYTHON.search(base):
            j = i + 1
            while j < len(tokens) and tokens[j].startswith("-") and tokens[j] != "-m":
                j += 1  # python -u -X ... -m module
            if j + 1 < len(tokens) and tokens[j] == "-m" and tokens[j + 1] in _MODULES:
                module = tokens[j + 1]
                end = j + 2
                if module == "vllm.entrypoints.cli.main" and tokens[end : end + 1] == ["serve"]:
                    end += 1
                return i, end, _MODULES[module]
        if base in _SERVE_PROGRAMS and tokens[i + 1 : i + 2] == ["serve"]:
            return i, i + 2, _SERVE_PROGRAMS[base]
    return 0, 0, None


def _parse_args(
    engine: str,
    argv: list[str],
    program: tuple[str, ...],
    args: list[str],
    env: dict[str, str],
    launcher: list[str],
    docker: bool,
) -> ServerCommand:
    table = flag_table(engine)
    flags: list[ParsedFlag] = []
    positionals: list[str] = []
    index = 0
    while index < len(args):
        tok = args[index]
        index += 1
        if tok == "--" or not tok.startswith("-") or _NUMBER.match(tok) or tok == "-":
            positionals.append(tok)
            continue
        spelled, eq, inline = tok.partition("=")
        spec = table.lookup(spelled) if table is not None else None
        if spec is None and table is not None and not eq:
            negated = table.negated(spelled)
            if negated is not None:
                flags.append(ParsedFlag(negated.name, spelled, negated=True))
                continue
        if eq:
            name = spec.name if spec is not None else spelled
            flags.append(ParsedFlag(name, spelled, (inline,), True, spec is not None))
            continue
        if spec is not None and spec.type == "bool":
            flags.append(ParsedFlag(spec.name, spelled))
            continue
        values: list[str] = []
        if spec is not None and spec.nargs in {"+", "*"}:
            while index < len(args) and _is_value(args[index]):
                values.append(args[index])
                index += 1
        elif index < len(args) and _is_value(args[index]):
            # An unknown flag followed by a bare word: argparse-style, take it as the value.
            values.append(args[index])
            index += 1
        name = spec.name if spec is not None else spelled
        flags.append(ParsedFlag(name, spelled, tuple(values), known=spec is not None))
    return ServerCommand(
        engine=engine,
        argv=tuple(argv),
        program=program,
        flags=tuple(flags),
        positionals=tuple(positionals),
        env=dict(env),
        launcher=tuple(launcher),
        docker=docker,
    )


def _is_value(token: str) -> bool:
    return not token.startswith("-") or bool(_NUMBER.match(token)) or token == "-"
