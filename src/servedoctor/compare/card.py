"""Launch commands recommended by a model card: fenced code blocks of a README.md.

Shell lines are joined at backslash continuations, comments dropped, and each command that
starts an engine (directly, with env prefixes, or inside ``docker run``) is parsed with
:func:`servedoctor.engines.command.parse_command`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from servedoctor.engines.command import ServerCommand, parse_command
from servedoctor.errors import UserError

__all__ = ["CardCommand", "card_commands"]

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
_ENGINE_HINT = re.compile(
    r"sglang\.launch_server|\bsglang\s+serve\b|\bvllm\s+serve\b|vllm\.entrypoints|"
    r"vllm/vllm-openai|lmsysorg/sglang|\btransformers\s+serve\b"
)


@dataclass(frozen=True, slots=True)
class CardCommand:
    line: int  # 1-based line of the block's first command line
    text: str
    command: ServerCommand


def _logical_lines(block: str, first_line: int) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    buf, start = "", first_line
    for offset, raw in enumerate(block.splitlines()):
        line = raw.rstrip()
        stripped = line.lstrip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if not buf:
            start = first_line + offset
            stripped = re.sub(r"^\$\s+", "", stripped)
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        out.append((start, buf))
        buf = ""
    if buf:
        out.append((start, buf))
    return out


def card_commands(path: Path) -> list[CardCommand]:
    """Every engine launch command in the README's fenced code blocks, in order."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UserError(f"cannot read model card {path}: {exc.strerror or exc}") from None
    found: list[CardCommand] = []
    for block in _FENCE.finditer(text):
        body = block.group(3)
        first = text.count("\n", 0, block.start(3)) + 1
        for line, cmd in _logical_lines(body, first):
            if not _ENGINE_HINT.search(cmd):
                continue
            try:
                argv = shlex.split(cmd, comments=True)
            except ValueError:
                continue
            argv = _first_command(argv)
            try:
                command = parse_command(argv)
            except UserError:
                continue
            if command.table is not None:  # an engine entry point, not `docker pull ...`
                found.append(CardCommand(line, cmd, command))
    return found


def _first_command(argv: list[str]) -> list[str]:
    """Cut at shell operators (``&&``, ``|``, ``;``) keeping the part that runs an engine."""
    parts: list[list[str]] = [[]]
    for tok in argv:
        if tok in {"&&", "||", "|", ";", "&"}:
            parts.append([])
        else:
            parts[-1].append(tok)
    for part in parts:
        if part and _ENGINE_HINT.search(" ".join(part)):
            return part
    return argv
