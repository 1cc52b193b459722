"""Entry points of the diagnosis engine (stub: filled in by the diagnosis engine work)."""

from __future__ import annotations

from pathlib import Path

from servedoctor.model import Diagnosis


def diagnose_path(
    path: str | Path, *, engine: str = "auto", phase_hint: str | None = None
) -> Diagnosis:
    """Diagnose one log file (``-`` for stdin). ``phase_hint`` is the supervisor's phase."""
    return Diagnosis(
        file=str(path), error_class=None, phase=None, component=None, culprit=None, summary=""
    )


def diagnose_text(text: str, *, name: str = "<text>", engine: str = "auto") -> Diagnosis:
    return Diagnosis(
        file=name, error_class=None, phase=None, component=None, culprit=None, summary=""
    )
