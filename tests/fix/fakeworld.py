"""A fake server world for planner tests: faults keyed on settings, each with a diagnosis."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from servedoctor.experiments.trial import LaunchReport
from servedoctor.model import Change, Diagnosis, Hypothesis


def diag(error_class: str, phase: str, *changes: tuple[Change, float], text: str = "") -> Diagnosis:
    hyps = tuple(
        Hypothesis(id=f"H{i}", cause=f"cause {i}", confidence=conf, changes=(ch,))
        for i, (ch, conf) in enumerate(changes)
    )
    return Diagnosis(
        file="server.log",
        error_class=error_class,
        phase=phase,
        component=None,
        culprit=None,
        summary=text or f"{error_class} in {phase}",
        hypotheses=hyps,
    )


@dataclass
class Fault:
    present: Callable[[Sequence[str], Mapping[str, str]], bool]
    diagnosis: Diagnosis


def flag_is(
    name: str, value: str | None = None
) -> Callable[[Sequence[str], Mapping[str, str]], bool]:
    def check(argv: Sequence[str], env: Mapping[str, str]) -> bool:
        if name not in argv:
            return False
        if value is None:
            return True
        i = list(argv).index(name)
        return i + 1 < len(argv) and argv[i + 1] == value

    return check


@dataclass
class FakeWorld:
    faults: list[Fault]
    calls: list[tuple[list[str], dict[str, str]]] = field(default_factory=list)
    flaky_healthy: int = 0

    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> LaunchReport:
        self.calls.append((list(argv), dict(env)))
        for fault in self.faults:
            if fault.present(argv, env):
                return LaunchReport(outcome="failed", diagnosis=fault.diagnosis, duration_s=2.0)
        return LaunchReport(outcome="healthy", diagnosis=None, duration_s=3.0, gpu_peak_mib=512.0)
