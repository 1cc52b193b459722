"""A CUDA architecture name: ``sm_90``, ``sm_90a``, ``compute_100f``, ``9.0``, ``sm90``.

``major``/``minor`` are the compute capability; ``variant`` is ``""`` for portable code,
``"a"`` for architecture-specific code and ``"f"`` for family-specific code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from servedoctor.errors import UserError

Variant = Literal["", "a", "f"]

_NAME = re.compile(r"^(?:(sm|compute|lto)_?)?(\d{2,3})([af]?)$")
_DOTTED = re.compile(r"^(\d{1,2})\.(\d)([af]?)$")


@dataclass(frozen=True, slots=True, order=True)
class Arch:
    major: int
    minor: int
    variant: Variant = ""

    @property
    def number(self) -> int:
        """The packed form the toolchain spells: 9.0 → 90, 12.1 → 121."""
        return self.major * 10 + self.minor

    @property
    def sm(self) -> str:
        return f"sm_{self.number}{self.variant}"

    @property
    def compute(self) -> str:
        return f"compute_{self.number}{self.variant}"

    @property
    def base(self) -> Arch:
        """The same compute capability without the ``a``/``f`` suffix (a GPU's own arch)."""
        return Arch(self.major, self.minor)

    @classmethod
    def from_number(cls, number: int, variant: Variant = "") -> Arch:
        return cls(number // 10, number % 10, variant)

    def __str__(self) -> str:
        return self.sm


def parse_arch(text: str) -> Arch:
    """Read ``sm_90a``, ``compute_90``, ``sm90``, ``90``, ``9.0`` or ``12.1``; else UserError."""
    raw = text.strip().lower()
    dotted = _DOTTED.match(raw)
    if dotted:
        return Arch(int(dotted.group(1)), int(dotted.group(2)), _variant(dotted.group(3)))
    named = _NAME.match(raw)
    if not named:
        raise UserError(f"not a CUDA architecture: {text!r} (expected e.g. sm_90, sm_120, 9.0)")
    return Arch.from_number(int(named.group(2)), _variant(named.group(3)))


def _variant(suffix: str) -> Variant:
    if suffix == "a":
        return "a"
    if suffix == "f":
        return "f"
    return ""
