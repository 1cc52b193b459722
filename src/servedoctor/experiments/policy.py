"""The weights ``fix`` uses to rank candidate changes, loaded from ``data/policy.yaml``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from servedoctor.datafile import load_yaml
from servedoctor.model import Change, ChangeKind

POLICY_FILE = Path(__file__).parent / "data" / "policy.yaml"


class ProbeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ChangeKind
    name: str
    value: str | None = None
    why: str
    #: run for every asynchronous CUDA error; otherwise only where a fired rule suggests it
    for_async: bool = False

    def to_change(self) -> Change:
        return Change(kind=self.kind, name=self.name, value=self.value)


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    async_error_classes: list[str]
    probes: list[ProbeSpec]
    probe_value: float = Field(gt=0)
    probe_slowdown: float = Field(ge=1)
    drop_flag_prior: float = Field(ge=0, le=1)
    drop_flag_prior_mentioned: float = Field(ge=0, le=1)
    drop_flag_prior_rule_condition: float = Field(ge=0, le=1)
    finding_confidence: float = Field(ge=0, le=1)
    chosen_setting_odds: float = Field(ge=1)
    env_diff_prior: float = Field(ge=0, le=1)
    env_diff_prior_named: float = Field(ge=0, le=1)
    engine_release_prior: float = Field(ge=0, le=1)
    healthy_factor: float = Field(ge=1)
    healthy_extra_s: float = Field(ge=0)
    package_extra_s: float = Field(ge=0)
    min_cost_s: float = Field(gt=0)
    keep_flags: list[str]


@lru_cache(maxsize=1)
def default_policy() -> Policy:
    return Policy.model_validate(load_yaml(POLICY_FILE))
