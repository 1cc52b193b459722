"""``servedoctor`` command line: one module per verb, parsing and printing only."""

from __future__ import annotations

from servedoctor.cli import compare_cmd as _compare_cmd  # noqa: F401  (registers verbs)
from servedoctor.cli import diagnose_cmd, launch_cmd, rules_cmd  # noqa: F401  (registers verbs)
from servedoctor.cli import fix_cmd as _fix_cmd  # noqa: F401  (registers fix and findings)
from servedoctor.cli import plan_cmd as _plan_cmd  # noqa: F401  (registers verbs)
from servedoctor.cli.app import app, run_app

__all__ = ["app", "main"]


def main() -> None:
    run_app()
