"""Knowledge rules × observations → rule hits.

A rule fires when one of its ``match`` regexes finds a text (and no ``unless`` vetoes that
text), every ``match_all`` regex finds some text, and its ``when`` conditions hold. Rules
that need a diagnosis first (``when.error_class``) are matched in a second round.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from servedoctor.diagnose.observe import Observations, Text, normalise_flag
from servedoctor.knowledge.schema import Rule


@dataclass(frozen=True, slots=True)
class Hit:
    rule: Rule
    text: Text | None  # None for rules that fire on conditions alone
    groups: dict[str, str]

    @property
    def line(self) -> int:
        return self.text.line if self.text else 0


def _flag_conditions_hold(rule: Rule, obs: Observations) -> bool:
    for name, pattern in rule.when.flags.items():
        value = obs.flags.get(normalise_flag(name))
        if value is None or value in ("None", "false", ""):
            return False
        if pattern != "*" and not re.search(pattern, value):
            return False
    return True


def _static_conditions_hold(rule: Rule, obs: Observations, arch: str | None) -> bool:
    when = rule.when
    if when.engine and (obs.engine or "") not in when.engine:
        return False
    if when.arch and (arch or "") not in when.arch:
        return False
    return _flag_conditions_hold(rule, obs)


def match_rules(
    rules: Iterable[Rule],
    obs: Observations,
    *,
    arch: str | None = None,
    error_class: str | None = None,
    phase: str | None = None,
    component: str | None = None,
    culprit: str | None = None,
    contextual: bool = False,
) -> list[Hit]:
    """Hits of ``rules``; with ``contextual`` only the rules that need a diagnosis first."""
    hits: list[Hit] = []
    for rule in rules:
        if rule.status == "removed" or rule.area != "diagnose":
            continue
        if bool(rule.when.error_class or rule.fallback) != contextual:
            continue
        if contextual:
            if rule.when.error_class and error_class not in rule.when.error_class:
                continue
            if rule.when.phase and phase not in rule.when.phase:
                continue
            if rule.when.component and component not in rule.when.component:
                continue
            if rule.when.culprit and culprit not in rule.when.culprit:
                continue
        elif rule.when.phase and phase not in rule.when.phase:
            continue
        if not _static_conditions_hold(rule, obs, arch):
            continue
        if rule.match_all and not all(
            any(r.search(t.text) for t in obs.texts) for r in rule.match_all_re
        ):
            continue
        if not rule.match:
            hits.append(Hit(rule=rule, text=None, groups={}))
            continue
        texts = obs.texts
        if rule.when.at_end:
            texts = [t for t in texts if t.line > obs.last_line - rule.when.at_end]
        hit = _first_text(rule, texts)
        if hit is not None:
            hits.append(hit)
    return hits


def _first_text(rule: Rule, texts: list[Text]) -> Hit | None:
    """The earliest matching text; error lines are preferred over the code shown in frames."""
    return _scan(rule, [t for t in texts if t.role != "frame"]) or _scan(
        rule, [t for t in texts if t.role == "frame"]
    )


def _scan(rule: Rule, texts: list[Text]) -> Hit | None:
    for text in texts:
        for regex in rule.match_re:
            m = regex.search(text.text)
            if m is None:
                continue
            if any(u.search(text.text) for u in rule.unless_re):
                break
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            return Hit(rule=rule, text=text, groups=groups)
    return None
