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
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from servedoctor.errors import UserError

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
    found = _find(argv, path)
    return found[0] if found else sys.executable


def _find(argv: Sequence[str], path: str | None) -> tuple[str, str] | None:
    """(interpreter, how it was found) for a command that names one, else None."""
    if not argv:
        return None
    program = shutil.which(argv[0], path=path or os.environ.get("PATH"))
    if program is None:
        return None
    if _PYTHON.match(Path(argv[0]).name):
        return program, "the command"
    python = _shebang(program)
    return (python, "the script's shebang") if python else None


@dataclass(frozen=True, slots=True)
class ServerPython:
    """The interpreter a server command runs, and how it was found."""

    path: str
    how: str  # "--python", "the command", "the script's shebang", "not found"

    @property
    def own(self) -> bool:
        """Is it servedoctor's own interpreter (the same file or the same prefix)?"""
        return same_prefix(self.path)

    def warning(self) -> str | None:
        """One line when the checks would look at servedoctor's own environment."""
        if self.how == "--python" or not self.own:
            return None
        if self.how == "not found":
            return (
                f"cannot tell which Python the server runs; looking at servedoctor's own "
                f"({self.path}): give --python PATH for the server's"
            )
        return (
            f"the server would run servedoctor's own Python ({self.path}); if it should run "
            "another environment, name its interpreter in the command or give --python PATH"
        )


def same_prefix(python: str) -> bool:
    """``python`` is servedoctor's interpreter, or another name in the same environment."""
    given = Path(python).absolute()
    if given == Path(sys.executable).absolute():
        return True
    return given.parent.parent in (Path(sys.prefix).absolute(), Path(sys.executable).parent.parent)


def resolve_python(
    argv: Sequence[str], override: str | Path | None = None, env: Mapping[str, str] | None = None
) -> ServerPython:
    """The server's interpreter: ``override`` (``--python``) when given, else what the
    command runs (an explicit python, a console script's shebang, ``python`` on the PATH
    the server gets)."""
    if override is not None:
        given = shutil.which(str(override)) if os.sep not in str(override) else str(override)
        if not given or not os.access(given, os.X_OK) or Path(given).is_dir():
            raise UserError(f"--python {override}: not an executable interpreter")
        return ServerPython(str(Path(given).absolute()), "--python")
    found = _find(argv, (env or {}).get("PATH"))
    return ServerPython(*found) if found else ServerPython(sys.executable, "not found")


def _shebang(program: str) -> str | None:
    try:
        with open(program, "rb") as f:
            first = f.readline(256).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and words[0].endswith("/env") and len(words) > 1:
        words = words[1:]
    if words and _PYTHON.match(Path(words[0]).name):
        return shutil.which(words[0]) or words[0]
    return None


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


_IMPORT_NAMES = """
import json
from importlib import metadata
found = {}
if hasattr(metadata, "packages_distributions"):
    for module, dists in metadata.packages_distributions().items():
        for d in dists:
            found.setdefault(d, []).append(module)
print(json.dumps(found))
"""


def import_names(python: str, env: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Distribution → the top-level modules it installs, as ``python`` sees them (``PyYAML``
    → ``yaml``, ``_yaml``); {} if unreadable."""
    try:
        proc = subprocess.run([python, "-c", _IMPORT_NAMES], capture_output=True, text=True,
                              timeout=60, env={**os.environ, **(env or {})})  # fmt: skip
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {}
    return {str(k): sorted({str(m) for m in v}) for k, v in found.items()}
