"""Run each rule's own examples through the real diagnosis (``servedoctor rules test``)."""

from __future__ import annotations

from servedoctor.knowledge.registry import Registry


def run_examples(registry: Registry) -> list[str]:
    """Failure messages; empty when every example behaves."""
    from servedoctor.diagnose.api import diagnose_text

    failures: list[str] = []
    for rule in registry:
        for n, snippet in enumerate(rule.examples.fires, start=1):
            diagnosis = diagnose_text(snippet, name=f"{rule.id}:fires[{n}]", registry=registry)
            if rule.id not in diagnosis.rules:
                failures.append(f"{rule.id}: did not fire on example {n}: {snippet[:80]!r}")
        for n, snippet in enumerate(rule.examples.ok, start=1):
            diagnosis = diagnose_text(snippet, name=f"{rule.id}:ok[{n}]", registry=registry)
            if rule.id in diagnosis.rules:
                failures.append(f"{rule.id}: fired on look-alike {n}: {snippet[:80]!r}")
    return failures
