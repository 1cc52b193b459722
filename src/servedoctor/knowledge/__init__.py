"""Knowledge rules: failure signatures kept as YAML data with a pydantic schema."""

from __future__ import annotations

from servedoctor.knowledge.registry import Registry, load_rules
from servedoctor.knowledge.schema import ChangeSpec, Conditions, Labels, Rule

__all__ = ["ChangeSpec", "Conditions", "Labels", "Registry", "Rule", "load_rules"]
