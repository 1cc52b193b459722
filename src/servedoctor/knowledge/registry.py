"""Loads every rule file under ``knowledge/rules/`` and checks ids are unique."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from servedoctor.datafile import load_yaml
from servedoctor.errors import UserError
from servedoctor.knowledge.schema import Rule

RULES_DIR = Path(__file__).parent / "rules"


class RuleFileError(UserError, ValueError):
    """A rule file that does not parse, does not fit the schema, or reuses an id: the CLI
    names the file in one line (exit 2) instead of a traceback."""


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
    try:
        raw = load_yaml(path)
    except UnicodeDecodeError as exc:
        raise RuleFileError(
            f"{path}: not UTF-8 text (byte {exc.start}); rules are UTF-8 YAML"
        ) from exc
    except (OSError, yaml.YAMLError) as exc:
        raise RuleFileError(f"{path}: not readable YAML: {' '.join(str(exc).split())}") from exc
    docs = raw if isinstance(raw, list) else [raw]
    rules = []
    for doc in docs:
        try:
            rules.append(Rule.model_validate(doc))
        except ValidationError as exc:
            where = doc.get("id", "?") if isinstance(doc, dict) else "?"
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'rule'}: {e['msg']}" for e in exc.errors()
            )
            raise RuleFileError(f"{path}: rule {where}: {problems}") from exc
    return rules


def load_rules(directory: Path | None = None) -> Registry:
    """Read and validate every ``*.yaml`` rule file below ``directory``."""
    root = directory or RULES_DIR
    rules: list[Rule] = []
    sources: dict[str, Path] = {}
    for path in sorted(root.rglob("*.yaml")):
        for rule in _load_file(path):
            if rule.id in sources:
                raise RuleFileError(
                    f"rule id {rule.id} defined twice: {sources[rule.id]} and {path}"
                )
            sources[rule.id] = path
            rules.append(rule)
    if directory is None:
        from servedoctor.knowledge.mined import MINED_DIR, mined_rules

        for rule in mined_rules():
            sources[rule.id] = MINED_DIR / f"{rule.when.engine[0]}.yaml"
            rules.append(rule)
    return Registry(rules=tuple(rules), sources=sources)


@lru_cache(maxsize=1)
def default_registry() -> Registry:
    return load_rules()
