from __future__ import annotations

from browser import browser  # noqa: F401  (the session's chromium)
