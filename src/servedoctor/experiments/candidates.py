"""Candidate changes for a failed run, each with a prior, a cost and a reason.

Sources, strongest first: the diagnosis' hypotheses (one change each), the ``changes`` of
the knowledge rules that fired, changes that fixed the same failure on a matching
fingerprint before (the findings store), a localising probe for asynchronous CUDA errors,
one generic "drop this flag" per flag the command sets away from its default — which is
how ``fix`` finds a single bad flag no rule knows about — and, where ``fix`` may install
packages, the engine's previous release (a regression of the engine itself).

prior = confidence × past success rate, the rate Laplace-smoothed: (s + 1) / (n + 2).
cost  = expected seconds of the trial: a failure costs about the failing run's time, a
        success runs through start-up and the smoke test.
Candidates are ordered by value per cost (value = prior for a fix, the probe's value for a
probe): for a single cause that is the order that minimises the expected time to the fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from servedoctor.engines.adapter import knobs_of
from servedoctor.engines.spec import engine_distribution
from servedoctor.experiments.command import (
    CommandLike,
    SetFlag,
    canonical,
    knows_flag,
    set_flags,
    value_of,
)
from servedoctor.experiments.overlay import requirement_of
from servedoctor.experiments.policy import Policy, default_policy
from servedoctor.knowledge.knobs import knob
from servedoctor.knowledge.propose import Setting, fill_text, propose
from servedoctor.knowledge.registry import Registry, default_registry
from servedoctor.knowledge.versionwords import release_before
from servedoctor.model import REMOVE, Change, Diagnosis

__all__ = ["Candidate", "ChangeHistory", "build_candidates", "change_key"]

Source = Literal["hypothesis", "rule", "finding", "probe", "drop-flag", "env-diff", "release"]


@dataclass(frozen=True, slots=True)
class ChangeHistory:
    """What past findings say about one change for this failure on this fingerprint."""

    successes: int = 0
    tries: int = 0

    @property
    def rate(self) -> float:
        return (self.successes + 1) / (self.tries + 2)


@dataclass(frozen=True, slots=True)
class Candidate:
    change: Change
    prior: float
    cost_s: float
    source: Source
    why: str
    value: float
    rule: str | None = None
    runnable: bool = True

    @property
    def score(self) -> float:
        """Expected value per second of trial."""
        return self.value / self.cost_s

    @property
    def is_probe(self) -> bool:
        return self.source == "probe"

    def to_dict(self) -> dict[str, Any]:
        return {
            "change": self.change.to_dict(),
            "prior": round(self.prior, 4),
            "cost_s": round(self.cost_s, 2),
            "score": round(self.score, 5),
            "source": self.source,
            "why": self.why,
            "rule": self.rule,
            "runnable": self.runnable,
        }


def change_key(change: Change) -> tuple[str, str, str | None]:
    return (change.kind, change.name, change.value)


_PLACEHOLDER = re.compile(r"\{[\w:+.-]+\}")


def _compact(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


_TRIVIAL = re.compile(r"[\d.]+|true|false|auto|none|yes|no")


def _mentioned(flag: SetFlag, text: str) -> bool:
    """Does the error evidence name this flag or its value? Compared with separators
    removed, so ``flash_attention_2`` matches ``FlashAttention2`` and
    ``--attn-implementation`` matches ``_check_and_adjust_attn_implementation``."""
    haystack = _compact(text)
    name = _compact(flag.name)
    if len(name) >= 10 and name in haystack:
        return True
    value = _compact(flag.value or "")
    if len(value) < 4 or _TRIVIAL.fullmatch(value):
        return False
    if len(value) >= 8:
        return value in haystack
    # a short value must appear as a word of its own ("cuda" in "compiled with CUDA enabled")
    return re.search(rf"(?<![a-z0-9]){re.escape(value)}(?![a-z0-9])", text.lower()) is not None


def _is_noop(
    change: Change, flags: list[SetFlag], env: Mapping[str, str], command: CommandLike
) -> bool:
    if change.kind == "env":
        current = env.get(change.name)
        return current is None if change.value == REMOVE else current == (change.value or "")
    if change.kind == "flag":
        name = canonical(command, change.name)
        same = [f for f in flags if f.name == name]
        if change.value == REMOVE:
            return not same
        return bool(same) and all(f.value == change.value for f in same)
    return False


def _package_named(package: str, text: str) -> bool:
    """Does the failure's text name the package (as installed or as imported)?"""
    forms = {package.lower(), package.lower().replace("-", "_"), package.lower().replace("_", "-")}
    return any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text) for f in forms)


