"""Three-way diff: the model card's command, the command used, and what the server did.

Each row is one flag (canonical name). ``status`` says how the three sources relate:

* ``same``: the command used matches the card (and the server kept it);
* ``differs``: the command used sets another value than the card;
* ``missing``: the card sets it, the command used does not;
* ``extra``: the command used sets it, the card does not;
* ``server-changed``: the server ended with another value than the command asked for, or
  picked one on its own (auto-selected backends, dtype overrides); ``why`` explains it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from servedoctor.datafile import load_yaml
from servedoctor.engines.command import ServerCommand
from servedoctor.engines.effective import parse_effective_config
from servedoctor.redact import is_secret_name

__all__ = ["AutoChange", "Comparison", "FlagRow", "compare", "scan_log"]

Status = Literal["same", "differs", "missing", "extra", "server-changed"]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _Change(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    engine: str
    flag: str
    value: str
    pattern: str
    why: str


class _Changes(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    changes: list[_Change]


@lru_cache(maxsize=1)
def _auto_rules() -> list[tuple[_Change, re.Pattern[str]]]:
    path = Path(__file__).parent / "data" / "auto_changes.yaml"
    data = _Changes.model_validate(load_yaml(path))
    return [(c, re.compile(c.pattern)) for c in data.changes]


@dataclass(frozen=True, slots=True)
class AutoChange:
    flag: str
    value: str
    why: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class LogFacts:
    config: dict[str, Any] = field(default_factory=dict)
    config_line: int | None = None
    changes: tuple[AutoChange, ...] = ()


def _expand(template: str, m: re.Match[str]) -> str:
    return re.sub(r"\{(\d+)\}", lambda g: m.group(int(g.group(1))) or "", template)


def scan_log(lines: Iterable[str], *, engine: str) -> LogFacts:
    """The effective config (merged over every dump line) and the server's own changes."""
    config: dict[str, Any] = {}
    config_line: int | None = None
    changes: list[AutoChange] = []
    for number, raw in enumerate(lines, start=1):
        text = _ANSI.sub("", raw.rstrip("\n"))
        parsed = parse_effective_config(text)
        if parsed:
            config.update(parsed)
            config_line = config_line or number
            continue
        seen: set[str] = set()  # one line may set several flags, each once
        for rule, regex in _auto_rules():
            if rule.engine not in {engine, "any"} or rule.flag in seen:
                continue
            m = regex.search(text)
            if m:
                seen.add(rule.flag)
                changes.append(
                    AutoChange(
                        rule.flag,
                        _expand(rule.value, m),
                        _expand(rule.why, m),
                        number,
                        text.strip(),
                    )
                )
    return LogFacts(config, config_line, tuple(changes))


@dataclass(frozen=True, slots=True)
class FlagRow:
    flag: str
    card: str | None
    used: str | None
    effective: str | None
    status: Status
    why: str = ""


@dataclass(frozen=True, slots=True)
class Comparison:
    engine: str
    rows: tuple[FlagRow, ...]
    unknown_flags: tuple[str, ...] = ()
    card_command: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "card_command": self.card_command,
            "unknown_flags": list(self.unknown_flags),
            "rows": [
                {
                    "flag": r.flag,
                    "card": r.card,
                    "used": r.used,
                    "effective": r.effective,
                    "status": r.status,
                    "why": r.why,
                }
                for r in self.rows
            ],
        }


def _config_key(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _norm(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return str(value)


def _same(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip("'\"").lower() == b.strip("'\"").lower()


def _mask(flag: str, value: str | None) -> str | None:
    return "***" if value is not None and is_secret_name(flag) else value


def compare(
    used: ServerCommand,
    *,
    card: ServerCommand | None = None,
    log_lines: Iterable[str] | None = None,
    card_text: str | None = None,
) -> Comparison:
    facts = scan_log(log_lines, engine=used.engine) if log_lines is not None else LogFacts()
    used_set = used.settings()
    card_set = card.settings() if card is not None else {}
    effective: dict[str, str | None] = {}
    for flag in {*used_set, *card_set, *_known_flags(used, facts.config)}:
        key = _config_key(flag)
        if key in facts.config:
            effective[flag] = _norm(facts.config[key])
    auto: dict[str, AutoChange] = {c.flag: c for c in facts.changes}
    rows: list[FlagRow] = []
    flags = sorted({*used_set, *card_set, *auto}, key=lambda f: (f not in card_set, f))
    for flag in flags:
        c, u = card_set.get(flag), used_set.get(flag)
        eff = effective.get(flag)
        change = auto.get(flag)
        if change is not None:
            eff = change.value
        row = _row(flag, c, u, eff, change, card is not None, used)
        rows.append(row)
    # Values the server resolved on its own in its config dump (flag not set anywhere).
    for flag, eff in sorted(effective.items()):
        if flag in used_set or flag in card_set or flag in auto or eff is None:
            continue
        spec = used.spec(flag)
        default = _norm(spec.default) if spec is not None else None
        hint = f" — {spec.help}" if spec is not None and spec.help else ""
        if spec is not None and spec.default is None and _resolvable(flag):
            rows.append(FlagRow(flag, None, None, eff, "server-changed", _CHOSE + hint))
        elif default is not None and not _same(default, eff) and _resolvable(flag):
            why = f"the server overrode its default ({default}){hint}"
            rows.append(FlagRow(flag, None, None, eff, "server-changed", why))
    masked = tuple(
        FlagRow(
            r.flag,
            _mask(r.flag, r.card),
            _mask(r.flag, r.used),
            _mask(r.flag, r.effective),
            r.status,
            r.why,
        )
        for r in rows
    )
    return Comparison(used.engine, masked, used.unknown, card_text)


_CHOSE = "not set on the command line: the server chose this value"

#: Settings whose automatic value matters for bring-up (backends, dtypes, memory, graphs).
_RESOLVABLE = re.compile(
    r"backend|dtype|quantization|page.size|cuda.graph|chunked.prefill|mem.fraction|"
    r"max.running|context.length|max.model.len|enforce.eager|dp.attention|max.num"
)


def _resolvable(flag: str) -> bool:
    return bool(_RESOLVABLE.search(flag))


def _known_flags(cmd: ServerCommand, config: Mapping[str, Any]) -> list[str]:
    table = cmd.table
    if table is None:
        return []
    return [spec.name for spec in table.flags if _config_key(spec.name) in config]


def _row(
    flag: str,
    card: str | None,
    used: str | None,
    eff: str | None,
    change: AutoChange | None,
    have_card: bool,
    cmd: ServerCommand,
) -> FlagRow:
    asked = used
    if asked is None:
        spec = cmd.spec(flag)
        asked = _norm(spec.default) if spec is not None else None
    if change is not None and not _same(asked, eff):
        return FlagRow(
            flag, card, used, eff, "server-changed", f"{change.why} (log line {change.line})"
        )
    if eff is not None and used is not None and not _same(used, eff):
        return FlagRow(
            flag,
            card,
            used,
            eff,
            "server-changed",
            "the server's effective config differs from the command line",
        )
    if have_card:
        if card is None and used is not None:
            return FlagRow(flag, card, used, eff, "extra", "not in the model card's command")
        if used is None and card is not None:
            return FlagRow(
                flag,
                card,
                used,
                eff,
                "missing",
                "the model card sets it; the command used does not",
            )
        if not _same(card, used):
            return FlagRow(
                flag, card, used, eff, "differs", "the command used differs from the model card"
            )
    return FlagRow(flag, card, used, eff, "same")
