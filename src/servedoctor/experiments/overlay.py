"""Package trials in an overlay of the server's own environment, never in it.

A package change with a version (``transformers ==4.57.1``, ``numpy <2``) is installed with
the server's own pip into a directory of its own (``pip install --target``, no
dependencies), and the trial runs the unchanged command with that directory first on
``PYTHONPATH``: the server imports the overlay's copy, and the environment the operator's
other servers share is never written. Overlays are kept in a cache keyed by interpreter and
requirement, so a second trial of the same version costs nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from servedoctor.errors import UserError
from servedoctor.model import Change

__all__ = ["OverlayError", "Overlays", "default_cache", "requirement_of"]

_BARE_VERSION = re.compile(r"^\d+(?:\.\d+)*(?:[-+._]?\w+)*$")
_MARKER = ".servedoctor-overlay"
#: An overlay no trial used for this long is removed when a session starts.
UNUSED_DAYS = 30
#: A build directory this old was left by a session that died mid-build.
STALE_BUILD_S = 24 * 3600


class OverlayError(UserError):
    """The overlay could not be built (pip failed, no such version): one line."""


def requirement_of(change: Change) -> str | None:
    """``name<spec>`` when a package change names a version or a range pip understands
    (``==4.57.1``, ``<2``, ``4.57.1``); ``None`` for prose (``a build with CUDA``)."""
    if change.kind != "package" or not change.value:
        return None
    value = change.value.strip()
    if _BARE_VERSION.match(value):
        value = f"=={value}"
    try:
        req = Requirement(f"{change.name}{value}")
    except InvalidRequirement:
        return None
    return str(req) if str(req.specifier) else None


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "servedoctor" / "overlays"


@dataclass
class Overlays:
    """Builds and caches overlays for one server interpreter."""

    python: str
    cache: Path = field(default_factory=default_cache)
    pip_args: Sequence[str] = ()
    built: dict[str, float] = field(default_factory=dict)  # requirement → seconds to build

    def path_for(self, requirement: str) -> Path:
        key = hashlib.sha256(f"{self.python}\0{requirement}".encode()).hexdigest()[:16]
        final = self.cache / key
        if (final / _MARKER).is_file():
            with contextlib.suppress(OSError):  # a read-only cache still serves
                os.utime(final / _MARKER)  # used: kept by prune()
            return final
        self.cache.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix="build-", dir=self.cache))
        argv = [self.python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                "--no-deps", "--target", str(work), *self.pip_args, requirement]  # fmt: skip
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as exc:
            shutil.rmtree(work, ignore_errors=True)
            raise OverlayError(f"cannot build an overlay for {requirement}: {exc}") from exc
        if proc.returncode != 0:
            shutil.rmtree(work, ignore_errors=True)
            last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise OverlayError(f"cannot build an overlay for {requirement}: {last}")
        (work / _MARKER).write_text(requirement + "\n", encoding="utf-8")
        try:
            work.rename(final)
        except OSError:  # another session built it meanwhile: theirs is as good
            shutil.rmtree(work, ignore_errors=True)
        self.built[requirement] = time.monotonic() - started
        return final

    def prune(self, *, now: float | None = None) -> list[Path]:
        """Remove overlays no trial used for :data:`UNUSED_DAYS` and build directories a
        dead session left behind; anything else in the cache folder is left alone."""
        if not self.cache.is_dir():
            return []
        now = time.time() if now is None else now
        removed: list[Path] = []
        for entry in self.cache.iterdir():
            marker = entry / _MARKER
            try:
                if marker.is_file():
                    stale = now - marker.stat().st_mtime > UNUSED_DAYS * 86400
                elif entry.is_dir() and entry.name.startswith("build-"):
                    stale = now - entry.stat().st_mtime > STALE_BUILD_S
                else:
                    continue
            except OSError:
                continue
            if stale:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
        return removed

    def environment(
        self, changes: Sequence[Change], env: Mapping[str, str], base: Mapping[str, str]
    ) -> dict[str, str]:
        """``env`` with the overlays of the package ``changes`` first on PYTHONPATH (after
        the command's own overrides, before what the server would inherit)."""
        dirs = [str(self.path_for(req)) for c in changes if (req := requirement_of(c))]
        if not dirs:
            return dict(env)
        inherited = env.get("PYTHONPATH", base.get("PYTHONPATH", ""))
        return {**env, "PYTHONPATH": os.pathsep.join([*dirs, *filter(None, [inherited])])}
