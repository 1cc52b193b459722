"""Rule hits → ranked :class:`Hypothesis` values, each testable by one change.

The root rule's changes come first, then those of contextual rules (settings in effect,
server overrides, version warnings) as alternatives. An asynchronous CUDA error that
surfaced at a synchronisation point puts a ``CUDA_LAUNCH_BLOCKING=1`` relaunch first: it
costs one restart and tells which kernel really failed.
"""

from __future__ import annotations

import re

from servedoctor.diagnose.match import Hit
from servedoctor.diagnose.observe import Observations, normalise_flag
from servedoctor.knowledge.propose import Setting, fill_text, propose
from servedoctor.logs.model import Frame
from servedoctor.model import Change, Hypothesis
from servedoctor.textclip import clip

LOCALISE_ID = "LOCALISE"


def setting_of(obs: Observations) -> Setting:
    """The engine, its version and the flags in effect, as the proposer sees them."""
    return Setting(
        engine=obs.engine,
        version=obs.engine_version or obs.release_bound,
        floor=None if obs.engine_version else obs.release_floor,
        value_of=obs.flag,
        shown=lambda name: normalise_flag(name) in obs.config_fields,
        flags_known=any(src in ("command", "config") for src in obs.flag_sources.values()),
        package=obs.distribution,
    )


def from_hits(hits: list[Hit], obs: Observations, *, root: Hit | None) -> list[Hypothesis]:
    """One hypothesis per change; when two rules propose the same change, the more
    confident one speaks for it (in the place the first one took)."""
    out: list[Hypothesis] = []
    seen: dict[tuple[str, str, str | None], int] = {}
    setting = setting_of(obs)
    ordered = ([root] if root else []) + [h for h in hits if h is not root]
    root_line = root.text.line if root and root.text else None
    for hit in ordered:
        # the root's own line speaks with the root's weight (an engine's advice in its message)
        same_line = hit.text is not None and hit.text.line == root_line
        weight = 1.0 if hit is root or same_line else 0.85
        for n, spec in enumerate(hit.rule.changes, start=1):
            change = propose(spec, hit.groups, setting)
            if change is None:
                continue  # not expressible here, out of range, or already in effect
            key = (change.kind, change.name, change.value)
            hypothesis = Hypothesis(
                id=f"{hit.rule.id}.{n}",
                cause=fill_text(spec.cause, hit.groups, setting),
                confidence=round(spec.confidence * weight, 3),
                changes=(change,),
                why=_why(hit),
                references=tuple(hit.rule.references),
                rule=hit.rule.id,
            )
            if key not in seen:
                seen[key] = len(out)
                out.append(hypothesis)
            elif hypothesis.confidence > out[seen[key]].confidence:
                out[seen[key]] = hypothesis
    return out


def _why(hit: Hit) -> str:
    if hit.text is None:
        return f"{hit.rule.name}: conditions in effect"
    return f"{hit.rule.name}: line {hit.text.line}: {clip(hit.text.text, 160)}"


def localise(sync_frame: Frame | None, error_class: str, obs: Observations) -> Hypothesis | None:
    """Relaunch with CUDA_LAUNCH_BLOCKING=1 when an async error's frame is not the culprit."""
    if error_class not in ("device_assert", "illegal_memory_access"):
        return None
    if obs.flag("CUDA_LAUNCH_BLOCKING") == "1":
        return None
    where = (
        f"{sync_frame.func} ({sync_frame.code or sync_frame.file})"
        if sync_frame
        else "the reported frame"
    )
    return Hypothesis(
        id=LOCALISE_ID,
        cause=(
            f"The error is asynchronous and surfaced at {where}, a synchronisation point, "
            "not in the kernel that failed; a blocking relaunch names that kernel."
        ),
        confidence=0.95,
        changes=(Change(kind="env", name="CUDA_LAUNCH_BLOCKING", value="1"),),
        why="CUDA reports kernel faults at the next synchronising call; "
        "CUDA_LAUNCH_BLOCKING=1 makes every launch synchronous.",
        references=(
            "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#concurrent-execution-between-host-and-device",
        ),
        rule=None,
    )


def rank(hypotheses: list[Hypothesis]) -> tuple[Hypothesis, ...]:
    """Localisation first (cheap information), then by confidence, keeping rule order; a
    second value for a setting already offered waits until every other setting has had its
    turn (the first three to try are three different changes)."""
    ordered = sorted(hypotheses, key=lambda h: (h.id != LOCALISE_ID, -h.confidence))
    seen: set[tuple[str, str]] = set()
    first: list[Hypothesis] = []
    again: list[Hypothesis] = []
    for hypothesis in ordered:
        settings = {(c.kind, c.name) for c in hypothesis.changes}
        (again if settings and settings <= seen else first).append(hypothesis)
        seen |= settings
    return tuple(first + again)


#: How many hypotheses a diagnosis offers before class-level fallbacks stop filling in.
ENOUGH = 3
#: How many, counting the similar public failures' fixes that follow the ranked ones (the
#: trials ``fix`` can still afford after them).
ENOUGH_WITH_PRECEDENTS = 6


def fill_up(
    hypotheses: list[Hypothesis], fallbacks: list[Hypothesis], *, enough: int = ENOUGH
) -> list[Hypothesis]:
    """Add the class's generic changes (lower confidence) until there are ``enough``."""
    out = list(hypotheses)
    have = {_target(c) for h in out for c in h.changes}
    for extra in sorted(fallbacks, key=lambda h: -h.confidence):
        if _distinct(out) >= enough:
            break
        targets = {_target(c) for c in extra.changes}
        if not targets & have:
            out.append(extra)
            have.update(targets)
    return out


def _distinct(hypotheses: list[Hypothesis]) -> int:
    """How many different things the hypotheses offer: each setting once, whatever its
    values, and each observation that carries no change."""
    settings = {(c.kind, c.name) for h in hypotheses for c in h.changes}
    return len(settings) + sum(not h.changes for h in hypotheses)


def _target(change: Change) -> tuple[str, str, str | None]:
    """What a change sets: a flag or variable once; each stated version of a package its
    own, but a package described in words ("a release that knows this model") once."""
    stated = change.kind == "package" and bool(_STATED_VERSION.match(change.value or ""))
    return (change.kind, change.name, change.value if stated else None)


_STATED_VERSION = re.compile(r"\s*(?:[<>=!~]=?\s*)?\d")


def why_none(obs: Observations, error_class: str) -> str:
    """One line saying why a diagnosed failure carries no change to try."""
    if obs.engine in (None, "openai", "other"):
        return "the log does not say which server wrote it; pass --engine to spell changes for it"
    return f"no knob of {obs.engine} addresses this {error_class}; see the evidence and references"
