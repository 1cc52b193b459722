"""``servedoctor diagnose`` and ``servedoctor eval``."""

from __future__ import annotations

from servedoctor.cli.app import app  # noqa: F401
