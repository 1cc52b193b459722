"""The findings store (every fix session and trial) and its Markdown export."""

from __future__ import annotations

from servedoctor.findings.store import FindingsStore, StoredRun, default_store_path, store_url

__all__ = ["FindingsStore", "StoredRun", "default_store_path", "store_url"]