def _diagnosis_text(diagnosis: Diagnosis) -> str:
    return "\n".join([diagnosis.summary, *(e.text for e in diagnosis.evidence)])


def build_candidates(
    *,
    diagnosis: Diagnosis,
    command: CommandLike,
    base_cost_s: float,
    rules: Registry | None = None,
    history: Mapping[Change, ChangeHistory] | None = None,
    policy: Policy | None = None,
    environ: Mapping[str, str] | None = None,
    engine_version: str | None = None,
    packages: bool = False,
    moved: Sequence[Change] = (),
    moved_aliases: Mapping[str, Sequence[str]] | None = None,
    resolve: Callable[[Change], Change | None] | None = None,
) -> list[Candidate]:
    """All candidate changes for ``diagnosis`` of ``command``, best first (never empty-changed).

    ``resolve`` turns a package change whose version is stated as evidence ("the release
    before 0.6.4") into a concrete requirement before it becomes a candidate.
    """
    policy = policy or default_policy()
    rules = rules if rules is not None else default_registry()
    history = history or {}
    env = {**(os.environ if environ is None else environ), **command.env}
    flags = set_flags(command)
    in_command = {f.name for f in flags}
    chosen = _chosen_knobs(command, in_command)
    # an asynchronous error surfaces at a sync point: which setting it implicates is not
    # known until the probe localises it, so a setting the user chose earns nothing yet
    is_async = diagnosis.error_class in policy.async_error_classes
    t_fail = max(base_cost_s, policy.min_cost_s)
    t_ok = t_fail * policy.healthy_factor + policy.healthy_extra_s

    def cost(change: Change, prior: float) -> float:
        extra = policy.package_extra_s if change.kind == "package" else 0.0
        return prior * t_ok + (1.0 - prior) * t_fail + extra

    found: dict[tuple[str, str, str | None], Candidate] = {}

    probe_keys = {change_key(p.to_change()) for p in policy.probes}
    suggested_probes: dict[tuple[str, str, str | None], float] = {}

    def add(change: Change, confidence: float, source: Source, why: str, rule: str | None) -> None:
        if packages and resolve is not None and requirement_of(change) is None:
            concrete = resolve(change)
            if concrete is not None:
                why = f"{why} ({change.value}: {concrete.value})"
                change = concrete
        if _PLACEHOLDER.search(change.name) or _PLACEHOLDER.search(change.value or ""):
            return  # a rule template the diagnosis could not fill: nothing concrete to try
        if change.kind == "flag" and not knows_flag(command, change.name):
            return  # not a flag of this engine
        if _is_noop(change, flags, env, command):
            return
        if change_key(change) in probe_keys:  # a probe is information, not a fix
            key = change_key(change)
            suggested_probes[key] = max(confidence, suggested_probes.get(key, 0.0))
            return
        confidence = max(0.0, min(1.0, confidence))
        if not is_async and _retunes(change, command, chosen):
            confidence = _raise_odds(confidence, policy.chosen_setting_odds)
            why = f"{why} (the command sets it)"
        past = history.get(change, ChangeHistory())  # this machine's record weighs in last
        prior = confidence * past.rate
        if past.tries:
            why = f"{why} (fixed {past.successes} of {past.tries} times before)"
        cand = Candidate(
            change=change,
            prior=prior,
            cost_s=cost(change, prior),
            source=source,
            why=why,
            value=prior,
            rule=rule,
            runnable=change.kind != "package" or (packages and requirement_of(change) is not None),
        )
        key = _knob_key(change, command.engine) or change_key(change)
        held = found.get(key)
        if held is None or _better(cand, held, in_command):
            found[key] = replace(cand, prior=max(cand.prior, held.prior)) if held else cand

    setting = Setting(
        engine=command.engine,
        version=engine_version,
        value_of=lambda name: value_of(command, name),
    )
    for hyp in diagnosis.hypotheses:
        for change in hyp.changes:
            add(change, hyp.confidence, "hypothesis", hyp.cause or hyp.why, hyp.rule)

    located = {
        k: v for k, v in (("culprit", diagnosis.culprit), ("component", diagnosis.component)) if v
    }
    implicated: set[str] = set()
    for rule_id in diagnosis.rules:
        rule = rules.get(rule_id)
        if rule is None:
            continue
        implicated.update(rule.when.flags)
        for spec in rule.changes:
            proposed = propose(spec, located, setting)
            if proposed is not None:
                why = fill_text(spec.cause, located, setting)
                add(proposed, spec.confidence, "rule", why, rule.id)

    server = engine_distribution(command.engine)
    if packages and server is not None and diagnosis.error_class is not None:
        # the engine's own previous release: a regression explains what no setting does
        before = release_before(engine_version) if engine_version else "another release"
        add(
            Change("package", server, before),
            policy.engine_release_prior,
            "release",
            f"a regression of {server} {engine_version or ''}".rstrip(),
            None,
        )

    text = _diagnosis_text(diagnosis)
    for change in moved:  # back to the version of the last healthy run
        lowered = text.lower()
        aliases = (moved_aliases or {}).get(change.name, ())
        named = any(_package_named(n, lowered) for n in (change.name, *aliases) if len(n) > 2)
        conf = policy.env_diff_prior_named if named else policy.env_diff_prior
        why = "changed since it last worked" + (" and the failure names it" if named else "")
        add(change, conf, "env-diff", why, None)

    for change, past in history.items():
        if past.successes:
            add(
                change, policy.finding_confidence, "finding", "a past finding on this machine", None
            )

    for probe in policy.probes:
        change = probe.to_change()
        key = change_key(change)
        wanted = (is_async and probe.for_async) or key in suggested_probes
        if _is_noop(change, flags, env, command) or not wanted:
            continue
        found[key] = Candidate(
            change=change,
            prior=0.0,
            cost_s=t_fail * policy.probe_slowdown,
            source="probe",
            why=probe.why,
            # full value for an asynchronous error; otherwise as much as the rule trusts it
            value=policy.probe_value
            * (1.0 if is_async and probe.for_async else suggested_probes[key]),
        )

    keep = set(policy.keep_flags)
    for flag in flags:
        if flag.name in keep or flag.is_default:
            continue
        if flag.name in implicated:
            conf, why = policy.drop_flag_prior_rule_condition, "a rule that fired names this flag"
        elif _mentioned(flag, text):
            conf, why = policy.drop_flag_prior_mentioned, "the error evidence names this flag"
        else:
            conf, why = policy.drop_flag_prior, "a non-default flag; dropping it is a cheap test"
        add(Change("flag", flag.name, REMOVE), conf, "drop-flag", why, None)

    return rank(found.values())


