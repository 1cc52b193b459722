"""Knowledge rules × observations → rule hits.

A rule fires when one of its ``match`` regexes finds a text (and no ``unless`` vetoes that
text), every ``match_all`` regex finds some text, and its ``when`` conditions hold. Rules
that need a diagnosis first (``when.error_class``) are matched in a second round.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from servedoctor.diagnose.observe import Observations, Text, normalise_flag
from servedoctor.engines.adapter import spellings
from servedoctor.knowledge.knobs import fill, vocabulary
from servedoctor.knowledge.schema import Rule


@dataclass(frozen=True, slots=True)
class Hit:
    rule: Rule
    text: Text | None  # None for rules that fire on conditions alone
    groups: dict[str, str]

    @property
    def line(self) -> int:
        return self.text.line if self.text else 0


def _flag_value(name: str, obs: Observations) -> str | None:
    """The value in effect of a flag, or of a knob (by id) under any name it goes by: the
    config fields engines print for it and this engine's own spellings of it."""
    found = vocabulary().get(name)
    if found is None:
        return obs.flags.get(normalise_flag(name))
    names = [found.id, *found.fields, *(s.target for s in spellings(found.id, obs.engine))]
    for candidate in names:
        value = obs.flags.get(normalise_flag(candidate))
        if value is not None:
            return value
    return None


def _flag_conditions_hold(rule: Rule, obs: Observations) -> bool:
    for name, pattern in rule.when.flags.items():
        value = _flag_value(name, obs)
        if value is None or value in ("None", "false", ""):
            return False
        if pattern != "*" and not re.search(pattern, value):
            return False
    return True


def _static_conditions_hold(rule: Rule, obs: Observations, arch: str | None) -> bool:
    when = rule.when
    unknown_ok = obs.engine is None and when.engine_or_unknown
    if when.engine and (obs.engine or "") not in when.engine and not unknown_ok:
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
    root_line: int | None = None,
) -> list[Hit]:
    """Hits of ``rules``; with ``contextual`` only the rules that need a diagnosis first.

    ``root_line`` is the root failure's line, for rules that look just before it."""
    hits: list[Hit] = []
    # what the diagnosis located, for contextual rules' text ({culprit}, {component})
    located = {
        k: v for k, v in (("culprit", culprit), ("component", component)) if contextual and v
    }
    every = _split(obs.texts)  # shared by the rules; repeats of a string left out
    distinct = every[0] + every[1]
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
            any(_search(r, t) for t in distinct) for r in rule.match_all_re
        ):
            continue
        if not rule.match:
            hits.append(Hit(rule=rule, text=None, groups=dict(located)))
            continue
        if rule.when.before_root:
            if root_line is None:
                continue
            start = root_line - rule.when.before_root
            split = _split([t for t in obs.texts if start <= t.line <= root_line])
        elif rule.when.at_end:
            split = _split([t for t in obs.texts if t.line > obs.last_line - rule.when.at_end])
        else:
            split = every
        hit = _first_text(rule, split)
        if hit is not None:
            hits.append(Hit(hit.rule, hit.text, {**located, **hit.groups}) if located else hit)
    return hits


def _first_text(rule: Rule, split: tuple[list[Text], list[Text]]) -> Hit | None:
    """The earliest matching text; error lines are preferred over the code shown in frames."""
    lines, frames = split
    return _scan(rule, lines) or _scan(rule, frames)


def _split(texts: list[Text]) -> tuple[list[Text], list[Text]]:
    """Non-frame and frame texts, each without later repeats of a string.

    A rule that did not match a string does not match it again, so the first text of each
    string is all :func:`_scan` needs.
    """
    distinct = _distinct(texts)
    lines = [t for t in distinct if t.role != "frame"]
    return lines + _rejoined(lines), [t for t in distinct if t.role == "frame"]


#: A line that a person wrapped: long, and stopped mid-sentence (no closing punctuation).
_WRAPPED_HEAD = re.compile(r"^.{40,}[\w,]$")
#: Its continuation: starts in lower case or with a flag the sentence names, and is no
#: record of its own ("name: ...").
_CONTINUATION = re.compile(r"^\s*(?:[a-z(]|--?[a-z])[^:]{0,30}(?:\s|$)(?![\w.]*:\s)")


def _rejoined(lines: list[Text]) -> list[Text]:
    """Messages that were wrapped over two lines when they were pasted (notes, forums,
    terminals), joined again: a rule's phrase may span the break. They come after the
    lines themselves, so a rule that matches one line still finds that line first."""
    joined: list[Text] = []
    for head, tail in pairwise(lines):
        if (
            tail.line == head.line + 1
            and tail.event is head.event
            and _WRAPPED_HEAD.match(head.text.rstrip())
            and _CONTINUATION.match(tail.text)
        ):
            text = f"{head.text.rstrip()} {tail.text.strip()}"
            joined.append(Text(head.line, text, head.event, head.role))
    return joined


def _distinct(texts: list[Text]) -> list[Text]:
    firsts: dict[tuple[str, bool], Text] = {}
    for t in texts:
        firsts.setdefault((t.text, t.role == "frame"), t)
    return list(firsts.values())


_LEADING_ANY = re.compile(r"^(?:\(\?P<\w+>\.\*\??\)|\.\*\??)")
_GUARDS: dict[str, re.Pattern[str] | None] = {}


def _search(regex: re.Pattern[str], text: Text) -> re.Match[str] | None:
    """``regex.search``, but a pattern that starts with ``.*?`` is first tried without it.

    Such a search is quadratic in the length of a text that does not match (every start,
    every length); what follows the ``.*?`` must match somewhere for the whole to match,
    and finding that is linear.
    """
    if regex.pattern not in _GUARDS:
        m = _LEADING_ANY.match(regex.pattern)
        rest = regex.pattern[m.end() :] if m else ""
        if re.search(r"\\\d|\(\?P=", rest):
            rest = ""  # a back-reference: the groups would be numbered differently
        try:
            _GUARDS[regex.pattern] = re.compile(rest, regex.flags) if rest else None
        except re.error:
            _GUARDS[regex.pattern] = None
    guard = _GUARDS[regex.pattern]
    if guard is not None and guard.search(text.text) is None:
        return None
    return regex.search(text.text)


def _no_lookup(_key: str) -> None:
    return None


def _scan(rule: Rule, texts: list[Text]) -> Hit | None:
    for text in texts:
        for regex in rule.match_re:
            m = _search(regex, text)
            if m is None:
                continue
            if any(_search(u, text) for u in rule.unless_re):
                break
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            if any(fill(fact, groups, _no_lookup) is None for fact in rule.when.facts):
                continue  # this line lacks the fact the rule's change is made of
            return Hit(rule=rule, text=text, groups=groups)
    return None
