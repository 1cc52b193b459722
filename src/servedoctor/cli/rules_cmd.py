"""``servedoctor rules``: list and explain the knowledge rules."""

from __future__ import annotations

from servedoctor.cli.app import app


@app.command("rules")
def rules_list() -> None:
    """List the knowledge rules."""
