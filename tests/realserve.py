"""The real-server fixtures and helpers of tests/realserver, for the tests of other folders.

tests/realserver/conftest.py is loaded once, by path, under a name of its own (two
``conftest`` modules cannot share one), and so is its model builder.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).parent / "realserver"


def _load(name: str, filename: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, HERE / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # skips the importing module when transformers is absent
    return module


realserver = _load("servedoctor_realserver_fixtures", "conftest.py")
tinymodels = _load("servedoctor_realserver_tinymodels", "tinymodels.py")

# the fixtures: a module that imports them has them
models = realserver.models
offline_env = realserver.offline_env
no_leftovers = realserver.no_leftovers
# the helpers
VENV_BIN: Path = realserver.VENV_BIN
SERVEDOCTOR = str(VENV_BIN / "servedoctor")
SECRET_TOKEN: str = realserver.SECRET_TOKEN
free_port = realserver.free_port
serve_cmd = realserver.serve_cmd
launch_argv = realserver.launch_argv
processes_mentioning = realserver.processes_mentioning
