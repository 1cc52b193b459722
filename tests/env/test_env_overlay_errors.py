"""An overlay that cannot be built (no index, no such version) is a one-line reason on a
rejected trial, never a launch, a failed trial, or the end of the session."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from servedoctor.experiments.command import parse
from servedoctor.experiments.overlay import Overlays
from servedoctor.experiments.runner import TrialRunner
from servedoctor.experiments.trial import LaunchReport
from servedoctor.model import Change


def test_an_unbuildable_overlay_is_a_rejected_trial_with_pips_reason(tmp_path: Path) -> None:
    launched: list[Sequence[str]] = []

    def launch(argv: Sequence[str], env: Mapping[str, str]) -> LaunchReport:
        launched.append(argv)
        return LaunchReport("healthy", None, 1.0)

    cmd = parse([sys.executable, "-c", "pass"])
    overlays = Overlays(sys.executable, cache=tmp_path / "cache",
                        pip_args=["--no-index", "--find-links", str(tmp_path)])  # fmt: skip
    runner = TrialRunner(cmd, launch, overlays=overlays)
    trial = runner.run([Change("package", "sd-nowhere", "==9.9")], role="candidate", why="t")
    assert trial.outcome == "rejected" and launched == []
    assert trial.diagnosis is not None
    summary = trial.diagnosis.summary
    assert summary.startswith("cannot build an overlay for sd-nowhere==9.9: ")
    assert "\n" not in summary
    ok = runner.run([Change("env", "X", "1")], role="candidate", why="t")  # the session goes on
    assert ok.outcome == "healthy" and len(launched) == 1
