"""The knob vocabulary (``knowledge/knobs.yaml``): what a rule proposes, in no engine's words.

A knob is an intent — "CUDA graphs off", "static memory share", "at most N sequences" — with
the kind of value it takes. Rules name knobs; each engine adapter (``engines/adapter.py``)
spells a knob as that engine's flag or environment variable for the user's version. This
module owns the values: it fills a rule's value template (captured groups, the setting in
effect shifted by a step) and checks the result is in range for the knob's type, so that no
proposal can carry ``--port 184201`` or an unfilled placeholder.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from servedoctor.datafile import load_yaml
from servedoctor.knowledge.facts import FILTERS

KNOBS_FILE = Path(__file__).parent / "knobs.yaml"

ValueKind = Literal["none", "fraction", "int", "port", "choice", "text"]

#: ``{name}``, ``{name-0.05}``, ``{name*0.5}``, ``{flag:name+1}``, ``{module|dist}``.
PLACEHOLDER = re.compile(r"\{([\w:]+)(?:\|(\w+))?(?:([-+*/])(\d+(?:\.\d+)?))?\}")
_NUMBER = re.compile(r"^\s*(\d[\d,_]*(?:\.\d+)?)\s*([KMGT]i?B?)?\s*$", re.IGNORECASE)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Knob(_Strict):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    value: ValueKind
    what: str
    choices: list[str] | None = None
    fields: list[str] = Field(
        default_factory=list, description="config field names engines use for this knob"
    )
    minimum: int = Field(default=1, description="the least value of an int knob (0: none)")

    @model_validator(mode="after")
    def _choices_for_choice(self) -> Knob:
        if (self.value == "choice") != (self.choices is not None):
            raise ValueError(f"knob {self.id}: choices go with value: choice, and only there")
        return self

    def check(self, value: str | None) -> str | None:
        """The value normalised for this knob's type, or ``None`` when it is out of range."""
        if self.value == "none":
            return None if value is not None else ""
        if value is None:
            return None
        if self.value == "fraction":
            number = _to_float(value)
            if number is None or not 0.0 < number <= 1.0:
                return None
            return f"{number:.2f}".rstrip("0").rstrip(".")
        if self.value in ("int", "port"):
            number = _to_float(value)
            least = self.minimum if self.value == "int" else 1
            if number is None or number != int(number) or number < least:
                return None
            if self.value == "port" and number > 65535:
                return None
            return str(int(number))
        if self.value == "choice":
            return value if value in (self.choices or []) else None
        return value or None


class Vocabulary(_Strict):
    knobs: list[Knob]

    @model_validator(mode="after")
    def _unique(self) -> Vocabulary:
        ids = [k.id for k in self.knobs]
        if len(ids) != len(set(ids)):
            raise ValueError("knob ids must be unique")
        return self

    def get(self, knob_id: str) -> Knob | None:
        return next((k for k in self.knobs if k.id == knob_id), None)

    def for_field(self, field: str) -> Knob | None:
        """The knob an engine's config field (``max_model_len``, ``--ctx-size``) sets."""
        name = "_".join(field.strip("-`'\" ").replace("-", "_").lower().split())
        return next((k for k in self.knobs if name in k.fields or name == k.id), None)


@cache
def vocabulary() -> Vocabulary:
    return Vocabulary.model_validate(load_yaml(KNOBS_FILE))


def knob(knob_id: str) -> Knob:
    found = vocabulary().get(knob_id)
    if found is None:
        raise KeyError(f"unknown knob {knob_id!r}")
    return found


def _to_float(text: str) -> float | None:
    m = _NUMBER.match(text)
    if m is None or m.group(2):
        return None
    try:
        return float(m.group(1).replace(",", "").replace("_", ""))
    except ValueError:
        return None


def free_port() -> str:
    """A TCP port nobody listens on at this moment (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def fill(
    template: str | None,
    groups: Mapping[str, str],
    lookup: Callable[[str], str | None],
) -> str | None:
    """Replace each placeholder, or give ``None`` when one has no value.

    ``{name}`` is a group the rule captured, else ``lookup(name)`` (``current`` is the
    setting in effect, ``flag:x`` the flag ``x``); an operator and a number shift it
    (``{current-0.05}``, ``{current*0.5}``), which only numbers allow; ``|filter`` turns a
    captured name into a fact (``{module|dist}``: the distribution that owns a module).
    """
    if template is None:
        return None
    missing = False

    def sub(m: re.Match[str]) -> str:
        nonlocal missing
        key, how, op, operand = m.group(1), m.group(2), m.group(3), m.group(4)
        value = groups.get(key)
        if value is None:
            value = lookup(key)
        if value is not None and how is not None:
            value = FILTERS[how](value) if how in FILTERS else None
        if value is not None and op is not None:
            value = _shift(value, op, float(operand))
        if value is None:
            missing = True
            return m.group(0)
        return value

    filled = PLACEHOLDER.sub(sub, template)
    return None if missing else filled


def _shift(value: str, op: str, operand: float) -> str | None:
    number = _to_float(value)
    if number is None:
        return None
    result = {
        "+": number + operand,
        "-": number - operand,
        "*": number * operand,
        "/": number / operand if operand else number,
    }[op]
    if float(result).is_integer() and "." not in value:
        return str(int(result))
    return f"{result:.2f}".rstrip("0").rstrip(".")
