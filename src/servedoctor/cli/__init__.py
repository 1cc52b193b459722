"""``servedoctor`` command line: one module per verb, parsing and printing only."""

from __future__ import annotations

import servedoctor.cli.fix_cmd  # noqa: F401  (registers fix and findings)
from servedoctor.cli import diagnose_cmd, launch_cmd, rules_cmd  # noqa: F401  (registers verbs)
from servedoctor.cli.app import app, run_app

__all__ = ["app", "main"]


def main() -> None:
    run_app()
