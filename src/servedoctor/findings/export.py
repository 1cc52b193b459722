"""Markdown export of the findings store: what failed, on which fingerprint, what fixed it."""

from __future__ import annotations

from collections.abc import Sequence

from jinja2 import Environment, PackageLoader, StrictUndefined

from servedoctor.findings.store import StoredRun
from servedoctor.findings.working import shell_line

__all__ = ["render_markdown"]


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("servedoctor.findings", "templates"),
        undefined=StrictUndefined,
        autoescape=False,  # Markdown, not HTML
        keep_trailing_newline=True,
    )
    return env


def render_markdown(runs: Sequence[StoredRun], *, store: str) -> str:
    template = _environment().get_template("findings.md.j2")
    return template.render(runs=list(runs), store=store, shell_line=shell_line)
