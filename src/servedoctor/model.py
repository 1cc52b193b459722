"""The small typed values that cross module boundaries (see DESIGN.md).

They are frozen dataclasses: built once by the module that owns them, then only read.
``to_dict`` gives the JSON contract form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ChangeKind = Literal["flag", "env", "package"]


@dataclass(frozen=True, slots=True)
class Change:
    """One flag, environment variable or package pin, with its value.

    ``value`` is ``None`` for a boolean flag that is switched on by its presence, and
    ``"<remove>"`` (:data:`REMOVE`) for a flag or variable that must be taken away.
    """

    kind: ChangeKind
    name: str
    value: str | None = None

    def describe(self) -> str:
        if self.value == REMOVE:
            return f"drop {self.name}"
        if self.kind == "flag":
            return self.name if self.value is None else f"{self.name} {self.value}"
        if self.kind == "env":
            return f"{self.name}={self.value or ''}"
        return f"{self.name}{'' if self.value is None else ' ' + self.value}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "value": self.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Change:
        value = data.get("value")
        return cls(data.get("kind", "flag"), str(data.get("name", "")), value)


REMOVE = "<remove>"
#: In an environment value: the folder of the program the server command runs (a venv's
#: bin, where pip puts ninja and cmake), filled in when the command is known.
SERVER_BIN = "<the server's bin folder>"


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


@dataclass(frozen=True, slots=True)
class Evidence:
    """A line of the log that supports the diagnosis (1-based line number)."""

    line: int
    text: str
    role: Literal["error", "context", "frame", "clue"] = "context"

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text}


@dataclass(frozen=True, slots=True)
class Hypothesis:
    """A possible cause, tested by exactly one change (or by none: an observation)."""

    id: str
    cause: str
    confidence: float
    changes: tuple[Change, ...] = ()
    why: str = ""
    references: tuple[str, ...] = ()
    rule: str | None = None

    def __post_init__(self) -> None:
        if len(self.changes) > 1:
            raise ValueError(f"hypothesis {self.id} carries {len(self.changes)} changes; one only")

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of DESIGN.md (``diagnose --json``)."""
        return {
            "id": self.id,
            "cause": self.cause,
            "confidence": round(self.confidence, 3),
            "changes": [c.to_dict() for c in self.changes],
            "references": list(self.references),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hypothesis:
        changes = [c for c in data.get("changes") or [] if isinstance(c, Mapping)]
        return cls(
            id=str(data.get("id", "")),
            cause=str(data.get("cause", "")),
            confidence=_number(data.get("confidence")),
            changes=tuple(Change.from_dict(c) for c in changes[:1]),
            why=str(data.get("why", "")),
            references=tuple(str(r) for r in data.get("references") or []),
            rule=data.get("rule"),
        )


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What failed, when, where and why, for one log."""

    file: str
    error_class: str | None
    phase: str | None
    component: str | None
    culprit: str | None
    summary: str
    evidence: tuple[Evidence, ...] = ()
    hypotheses: tuple[Hypothesis, ...] = ()
    rules: tuple[str, ...] = ()
    engine: str | None = None
    sync_point: bool = False
    extras: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def failed(self) -> bool:
        return self.error_class is not None

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of DESIGN.md: exactly these keys, taxonomy values."""
        return {
            "file": self.file,
            "error_class": self.error_class,
            "phase": self.phase,
            "component": self.component,
            "culprit": self.culprit,
            "summary": self.summary,
            "evidence": [e.to_dict() for e in self.evidence],
            "hypotheses": [h.to_dict() for h in self.hypotheses],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnosis:
        """The value back from its JSON form (``to_dict``, or the findings store's fuller
        one); a malformed evidence line or hypothesis is skipped, not fatal."""
        return cls(
            file=str(data.get("file", "")),
            engine=data.get("engine"),
            error_class=data.get("error_class"),
            phase=data.get("phase"),
            component=data.get("component"),
            culprit=data.get("culprit"),
            summary=str(data.get("summary", "")),
            evidence=tuple(
                Evidence(int(e["line"]), str(e.get("text", "")))
                for e in data.get("evidence") or []
                if isinstance(e, Mapping) and isinstance(e.get("line"), int)
            ),
            hypotheses=tuple(
                Hypothesis.from_dict(h)
                for h in data.get("hypotheses") or []
                if isinstance(h, Mapping)
            ),
            rules=tuple(str(r) for r in data.get("rules") or []),
        )
