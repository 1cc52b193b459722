"""Loads ``frames.yaml``: frame → phase, path/kernel → component and culprit, sync points."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servedoctor.datafile import load_yaml
from servedoctor.taxonomy import Component, Phase


class _PhaseRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    phase: Phase
    pattern: str


class _ComponentRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str
    component: Component | None
    culprit: str | None


class _Tables(BaseModel):
    model_config = ConfigDict(extra="forbid")
    phases: list[_PhaseRow]
    text_phases: list[_PhaseRow]
    engine_init: str
    lifecycle: list[Phase]
    components: list[_ComponentRow]
    sync_points: str


@dataclass(frozen=True, slots=True)
class PhaseRule:
    phase: str
    regex: re.Pattern[str]


@dataclass(frozen=True, slots=True)
class ComponentRule:
    regex: re.Pattern[str]
    component: str | None
    culprit: str | None


@dataclass(frozen=True, slots=True)
class Tables:
    phases: tuple[PhaseRule, ...]
    text_phases: tuple[PhaseRule, ...]
    engine_init: re.Pattern[str]
    lifecycle: frozenset[str]
    components: tuple[ComponentRule, ...]
    sync_points: re.Pattern[str]

    def phase_of_frame(self, where: str) -> str | None:
        return next((r.phase for r in self.phases if r.regex.search(where)), None)

    def phase_of_text(self, text: str) -> str | None:
        return next((r.phase for r in self.text_phases if r.regex.search(text)), None)

    def components_of(self, text: str) -> list[ComponentRule]:
        return [r for r in self.components if r.regex.search(text)]


@lru_cache(maxsize=1)
def tables() -> Tables:
    raw = load_yaml(Path(__file__).parent / "frames.yaml")
    data = _Tables.model_validate(raw)
    return Tables(
        phases=tuple(PhaseRule(r.phase, re.compile(r.pattern)) for r in data.phases),
        text_phases=tuple(PhaseRule(r.phase, re.compile(r.pattern)) for r in data.text_phases),
        engine_init=re.compile(data.engine_init),
        lifecycle=frozenset(data.lifecycle),
        components=tuple(
            ComponentRule(re.compile(r.pattern), r.component, r.culprit) for r in data.components
        ),
        sync_points=re.compile(data.sync_points),
    )
