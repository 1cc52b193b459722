"""``servedoctor`` command line: one module per verb, parsing and printing only."""

from __future__ import annotations

from servedoctor.cli import archscan_cmd, diagnose_cmd, env_cmd, preflight_cmd, rules_cmd  # noqa: F401  (registers verbs)  # noqa: F401
from servedoctor.cli.app import app, run_app

__all__ = ["app", "main"]


def main() -> None:
    run_app()
