"""A rule's documentation, written once in its YAML and rendered here (like ``ruff rule``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servedoctor.knowledge.schema import Rule


def _source(path: Path) -> str:
    parts = path.parts
    return "/".join(parts[parts.index("knowledge") :]) if "knowledge" in parts else str(path)


def rule_markdown(rule: Rule, source: Path) -> str:
    labels = (
        " · ".join(
            v
            for v in (
                rule.labels.error_class,
                rule.labels.phase,
                rule.labels.component,
                rule.labels.culprit,
            )
            if v
        )
        or "contextual (adds hypotheses to a diagnosis)"
    )
    lines = [
        f"# {rule.name} ({rule.id})",
        f"{labels} · {rule.status} · {_source(source)}",
        "## What it does",
        rule.what.strip(),
        "## Why it fails",
        rule.why.strip(),
        "## How to fix it",
        rule.fix.strip(),
    ]
    if rule.example:
        lines += ["## Example", f"```\n{rule.example.strip()}\n```"]
    if rule.changes:
        lines.append("## Suggested changes (one per trial)")
        for c in rule.changes:
            target = c.knob if c.knob else c.name
            shown = target if c.value is None else f"{target} {c.value}"
            what = "knob" if c.knob else c.kind
            lines.append(f"- {what} `{shown}` (confidence {c.confidence:.2f}): {c.cause}")
    if rule.change_safety:
        lines += ["## Change safety", rule.change_safety.strip()]
    if rule.references:
        lines.append("## References")
        lines += [f"- <{url}>" for url in rule.references]
    return "\n\n".join(lines) + "\n"


def rule_record(rule: Rule, source: Path) -> dict[str, Any]:
    record = rule.model_dump(mode="json", exclude={"examples"})
    record["source"] = _source(source)
    return record
