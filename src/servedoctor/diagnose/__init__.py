"""Events + knowledge rules → :class:`~servedoctor.model.Diagnosis`."""

from __future__ import annotations

from servedoctor.diagnose.api import diagnose_path, diagnose_text

__all__ = ["diagnose_path", "diagnose_text"]
