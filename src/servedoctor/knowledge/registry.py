"""Loads every rule file under ``knowledge/rules/`` and checks ids are unique."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from servedoctor.datafile import load_yaml
from servedoctor.knowledge.schema import Rule

RULES_DIR = Path(__file__).parent / "rules"


@dataclass(frozen=True)
class Registry:
    rules: tuple[Rule, ...]
    sources: dict[str, Path]

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def get(self, rule_id: str) -> Rule | None:
        wanted = rule_id.upper()
        return next((r for r in self.rules if r.id == wanted or r.name == rule_id), None)

    def area(self, area: str) -> list[Rule]:
        return [r for r in self.rules if r.area == area and r.status != "removed"]


def _load_file(path: Path) -> list[Rule]:
    raw = load_yaml(path)
    docs = raw if isinstance(raw, list) else [raw]
    rules = []
    for doc in docs:
        try:
            rules.append(Rule.model_validate(doc))
        except ValidationError as exc:
            raise ValueError(f"{path}: {exc}") from exc
    return rules


def load_rules(directory: Path | None = None) -> Registry:
    """Read and validate every ``*.yaml`` rule file below ``directory``."""
    root = directory or RULES_DIR
    rules: list[Rule] = []
    sources: dict[str, Path] = {}
    for path in sorted(root.rglob("*.yaml")):
        for rule in _load_file(path):
            if rule.id in sources:
                raise ValueError(f"rule id {rule.id} defined twice: {sources[rule.id]} and {path}")
            sources[rule.id] = path
            rules.append(rule)
    return Registry(rules=tuple(rules), sources=sources)


@lru_cache(maxsize=1)
def default_registry() -> Registry:
    return load_rules()
