"""``servedoctor`` command line: one module per verb, parsing and printing only."""

from __future__ import annotations

# Importing a verb module registers its command on the app.
from servedoctor.cli import (  # noqa: F401
    archscan_cmd,
    compare_cmd,
    config_cmd,
    diagnose_cmd,
    env_cmd,
    fix_cmd,
    launch_cmd,
    plan_cmd,
    preflight_cmd,
    report_cmd,
    rules_cmd,
    runs_cmd,
)
from servedoctor.cli.app import app, run_app

__all__ = ["app", "main"]


def main() -> None:
    run_app()
