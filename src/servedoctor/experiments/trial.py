"""The values a fix session produces: one :class:`Trial` per launch, and the launcher seam."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from servedoctor.model import Change, Diagnosis

__all__ = [
    "REJECTED_BY_PARSER",
    "BatchLauncher",
    "LaunchReport",
    "Launcher",
    "Signature",
    "Trial",
    "TrialOutcome",
    "TrialRole",
    "changes_key",
    "headline",
    "merge_change",
    "same_failure",
]

TrialOutcome = Literal[
    "healthy", "failed", "same_failure", "different_failure", "rejected", "interrupted"
]
#: The rule that recognises a server refusing its own command line (argparse, click):
#: such a trial says nothing about the failure, only that a spelling was wrong.
REJECTED_BY_PARSER = "ARGS001"
TrialRole = Literal["baseline", "candidate", "confirm", "combine", "minimise"]
#: A failure's identity for comparing trials: (error_class, phase, headline).
Signature = tuple[str | None, str | None, str]

_NUMBERS = re.compile(r"0x[0-9a-f]+|\d+")
_ERROR_LINE = re.compile(r"(Error|Exception|error|Assertion|failed|FAILED)\b")


def headline(diagnosis: Diagnosis | None) -> str:
    """The failure's message: the last error-looking evidence line (else the summary),
    numbers masked, since pids, sizes and addresses vary from run to run."""
    if diagnosis is None:
        return ""
    errors = [e.text for e in diagnosis.evidence if _ERROR_LINE.search(e.text)]
    text = errors[-1] if errors else diagnosis.summary
    return " ".join(_NUMBERS.sub("#", text.lower()).split())[:200]


def same_failure(got: Signature, reference: Signature) -> bool:
    """Same error_class and phase, and the same message where both runs have one."""
    if got[:2] != reference[:2]:
        return False
    return not got[2] or not reference[2] or got[2] == reference[2]


@dataclass(frozen=True, slots=True)
class LaunchReport:
    """What experiments need from one supervised launch (a subset of launch.RunResult)."""

    outcome: Literal["healthy", "failed", "interrupted"]
    diagnosis: Diagnosis | None
    duration_s: float
    gpu_peak_mib: float | None = None
    exit_code: int | None = None
    run_dir: str | None = None
    placement: Mapping[str, Any] | None = None  # where it ran (host, port, GPUs, Ray node)


class Launcher(Protocol):
    """Starts the server command with extra environment, supervises it, reports."""

    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> LaunchReport: ...


class BatchLauncher(Protocol):
    """Runs up to ``width`` launches side by side (``fix --parallel``); the reports come
    back in the order of the jobs given, whatever order they finish in."""

    @property
    def width(self) -> int: ...

    def run_all(
        self, jobs: Sequence[tuple[Sequence[str], Mapping[str, str]]]
    ) -> list[LaunchReport]: ...


@dataclass(frozen=True)
class Trial:
    index: int
    role: TrialRole
    changes: tuple[Change, ...]
    tested: Change | None
    why: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    outcome: TrialOutcome
    diagnosis: Diagnosis | None
    duration_s: float
    gpu_peak_mib: float | None = None
    exit_code: int | None = None
    run_dir: str | None = None
    against: str | None = None  # error_class of the failure this trial tried to get past
    replayed: bool = field(default=False, compare=False)
    #: where it ran: host, port, GPU slice, Ray node (``fix --parallel``); not its identity
    placement: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def healthy(self) -> bool:
        return self.outcome == "healthy"

    @property
    def error_class(self) -> str | None:
        return self.diagnosis.error_class if self.diagnosis else None

    @property
    def phase(self) -> str | None:
        return self.diagnosis.phase if self.diagnosis else None

    @property
    def signature(self) -> Signature:
        return (self.error_class, self.phase, headline(self.diagnosis))

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "role": self.role,
            "changes": [c.to_dict() for c in self.changes],
            "tested": self.tested.to_dict() if self.tested else None,
            "why": self.why,
            "outcome": self.outcome,
            "error_class": self.error_class,
            "phase": self.phase,
            "duration_s": round(self.duration_s, 3),
            "gpu_peak_mib": self.gpu_peak_mib,
            "exit_code": self.exit_code,
            "run_dir": self.run_dir,
            "against": self.against,
            "placement": dict(self.placement) if self.placement else None,
        }


def changes_key(changes: Sequence[Change]) -> tuple[tuple[str, str, str], ...]:
    """Order-free identity of a change set."""
    return tuple(sorted((c.kind, c.name, "\0" if c.value is None else c.value) for c in changes))


def merge_change(base: Sequence[Change], change: Change) -> tuple[Change, ...]:
    """``base`` with ``change`` added, replacing any change to the same flag or variable."""
    return (*(c for c in base if (c.kind, c.name) != (change.kind, change.name)), change)
