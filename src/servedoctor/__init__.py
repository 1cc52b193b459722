"""servedoctor: bring LLM inference servers up on new GPUs and say why they crash.

The public API is the names in ``__all__``. The typed values load eagerly; the engines load
on first use, and importing this package never loads the CLI (typer, rich).

>>> from servedoctor import diagnose_path
>>> diagnose_path("server.log").error_class  # doctest: +SKIP
'device_assert'
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from servedoctor.model import Change, Diagnosis, Evidence, Hypothesis

if TYPE_CHECKING:
    from servedoctor.diagnose import diagnose_path, diagnose_text
    from servedoctor.engines.command import ServerCommand, parse_command
    from servedoctor.launch import LaunchOptions, RunResult, launch

__all__ = [
    "Change",
    "Diagnosis",
    "Evidence",
    "Hypothesis",
    "LaunchOptions",
    "RunResult",
    "ServerCommand",
    "__version__",
    "diagnose_path",
    "diagnose_text",
    "launch",
    "parse_command",
]
__version__ = "0.1.0"

_LAZY = {
    "diagnose_path": "servedoctor.diagnose",
    "diagnose_text": "servedoctor.diagnose",
    "ServerCommand": "servedoctor.engines.command",
    "parse_command": "servedoctor.engines.command",
    "LaunchOptions": "servedoctor.launch",
    "RunResult": "servedoctor.launch",
    "launch": "servedoctor.launch",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'servedoctor' has no attribute {name!r}")
