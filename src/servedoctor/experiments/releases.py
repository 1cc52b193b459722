"""Package versions to try, from evidence: what a hypothesis says → a requirement pip takes.

Hypotheses name a package with what the evidence supports, not a guessed version: "the
release before 0.6.4" (a regression of the release the log or the environment names),
"another release" (the same, for the version installed where the server runs), "the version
vllm 0.6.4 requires" (the engine's own declared requirement). Before a trial, ``fix`` turns
them into a requirement: the newest release the package index has that is older than the one
named or installed; the specifier the engine declares for the package. Where the evidence is
missing (no older release, the engine not installed), nothing is tried: never a guessed
"latest".
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from functools import cached_property

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from servedoctor.engines import engine_distribution
from servedoctor.env.serverenv import declared_pins, installed_packages
from servedoctor.knowledge.versionwords import read
from servedoctor.model import Change

__all__ = ["Resolver", "resolvable"]

_AVAILABLE = re.compile(r"^Available versions:\s*(?P<versions>.+)$", re.MULTILINE)


def resolvable(change: Change) -> bool:
    """Does the change state its version as evidence ``Resolver`` can turn into one?"""
    return change.kind == "package" and read(change.value) is not None


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


@dataclass
class Resolver:
    """Resolves package changes in the server's interpreter, with the overlays' pip options."""

    python: str
    pip_args: tuple[str, ...] = ()
    engine: str | None = None
    _available: dict[str, list[Version]] = field(default_factory=dict, repr=False)

    @cached_property
    def installed(self) -> dict[str, str]:
        found = installed_packages(self.python)
        return {canonicalize_name(k): v for k, v in found.items()}

    @cached_property
    def engine_requires(self) -> dict[str, str]:
        """The engine distribution's declared requirements: name → specifier."""
        dist = engine_distribution(self.engine)
        pins = declared_pins(self.python, dist) if dist else None
        out: dict[str, str] = {}
        requires = (pins or {}).get("requires")
        for line in requires if isinstance(requires, list) else []:
            try:
                req = Requirement(str(line))
            except InvalidRequirement:
                continue
            if req.marker is None or req.marker.evaluate():
                out[canonicalize_name(req.name)] = str(req.specifier)
        return out

    def available(self, name: str) -> list[Version]:
        """The releases the index (as the overlays' pip sees it) has, oldest first."""
        key = canonicalize_name(name)
        if key not in self._available:
            argv = [self.python, "-m", "pip", "index", "versions", name,
                    "--disable-pip-version-check", *self.pip_args]  # fmt: skip
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
                m = _AVAILABLE.search(proc.stdout)
            except (OSError, subprocess.TimeoutExpired):
                m = None
            versions = [_version(v.strip()) for v in m.group("versions").split(",")] if m else []
            self._available[key] = sorted(v for v in versions if v is not None)
        return self._available[key]

    def release_before(self, name: str, version: Version) -> str | None:
        older = [v for v in self.available(name) if v < version and not v.is_prerelease]
        return f"=={older[-1]}" if older else None

    def release_after(self, name: str, version: Version) -> str | None:
        newer = [v for v in self.available(name) if v > version and not v.is_prerelease]
        return f"=={newer[0]}" if newer else None

    def requirement(self, change: Change) -> str | None:
        """The specifier to install for ``change`` (``==0.6.3``, ``>=2.4,<2.6``), or None."""
        words = read(change.value)
        key = canonicalize_name(change.name)
        if words is None:
            return None
        if words.kind == "required":
            return self.engine_requires.get(key) or None
        if words.kind == "latest":
            newest = [v for v in self.available(change.name) if not v.is_prerelease]
            return f"=={newest[-1]}" if newest else None
        named = self.installed.get(key) if words.kind == "another" else words.version
        version = _version(named)
        if version is None:
            return None
        if words.kind == "after":
            return self.release_after(change.name, version)
        if words.kind == "from":
            return f">={version}"
        return self.release_before(change.name, version)

    def concrete(self, change: Change) -> Change | None:
        """``change`` with its version made concrete, or None when the evidence is missing."""
        if not resolvable(change):
            return None
        spec = self.requirement(change)
        return Change(kind="package", name=change.name, value=spec) if spec else None
