"""Preflight: fingerprint + arch scan + version facts + the command's flags → risks.

Each risk names the rule (``knowledge/rules/preflight``), the evidence (fact lines, flags,
the GPU) and the change that avoids it. A rule with ``priority >= 80`` is blocking.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from servedoctor.engines.command import ServerCommand, parse_command
from servedoctor.env.arch import Arch
from servedoctor.env.archjudge import Judgement, judge
from servedoctor.env.fatbin import scan_file
from servedoctor.env.fingerprint import Fingerprint
from servedoctor.env.implfacts import device_facts, implementation_facts, pin_facts
from servedoctor.env.ptx import Version, parse_version
from servedoctor.env.serverenv import server_interpreter
from servedoctor.env.stack import stack_libraries
from servedoctor.env.versions import (
    archscan_facts,
    driver_facts,
    model_facts,
    read_model_config,
    torch_arch_facts,
    torch_pin_facts,
    torch_requirements,
    transformers_model_types,
)
from servedoctor.knowledge.propose import Setting, propose
from servedoctor.knowledge.registry import default_registry
from servedoctor.knowledge.schema import Rule
from servedoctor.model import Change
from servedoctor.redact import redact_argv, redact_text

BLOCKING_PRIORITY = 80
Severity = Literal["blocking", "warning"]


# --- the command's flags ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommandFlags:
    """What a preflight rule's ``when.flags`` asks of a command: its flags, read through the
    engine's flag table (aliases and ``--no-x`` forms resolved), and its environment (the
    command's own ``VAR=value`` / ``docker -e`` settings over the caller's)."""

    command: ServerCommand
    environ: Mapping[str, str] = field(default_factory=dict)

    def get(self, name: str) -> tuple[bool, str | None]:
        """(is it set, its value): a flag by ``--name`` (any alias), an env var otherwise.
        A boolean flag that is present reads ``"true"`` (``"false"`` for ``--no-name``)."""
        if name.startswith("-"):
            value = self.command.get(name)
            return value is not None, value
        for env in (self.command.env, self.environ):
            if name in env:
                return True, env[name]
        return False, None

    def value_of(self, name: str) -> str | None:
        """The value in effect of a flag (``--x-y`` or ``x_y``) or an environment variable."""
        if not name.startswith("-") and name.islower():
            name = "--" + name.replace("_", "-")
        return self.get(name)[1]

    def enabled(self, name: str) -> bool:
        """A boolean flag that is set and not negated."""
        present, value = self.get(name)
        return present and value not in ("false", "0")


def scan_command(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> CommandFlags:
    return CommandFlags(parse_command(list(argv)), dict(environ or {}))


# --- risks ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Risk:
    rule: str
    name: str
    severity: Severity
    summary: str
    evidence: tuple[str, ...]
    changes: tuple[Change, ...]
    causes: tuple[str, ...]
    references: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": self.name,
            "severity": self.severity,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "changes": [c.to_dict() for c in self.changes],
            "causes": list(self.causes),
            "references": list(self.references),
        }


def severity_of(rule: Rule) -> Severity:
    return "blocking" if rule.priority >= BLOCKING_PRIORITY else "warning"


def _fill(template: str | None, groups: Mapping[str, str]) -> str | None:
    if template is None:
        return None
    try:
        return template.format_map(dict(groups))
    except (KeyError, IndexError, ValueError):
        return template


def evaluate_rule(
    rule: Rule,
    *,
    facts: Sequence[str],
    command: CommandFlags,
    engine: str | None,
    gpu: Arch | None,
) -> Risk | None:
    """Does ``rule`` fire? Every condition it states must hold."""
    when = rule.when
    if when.engine and engine not in when.engine:
        return None
    if when.arch and (gpu is None or gpu.base.sm not in when.arch):
        return None
    evidence: list[str] = []
    for name, pattern in when.flags.items():
        present, value = command.get(name)
        if not present:
            return None
        if pattern != "*" and not re.search(pattern, value or ""):
            return None
        evidence.append(f"{name} {value}" if name.startswith("-") else f"{name}={value}")
    groups: list[dict[str, str]] = []
    if rule.match:
        hits = [f for f in facts if rule.hit(f)]
        if not hits:
            return None
        if any(not any(r.search(f) for f in facts) for r in rule.match_all_re):
            return None
        evidence = hits + evidence
        for hit in hits:
            found = next((m for r in rule.match_re if (m := r.search(hit))), None)
            groups.append({k: v for k, v in (found.groupdict() if found else {}).items() if v})
    if when.arch and gpu is not None:
        evidence.append(f"GPU {gpu.base.sm}")
    changes: list[Change] = []
    causes: list[str] = []
    setting = Setting(engine=engine, version=None, value_of=command.value_of)
    for spec in rule.changes:
        for g in groups or [{}]:
            change = propose(spec, g, setting)
            if change is not None and change not in changes:
                changes.append(change)
                causes.append(_fill(spec.cause, g) or spec.cause)
    return Risk(
        rule=rule.id,
        name=rule.name,
        severity=severity_of(rule),
        summary=rule.what,
        evidence=tuple(redact_text(e) for e in evidence),
        changes=tuple(changes),
        causes=tuple(causes),
        references=tuple(rule.references),
    )


def evaluate(
    rules: Sequence[Rule],
    *,
    facts: Sequence[str],
    command: CommandFlags,
    engine: str | None,
    gpu: Arch | None,
) -> list[Risk]:
    risks = [
        risk
        for rule in rules
        if rule.area == "preflight" and rule.status != "removed"
        if (risk := evaluate_rule(rule, facts=facts, command=command, engine=engine, gpu=gpu))
    ]
    return sorted(risks, key=lambda r: (r.severity != "blocking", r.rule))


# --- the whole preflight ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PreflightReport:
    engine: str
    argv: tuple[str, ...]
    gpu: Arch | None
    risks: tuple[Risk, ...]
    facts: tuple[str, ...]
    judgements: tuple[Judgement, ...] = ()
    fingerprint: Fingerprint | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def blocking(self) -> bool:
        return any(r.severity == "blocking" for r in self.risks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "command": list(self.argv),
            "gpu": self.gpu.sm if self.gpu else None,
            "blocking": self.blocking,
            "risks": [r.to_dict() for r in self.risks],
            "facts": list(self.facts),
            "libraries": [j.to_dict() for j in self.judgements],
            "fingerprint": self.fingerprint.to_dict() if self.fingerprint else None,
            "notes": list(self.notes),
        }


def scan_stack(
    gpu: Arch,
    *,
    driver_cuda: Version | None = None,
    libraries: Mapping[str, Sequence[Path]] | None = None,
) -> tuple[list[Judgement], dict[str, str]]:
    """Scan and judge the compiled libraries of the installed stack packages (this
    Python's, or ``libraries`` found in the server's)."""
    judgements: list[Judgement] = []
    owners: dict[str, str] = {}
    found = stack_libraries() if libraries is None else libraries
    for package, libs in found.items():
        for lib in libs:
            result = scan_file(lib)
            if result.error or not result.has_device_code:
                continue
            owners[result.file] = package
            judgements.append(judge(result, gpu, driver_cuda=driver_cuda))
    return judgements, owners


def run_preflight(
    argv: Sequence[str],
    *,
    fingerprint: Fingerprint,
    gpu: Arch | None = None,
    model: Path | None = None,
    scan: bool = True,
    environ: Mapping[str, str] | None = None,
    rules: Sequence[Rule] | None = None,
    python: str | None = None,
) -> PreflightReport:
    """Check a server command before it runs. ``gpu`` overrides the detected GPU; ``python``
    the server's interpreter (default: the one the command runs). A ``fingerprint``
    collected in the server's interpreter brings its libraries and torch pins."""
    notes = list(fingerprint.notes)
    gpu = gpu or fingerprint.gpu_arch
    command = scan_command(argv, os.environ if environ is None else environ)
    engine = command.command.engine
    facts: list[str] = driver_facts(fingerprint)
    judgements: list[Judgement] = []
    if gpu is None:
        notes.append("no GPU detected and no --gpu given: arch checks skipped")
    else:
        facts += torch_arch_facts(fingerprint, gpu)
        if scan:
            driver_cuda = parse_version(fingerprint.cuda_driver)
            libraries = fingerprint.stack_libraries() if fingerprint.libraries else None
            judgements, owners = scan_stack(gpu, driver_cuda=driver_cuda, libraries=libraries)
            facts += archscan_facts(judgements, owners)
    torch_version = fingerprint.torch.version if fingerprint.torch else None
    requires = fingerprint.requires_torch if fingerprint.interpreter else None
    facts += torch_pin_facts(torch_version, torch_requirements(requires))
    if model is not None:
        config = read_model_config(model)
        trust = command.enabled("--trust-remote-code")
        facts += model_facts(config, known=transformers_model_types(), trust_remote_code=trust)
    python = python or server_interpreter(command.command.argv)
    facts += implementation_facts(command.value_of, python)
    facts += device_facts(command.value_of, python)
    facts += pin_facts(engine, python)
    all_rules = rules if rules is not None else default_registry().area("preflight")
    risks = evaluate(all_rules, facts=facts, command=command, engine=engine, gpu=gpu)
    return PreflightReport(
        engine=engine,
        argv=tuple(redact_argv(list(argv))),
        gpu=gpu.base if gpu else None,
        risks=tuple(risks),
        facts=tuple(facts),
        judgements=tuple(judgements),
        fingerprint=fingerprint,
        notes=tuple(notes),
    )
