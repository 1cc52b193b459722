"""The schema of a knowledge rule (YAML under ``knowledge/rules/``).

A rule is data, like a semgrep rule: a signature that decides whether it fires, labels it
gives the diagnosis, the documentation ``servedoctor rules show`` prints (written once,
rendered everywhere, like ruff's rule docs), candidate changes and public references.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from servedoctor.knowledge.knobs import vocabulary
from servedoctor.model import ChangeKind
from servedoctor.taxonomy import Component, ErrorClass, Phase

#: hand-written: AREA + 3 digits; generated from a mined message: ENGINE-<8 hex of its key>
RULE_ID = re.compile(r"^(?:[A-Z]{2,6}\d{3}|[A-Z]{2,6}-[0-9A-F]{8})$")
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Labels(_Strict):
    """Labels a rule gives; ``None`` leaves the field to other evidence."""

    error_class: ErrorClass | None = None
    phase: Phase | None = None
    phase_default: Phase | None = Field(
        default=None, description="phase when frames, error text and markers say nothing"
    )
    component: Component | None = None
    culprit: str | None = None


class Conditions(_Strict):
    """Extra conditions: all given ones must hold for the rule to fire."""

    engine: list[str] = Field(default_factory=list)
    engine_or_unknown: bool = Field(
        default=False,
        description="with engine: also fire on a log whose engine is unknown (the matched text "
        "is the engine's own message, so it says which engine wrote it)",
    )
    arch: list[str] = Field(default_factory=list, description="sm_XY values, e.g. sm_120")
    phase: list[Phase] = Field(default_factory=list)
    error_class: list[ErrorClass] = Field(
        default_factory=list, description="fires only when the diagnosis already has one of these"
    )
    component: list[Component] = Field(
        default_factory=list,
        description="with error_class: only when the failure was located in one of these",
    )
    culprit: list[str] = Field(
        default_factory=list,
        description="with error_class: only when one of these libraries or backends is at fault",
    )
    flags: dict[str, str] = Field(
        default_factory=dict,
        description="flag name or knob id → regex its effective value must match "
        "('*' = set at all); a knob id reads any field or spelling the knob goes by",
    )
    at_end: int = Field(
        default=0, ge=0, description="the matching line must be among the log's last N lines"
    )
    before_root: int = Field(
        default=0,
        ge=0,
        description="with error_class: the matching line must be among the N lines up to the "
        "root failure's (what the server was doing when it failed)",
    )
    facts: list[str] = Field(
        default_factory=list,
        description="placeholders ({group|filter}) that must all resolve from the matching "
        "line: the rule fires only where the fact its change needs exists",
    )


class ChangeSpec(_Strict):
    """One candidate change: ONE knob, flag, env var or package pin, and what it tests.

    A rule names a ``knob`` (``knowledge/knobs.yaml``) wherever one exists, and the engine
    adapter spells it for the user's engine and version; ``kind``/``name`` name an
    environment variable or package directly (or a flag of one engine, with ``engines``).
    """

    knob: str | None = Field(
        default=None,
        description="an intent from the knob vocabulary, or {group}: the knob whose config "
        "field the rule captured (a message that names max_model_len → context_length)",
    )
    kind: ChangeKind | None = None
    name: str | None = None
    value: str | None = Field(
        default=None,
        description="may hold {group} (text the rule captured), {current±step} (the knob's "
        "setting in effect, shifted), {flag:name±step} (a flag in effect), {release_before} "
        "(the engine's release before the one the log states), {release_accepting} (the "
        "first release whose parser takes a refused {flag}), {replacement} (the spelling a "
        "release gave a refused {flag} when it renamed or removed it) or {refused_value} "
        "(the value the command gave that flag)",
    )
    default: str | None = Field(default=None, description="value when a placeholder is unknown")
    cause: str = Field(description="the hypothesis this change tests, in one sentence")
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    engines: list[str] = Field(
        default_factory=list, description="only offered for these engines (all when empty)"
    )
    native: bool = Field(
        default=True,
        description="also offered to an engine that is one compiled binary (llama.cpp, Ollama); "
        "false for a generic suspect that does not hold there (their CUDA graphs cover only "
        "single-sequence decode)",
    )

    @model_validator(mode="after")
    def _knob_or_name(self) -> ChangeSpec:
        if self.knob is not None:
            if self.kind is not None or self.name is not None:
                raise ValueError(f"change {self.knob}: a knob change names no kind or name")
            dynamic = self.knob.startswith("{") and self.knob.endswith("}")
            if not dynamic and vocabulary().get(self.knob) is None:
                raise ValueError(f"unknown knob {self.knob!r} (see knowledge/knobs.yaml)")
        elif self.kind is None or self.name is None:
            raise ValueError("a change names a knob, or a kind and a name")
        return self


class Examples(_Strict):
    """Log snippets the rule must fire on, and look-alikes it must not fire on."""

    fires: list[str] = Field(default_factory=list)
    ok: list[str] = Field(default_factory=list)


class Rule(_Strict):
    id: str
    name: str
    status: Literal["preview", "stable", "deprecated", "removed"] = "stable"
    area: Literal["diagnose", "preflight"] = "diagnose"
    priority: int = Field(default=50, description="higher wins when several rules classify")
    fallback: bool = Field(
        default=False,
        description="offered only to fill the hypotheses up to three, for the diagnosis's "
        "class or located component (when.error_class / when.component), no line needed",
    )
    match: list[str] = Field(default_factory=list, description="regexes; any line matching fires")
    match_all: list[str] = Field(
        default_factory=list, description="regexes that must each match some line as well"
    )
    unless: list[str] = Field(default_factory=list, description="regexes that veto a match line")
    when: Conditions = Field(default_factory=Conditions)
    labels: Labels = Field(default_factory=Labels)
    what: str
    why: str
    fix: str
    example: str = ""
    change_safety: str = ""
    changes: list[ChangeSpec] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)
    examples: Examples = Field(default_factory=Examples)

    @field_validator("id")
    @classmethod
    def _id_shape(cls, v: str) -> str:
        if not RULE_ID.match(v):
            raise ValueError(f"rule id {v!r} is not AREA+3 digits (e.g. OOM001)")
        return v

    @field_validator("name")
    @classmethod
    def _kebab(cls, v: str) -> str:
        if not KEBAB.match(v):
            raise ValueError(f"rule name {v!r} is not kebab-case")
        return v

    @field_validator("match", "match_all", "unless")
    @classmethod
    def _regexes_compile(cls, v: list[str]) -> list[str]:
        for pattern in v:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"bad regex {pattern!r}: {exc}") from exc
        return v

    @field_validator("references")
    @classmethod
    def _public_urls(cls, v: list[str]) -> list[str]:
        for url in v:
            if not url.startswith("https://"):
                raise ValueError(f"reference {url!r} is not a public https URL")
        return v

    @model_validator(mode="after")
    def _has_signature(self) -> Rule:
        located = self.when.component or self.when.culprit
        if self.fallback:
            if self.match or not (self.when.error_class or located):
                raise ValueError(f"fallback rule {self.id}: when.error_class/component, no match")
            return self
        staged = bool(self.when.phase and self.when.error_class)  # a class in a phase
        if not (self.match or self.when.flags or self.when.arch or located or staged):
            raise ValueError(f"rule {self.id} has neither a line signature nor a condition")
        if located and not self.when.error_class:
            raise ValueError(
                f"rule {self.id}: when.component/culprit need when.error_class (a diagnosis)"
            )
        return self

    @cached_property
    def match_re(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.match]

    @cached_property
    def match_all_re(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.match_all]

    @cached_property
    def unless_re(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.unless]

    def hit(self, text: str) -> bool:
        """Does this cleaned line match the rule's ``match`` and no ``unless``?"""
        return any(r.search(text) for r in self.match_re) and not any(
            r.search(text) for r in self.unless_re
        )
