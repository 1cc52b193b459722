"""The real-server fixtures and helpers of tests/realserver, shared with tests/remote.

Loaded by path under a name of their own (two ``conftest`` modules cannot share a name).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).parent.parent / "realserver" / "conftest.py"
_spec = importlib.util.spec_from_file_location("servedoctor_realserver_fixtures", _PATH)
assert _spec is not None and _spec.loader is not None
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)

models = _real.models
offline_env = _real.offline_env
no_leftovers = _real.no_leftovers
serve_cmd = _real.serve_cmd
free_port = _real.free_port
processes_mentioning = _real.processes_mentioning
