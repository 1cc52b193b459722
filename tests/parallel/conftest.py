"""tests/parallel reuses the fake server world of the planner tests (tests/fix/fakeworld.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fix"))
