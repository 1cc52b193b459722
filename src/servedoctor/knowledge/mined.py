"""Rules generated from the messages mined out of the engines' own source.

``scripts/inventory/mine_messages.py`` reads every error and warning SGLang and vLLM raise or
log whose text names a setting, per release, into ``knowledge/mined/<engine>.yaml``. Each
message that also says what to do ("try increasing `gpu_memory_utilization`", "decrease
max_model_len") becomes a rule here: its template is the signature, the advice becomes
changes — through the setting's knob where one exists (so the adapter spells it for the
user's release), else as that engine's own flag — and a number the message states as the
limit becomes the value. They share the hand-written rules' schema; ids are the message's
stable key (``VLLM-3F2A9C1D``), status ``preview``, and they never classify a failure: they
only add the engine's own advice to a diagnosis.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from servedoctor.datafile import load_yaml
from servedoctor.engines.adapter import knobs_of
from servedoctor.engines.inventory import inventory
from servedoctor.knowledge.knobs import knob
from servedoctor.knowledge.schema import ChangeSpec, Rule
from servedoctor.textclip import clip

MINED_DIR = Path(__file__).parent / "mined"
#: Where each engine's source is public, for the rule's reference.
SOURCES = {
    "vllm": "https://github.com/vllm-project/vllm/blob/v{version}/{path}",
    "sglang": "https://github.com/sgl-project/sglang/blob/v{version}/python/{path}",
}
#: A line that makes the log an engine's, and a failure, for the generated examples.
ENGINE_LINE = {
    "vllm": "INFO 01-01 00:00:00 api_server.py:1 vLLM API server version {version}",
    "sglang": "[2026-01-01 00:00:00] sglang=={version} sglang/srt/server_args.py",
}
_GROUP = re.compile(r"\{\w+\}")
CONFIDENCE = 0.55  # the engine's own advice for its own check
WRITTEN_OUT = 0.6  # ... when the message writes out the setting and its value


def _value(kind: str, direction: str, limit: str | None) -> str | None:
    """The value template for one piece of advice on a knob of this value type."""
    if kind == "none":
        return None
    if limit is not None and direction in ("decrease", "increase", "set"):
        return "{" + limit + "}"
    if kind == "fraction":
        return {"increase": "{current+0.05}", "decrease": "{current-0.05}"}.get(direction)
    if kind == "int":
        return {"increase": "{current*2}", "decrease": "{current/2}"}.get(direction)
    return None


def _change(engine: str, advice: dict[str, Any], cause: str) -> ChangeSpec | None:
    flag, direction = str(advice.get("flag") or ""), str(advice.get("direction") or "")
    limit = advice.get("value_from")
    if advice.get("value") is not None:  # the message writes out the setting: take it as is
        return ChangeSpec(kind="flag", name=flag, value=str(advice["value"]),
                          confidence=WRITTEN_OUT, cause=cause, engines=[engine])  # fmt: skip
    knobs = sorted(knobs_of(flag, engine))
    if knobs:
        kind = knob(knobs[0]).value
        if kind == "none" and direction not in ("enable", "disable", "set"):
            return None
        value = _value(kind, direction, limit)
        if value is None and kind != "none":
            return None
        return ChangeSpec(knob=knobs[0], value=value, confidence=CONFIDENCE, cause=cause)
    if direction == "enable":
        if not _is_switch(engine, flag):
            return None  # 'enable --x' of a flag that takes a value: nothing to propose
        value = None
    elif limit is not None and direction in ("decrease", "increase", "set"):
        value = "{" + limit + "}"
    else:
        return None
    return ChangeSpec(
        kind="flag", name=flag, value=value, confidence=CONFIDENCE, cause=cause, engines=[engine]
    )


def _is_switch(engine: str, flag: str) -> bool:
    inv = inventory(engine)
    if inv is None:
        return False
    found = inv.newest(flag)
    return found is not None and found.type == "bool"


def _sample(template: str, pattern: str) -> str:
    """The message as a log would print it: each interpolation (a group of the pattern) a
    number, literal braces kept."""
    groups = set(re.compile(pattern).groupindex)
    filled = _GROUP.sub(lambda m: "64" if m.group(0)[1:-1] in groups else m.group(0), template)
    return filled.replace("{{", "{").replace("}}", "}")


def rule_of(engine: str, message: dict[str, Any]) -> Rule | None:
    key = str(message["key"]).split(":")[-1].upper()
    template = " ".join(str(message["template"]).split())
    versions = [str(v) for v in message.get("versions", [])]
    cause = f"{engine}'s own check says so: {clip(template, 160)}"
    changes = [c for a in message.get("advice", []) if (c := _change(engine, a, cause)) is not None]
    if not changes:
        return None
    latest = versions[-1] if versions else "main"
    source = SOURCES.get(engine, "https://pypi.org/project/{path}").format(
        version=latest, path=message.get("source", engine)
    )
    head = ENGINE_LINE.get(engine, "{version}").format(version=latest)
    advice = "; ".join(f"{a.get('direction')} {a.get('flag')}" for a in message["advice"])
    return Rule(
        id=f"{engine.upper()[:6]}-{key}",
        name=f"{engine}-message-{key.lower()}",
        status="preview",
        priority=20,
        match=[str(message["pattern"])],
        # the template is this engine's own text: a log that names no engine is taken as its
        when={"engine": [engine], "engine_or_unknown": True},
        what=f"{engine}'s own message (releases {', '.join(versions)}): {clip(template, 200)}",
        why=f"{engine} checks this condition in {message.get('source')} and names the setting.",
        fix=f"What the message advises: {advice}.",
        changes=changes,
        references=[source],
        examples={
            "fires": [f"{head}\nValueError: {_sample(template, str(message['pattern']))}"],
            "ok": [f"{head}\nValueError: an unrelated failure of the kind nobody mined"],
        },
    )


@cache
def _mined() -> tuple[tuple[str, tuple[dict[str, Any], ...]], ...]:
    """Each engine's mined messages, read once."""
    out = []
    for path in sorted(MINED_DIR.glob("*.yaml")):
        data = load_yaml(path)
        out.append((str(data["engine"]), tuple(data.get("messages", []))))
    return tuple(out)


@cache
def mined_rules() -> tuple[Rule, ...]:
    rules: list[Rule] = []
    for engine, messages in _mined():
        for message in messages:
            if message.get("advice"):
                rule = rule_of(engine, message)
                if rule is not None:
                    rules.append(rule)
    return tuple(rules)


def is_generated(rule: Rule) -> bool:
    """A rule made from a mined message (its id carries the message key, not AREA+digits)."""
    return "-" in rule.id
