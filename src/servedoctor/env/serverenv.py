"""The server's own Python: which interpreter a command runs, and what imports there.

A server command names its interpreter (``/opt/venv/bin/python -m sglang.launch_server``) or
a console script whose shebang does (``vllm serve``, ``transformers serve``). Checks of what
the server can import run in that interpreter, in a subprocess, not in servedoctor's own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path

_PYTHON = re.compile(r"^python[\d.]*$")
_PROBE = """
import importlib.util, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = importlib.util.find_spec(name) is not None
    except Exception:
        found[name] = False
print(json.dumps(found))
"""
_TORCH = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"


def server_interpreter(argv: Sequence[str], path: str | None = None) -> str:
    """The Python the command will run (servedoctor's own when it cannot tell)."""
    if not argv:
        return sys.executable
    program = argv[0]
    found = shutil.which(program, path=path or os.environ.get("PATH"))
    if found is None:
        return sys.executable
    if _PYTHON.match(Path(program).name):
        return found
    try:
        with open(found, "rb") as f:
            first = f.readline(256).decode("utf-8", "replace").strip()
    except OSError:
        return sys.executable
    if first.startswith("#!"):
        words = first[2:].split()
        if words and words[0].endswith("/env") and len(words) > 1:
            words = words[1:]
        if words and _PYTHON.match(Path(words[0]).name):
            return shutil.which(words[0]) or words[0]
    return sys.executable


def importable(python: str, modules: Iterable[str]) -> dict[str, bool]:
    """Which modules ``python`` can import (by spec; nothing is executed), {} if it fails."""
    names = sorted(set(modules))
    if not names:
        return {}
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE, *names], capture_output=True, text=True, timeout=60
        )
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {}
    return {str(k): bool(v) for k, v in found.items()}


@cache
def torch_build(python: str) -> tuple[str, str | None] | None:
    """(torch version, CUDA version or None for a CPU build) in ``python``; None if no torch."""
    try:
        proc = subprocess.run([python, "-c", _TORCH], capture_output=True, text=True, timeout=120)
        version, cuda = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None
    return str(version), (str(cuda) if cuda else None)


_PINS = """
import json, sys
from importlib import metadata
dist = sys.argv[1]
try:
    own = metadata.version(dist)
    requires = metadata.requires(dist) or []
except metadata.PackageNotFoundError:
    print(json.dumps(None)); raise SystemExit
installed = {}
for line in requires:
    name = line.split(";")[0].split("[")[0]
    for sep in "<>=!~ (":
        name = name.split(sep)[0]
    try:
        installed[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        installed[name] = None
print(json.dumps({"version": own, "requires": requires, "installed": installed}))
"""


def declared_pins(python: str, distribution: str) -> dict[str, object] | None:
    """The distribution's own requirements and the installed versions of what they name,
    read in ``python`` (None when the distribution is not installed there)."""
    try:
        proc = subprocess.run(
            [python, "-c", _PINS, distribution], capture_output=True, text=True, timeout=60
        )
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None
    return found if isinstance(found, dict) else None


_INSTALLED = """
import json
from importlib import metadata
found = {}
for d in metadata.distributions():  # in sys.path order: the first copy is the one imported
    if d.metadata["Name"]:
        found.setdefault(d.metadata["Name"], d.version)
print(json.dumps(found))
"""


def installed_packages(python: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every distribution ``python`` sees with its version, under the command's own
    environment overrides (a ``PYTHONPATH`` it sets counts); {} if unreadable."""
    try:
        proc = subprocess.run([python, "-c", _INSTALLED], capture_output=True, text=True,
                              timeout=60, env={**os.environ, **(env or {})})  # fmt: skip
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {}
    return {str(k): str(v) for k, v in found.items()}
