"""Facts about what the command selects and the server's interpreter cannot provide.

``--attn-implementation flash_attention_2`` needs ``flash_attn``; ``--device cuda`` needs a
torch built with CUDA. Both are checked in the interpreter the command runs
(:mod:`servedoctor.env.serverenv`), before anything is launched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import cast

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, model_validator

from servedoctor.datafile import load_yaml
from servedoctor.env.serverenv import declared_pins, importable, torch_build

DATA = Path(__file__).parent / "data" / "implementations.yaml"


class Implementation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    flag: str | None = None
    env: str | None = None
    value: str
    module: str

    @model_validator(mode="after")
    def _one(self) -> Implementation:
        if (self.flag is None) == (self.env is None):
            raise ValueError("an implementation names a flag or an env var")
        return self


@cache
def implementations() -> tuple[Implementation, ...]:
    raw = load_yaml(DATA)["implementations"]
    return tuple(Implementation.model_validate(item) for item in raw)


def implementation_facts(value_of: Callable[[str], str | None], python: str) -> list[str]:
    """One fact per selected implementation whose module the server's Python lacks."""
    needed: dict[str, str] = {}
    for impl in implementations():
        setting = impl.flag or impl.env or ""
        value = value_of(setting)
        if value is not None and re.search(impl.value, value):
            needed[impl.module] = f"{setting} {value}"
    found = importable(python, needed)
    return [
        f"implementation-missing: {why} needs the module {module}, which {python} cannot import"
        for module, why in sorted(needed.items())
        if found and not found.get(module, True)
    ]


def device_facts(value_of: Callable[[str], str | None], python: str) -> list[str]:
    device = value_of("--device")
    if device is None or not device.startswith("cuda"):
        return []
    build = torch_build(python)
    if build is None or build[1] is not None:
        return []
    return [f"device-without-cuda: --device {device} but torch {build[0]} in {python} has no CUDA"]


#: The distribution that is each engine (its requirements are the engine's pins).
ENGINE_DISTRIBUTIONS = {
    "sglang": "sglang",
    "vllm": "vllm",
    "transformers": "transformers",
    "lmdeploy": "lmdeploy",
    "trtllm": "tensorrt_llm",
}


def pin_facts(engine: str, python: str) -> list[str]:
    """The engine's declared requirements that the server's environment violates (torch is
    judged by its own check); extras and markers for other platforms are left out."""
    dist = ENGINE_DISTRIBUTIONS.get(engine)
    found = declared_pins(python, dist) if dist else None
    if not found:
        return []
    installed = cast(dict[str, str | None], found.get("installed") or {})
    facts = []
    for line in cast(list[str], found.get("requires") or []):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower() == "torch" or not str(req.specifier):
            continue
        have = installed.get(req.name)
        if have is None:
            continue  # not installed: the import error says so, with its module
        try:
            ok = req.specifier.contains(Version(have), prereleases=True)
        except InvalidVersion:
            continue
        if not ok:
            facts.append(
                f"pin-violated: {dist} {found.get('version')} requires "
                f"{req.name}{req.specifier}; installed {req.name} {have}"
            )
    return facts