def _chosen_knobs(command: CommandLike, in_command: set[str]) -> set[str]:
    """The settings the user chose: flag and env names set on the command line, and the
    knobs they spell."""
    names = in_command | set(command.env)
    return names | {k for name in names for k in knobs_of(name, command.engine)}


def _retunes(change: Change, command: CommandLike, chosen: set[str]) -> bool:
    """Does ``change`` give a new value to a setting the command chose (in any spelling)?
    An engine's defaults work on most machines; a value the user picked is the likelier
    culprit when a rule proposes moving it."""
    if change.kind not in ("flag", "env") or change.value == REMOVE:
        return False
    name = canonical(command, change.name) if change.kind == "flag" else change.name
    return name in chosen or bool(knobs_of(change.name, command.engine) & chosen)


def _raise_odds(prior: float, factor: float) -> float:
    if prior <= 0.0 or prior >= 1.0:
        return prior
    odds = prior / (1.0 - prior) * factor
    return odds / (1.0 + odds)


def _knob_key(change: Change, engine: str | None) -> tuple[str, str, str | None] | None:
    """Two spellings of one knob (``--cuda-graph-max-bs 32`` and ``--cuda-graph-max-bs-decode
    32``) are one trial: the knob and its value, the value left out for a switch."""
    if change.kind not in ("flag", "env") or change.value == REMOVE:
        return None
    knobs = knobs_of(change.name, engine)
    if len(knobs) != 1:
        return None
    (knob_id,) = knobs
    return ("knob", knob_id, None if knob(knob_id).value == "none" else change.value)


def _better(new: Candidate, held: Candidate, in_command: set[str]) -> bool:
    """Of two candidates for one trial: the spelling the command already uses, else the
    more likely one."""
    if (new.change.name in in_command) != (held.change.name in in_command):
        return new.change.name in in_command
    return new.prior > held.prior


def rank(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Runnable candidates by value per cost (stable), then the ones needing a human."""
    items = list(candidates)
    order = {id(c): i for i, c in enumerate(items)}
    return sorted(items, key=lambda c: (not c.runnable, -c.score, -c.prior, order[id(c)]))
