"""The engine release installed where the server runs: the version its diagnosis spells for.

A log does not always say its engine's version (SGLang rarely does); the server's own
interpreter knows it. Read there, in a subprocess, so that the answer is the server's
environment's and not servedoctor's.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from functools import cache

from servedoctor.engines import engine_distribution
from servedoctor.env.serverenv import resolve_python

_PROBE = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"


@cache
def distribution_version(python: str, distribution: str) -> str | None:
    """``distribution``'s installed version in ``python``, or None if absent or unreadable."""
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE, distribution], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[-1].strip() if proc.returncode == 0 and lines else None


def installed_engine_version(
    argv: Sequence[str], engine: str | None, env: Mapping[str, str] | None = None
) -> str | None:
    """The version of ``engine``'s package in the interpreter ``argv`` runs."""
    dist = engine_distribution(engine)
    if dist is None or not argv:
        return None
    return distribution_version(resolve_python(argv, env=env).path, dist)
