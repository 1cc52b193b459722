"""Rule hits → ranked :class:`Hypothesis` values, each testable by one change.

The root rule's changes come first, then those of contextual rules (settings in effect,
server overrides, version warnings) as alternatives. An asynchronous CUDA error that
surfaced at a synchronisation point puts a ``CUDA_LAUNCH_BLOCKING=1`` relaunch first: it
costs one restart and tells which kernel really failed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from servedoctor.diagnose.match import Hit
from servedoctor.diagnose.observe import Observations
from servedoctor.logs.events import Frame
from servedoctor.model import Change, Hypothesis

LOCALISE_ID = "LOCALISE"
_PLACEHOLDER = re.compile(r"\{([\w:]+)([+-]\d+(?:\.\d+)?)?\}")


def _fill(template: str | None, groups: Mapping[str, str], obs: Observations) -> str | None:
    """Replace ``{group}`` by the rule's captured text and ``{flag:name}`` by a flag value."""
    if template is None:
        return None
    missing = False

    def sub(m: re.Match[str]) -> str:
        nonlocal missing
        key, step = m.group(1), m.group(2)
        value = obs.flag(key[5:]) if key.startswith("flag:") else groups.get(key)
        if value is not None and step is not None:
            try:
                value = f"{float(value) + float(step):.2f}".rstrip("0").rstrip(".")
            except ValueError:
                value = None
        if value is None:
            missing = True
            return m.group(0)
        return value

    filled = _PLACEHOLDER.sub(sub, template)
    return None if missing else filled


def from_hits(hits: list[Hit], obs: Observations, *, root: Hit | None) -> list[Hypothesis]:
    out: list[Hypothesis] = []
    seen: set[tuple[str, str, str | None]] = set()
    ordered = ([root] if root else []) + [h for h in hits if h is not root]
    for hit in ordered:
        weight = 1.0 if hit is root else 0.85
        for n, spec in enumerate(hit.rule.changes, start=1):
            value = _fill(spec.value, hit.groups, obs)
            if value is None and spec.default is not None:
                value = spec.default
            name = _fill(spec.name, hit.groups, obs)
            if (spec.value is not None and value is None) or name is None:
                continue  # the placeholder's text is not in this log
            if spec.engines and (obs.engine or "null") not in spec.engines:
                continue
            change = Change(kind=spec.kind, name=name, value=value)
            current = obs.flag(spec.name) if spec.kind == "flag" else None
            if current is not None and value is not None and current == value:
                continue  # already in effect: not a change
            key = (change.kind, change.name, change.value)
            if key in seen:
                continue
            seen.add(key)
            cause = _fill(spec.cause, hit.groups, obs) or spec.cause
            out.append(
                Hypothesis(
                    id=f"{hit.rule.id}.{n}",
                    cause=cause,
                    confidence=round(spec.confidence * weight, 3),
                    changes=(change,),
                    why=_why(hit),
                    references=tuple(hit.rule.references),
                    rule=hit.rule.id,
                )
            )
    return out


def _why(hit: Hit) -> str:
    if hit.text is None:
        return f"{hit.rule.name}: conditions in effect"
    return f"{hit.rule.name}: line {hit.text.line}: {hit.text.text.strip()[:160]}"


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
    """Localisation first (cheap information), then by confidence, keeping rule order."""
    return tuple(
        sorted(
            hypotheses,
            key=lambda h: (h.id != LOCALISE_ID, -h.confidence),
        )
    )
