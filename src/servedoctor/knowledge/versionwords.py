"""How a hypothesis states a package version it has evidence for: in words a user reads
("the release before 0.6.4"), written and read in this one place. The diagnosis writes them;
``fix`` reads them back and resolves them against the package index (``experiments/releases``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ANOTHER_RELEASE",
    "LATEST_RELEASE",
    "VersionWords",
    "build_from",
    "read",
    "release_after",
    "release_before",
    "release_from",
    "required_by",
]

ANOTHER_RELEASE = "another release"
LATEST_RELEASE = "the latest release"

Kind = Literal["before", "after", "from", "latest", "another", "required"]

_WORDS: tuple[tuple[Kind, re.Pattern[str]], ...] = (
    ("before", re.compile(r"^the release before (?P<version>\S+)$")),
    ("after", re.compile(r"^the release after (?P<version>\S+)$")),
    ("from", re.compile(r"^(?P<version>\d\S*) or later$")),
    ("from", re.compile(r"^a build from (?P<version>\d\S*) or later$")),
    ("latest", re.compile(r"^the latest release$")),
    ("another", re.compile(r"^another release$")),
    ("required", re.compile(r"^the version (?:the server|[\w.-]+(?: \S+)?) requires$")),
)


def release_before(version: str) -> str:
    return f"the release before {version}"


def release_after(version: str) -> str:
    return f"the release after {version}"


def release_from(version: str) -> str:
    """A release that has something ``version`` introduced: it or any later one."""
    return f"{version} or later"


def build_from(day: str) -> str:
    """A build of a server that has no numbered releases (llama.cpp): that day's or later."""
    return f"a build from {day} or later"


def required_by(engine: str | None, version: str | None) -> str:
    """The version the engine (at its release, when known) declares for a package."""
    return (
        f"the version {engine} {version} requires"
        if engine and version
        else ("the version the server requires")
    )


@dataclass(frozen=True, slots=True)
class VersionWords:
    kind: Kind
    version: str | None = None  # the release named ("before"/"after")


def read(value: str | None) -> VersionWords | None:
    """The evidence a change's value states, or None when it names no such evidence."""
    text = (value or "").strip()
    for kind, pattern in _WORDS:
        if m := pattern.match(text):
            return VersionWords(kind, m.groupdict().get("version"))
    return None
