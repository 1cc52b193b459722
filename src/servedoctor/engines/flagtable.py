"""Flag tables: each server's command-line flags as data (``engines/flags/<engine>.yaml``).

A table gives every flag its canonical name, aliases, type, allowed values, default and help,
so that a command can be parsed, checked and rendered back without guessing which tokens
are values. Only the bring-up flags are listed; anything else is reported as unknown.
"""

from __future__ import annotations

from functools import cache, cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from servedoctor.datafile import load_yaml

FLAGS_DIR = Path(__file__).parent / "flags"

FlagType = Literal["str", "int", "float", "bool", "json"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FlagSpec(_Strict):
    """One flag: ``name`` is the canonical spelling (``--tp-size``)."""

    name: str = Field(pattern=r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
    aliases: list[str] = Field(default_factory=list)
    type: FlagType = "str"
    nargs: Literal["1", "+", "*"] = Field(default="1", description="values a flag takes")
    choices: list[str] | None = None
    default: Any = None
    negatable: bool = Field(default=False, description="bool with a --no-NAME form (vLLM)")
    help: str = ""

    @property
    def spellings(self) -> list[str]:
        return [self.name, *self.aliases]

    def convert(self, raw: str | None) -> Any:
        """The typed value of a raw string (``None`` = a bare boolean flag)."""
        if self.type == "bool":
            if raw is None:
                return True
            low = raw.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError(f"{self.name} expects true/false, got {raw!r}")
        if raw is None:
            return None
        if self.type == "int":
            return int(raw.replace("_", ""))
        if self.type == "float":
            return float(raw)
        return raw


class FlagTable(_Strict):
    """Every known flag of one engine, plus its positional arguments (``vllm serve MODEL``)."""

    engine: str
    source: str = Field(description="where the flags were read, for maintainers")
    positionals: list[str] = Field(
        default_factory=list,
        description="canonical flag each positional argument stands for, in order",
    )
    flags: list[FlagSpec]

    @model_validator(mode="after")
    def _unique(self) -> FlagTable:
        seen: set[str] = set()
        for spec in self.flags:
            for spelling in spec.spellings:
                if spelling in seen:
                    raise ValueError(f"{self.engine}: flag {spelling} listed twice")
                seen.add(spelling)
        for pos in self.positionals:
            if pos not in seen:
                raise ValueError(f"{self.engine}: positional {pos} is not a listed flag")
        return self

    @cached_property
    def _by_spelling(self) -> dict[str, FlagSpec]:
        table: dict[str, FlagSpec] = {}
        for spec in self.flags:
            for spelling in spec.spellings:
                table[spelling] = spec
                # argparse accepts underscores and dashes alike in vLLM and SGLang.
                table[spelling.replace("_", "-")] = spec
        return table

    def lookup(self, spelling: str) -> FlagSpec | None:
        """The flag a spelling names: canonical, alias, ``_``/``-`` variant."""
        return self._by_spelling.get(spelling) or self._by_spelling.get(spelling.replace("_", "-"))

    def negated(self, spelling: str) -> FlagSpec | None:
        """The negatable boolean a ``--no-NAME`` spelling switches off, if any."""
        if not spelling.startswith("--no-"):
            return None
        spec = self.lookup("--" + spelling[len("--no-") :])
        return spec if spec is not None and spec.negatable else None

    def canonical(self, spelling: str) -> str:
        spec = self.lookup(spelling)
        return spec.name if spec is not None else spelling


@cache
def flag_table(engine: str) -> FlagTable | None:
    """The flag table of ``engine``, or ``None`` when servedoctor has none for it."""
    path = FLAGS_DIR / f"{engine}.yaml"
    if not path.is_file():
        return None
    return FlagTable.model_validate(load_yaml(path))


def known_tables() -> list[str]:
    return sorted(p.stem for p in FLAGS_DIR.glob("*.yaml"))
