"""What ``cuobjdump --list-elf --list-ptx`` says a file carries: the reference the pure-Python
scan is checked against (tests, ``scripts/device/preflight.sh``). Optional: None without it."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# "ELF file    1: libx.1.sm_90a.cubin" / "PTX file    2: libx.2.sm_90.ptx"
_LINE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+\S*?\.?(sm_\d+[af]?)\.(?:cubin|ptx)\s*$")


@dataclass(frozen=True, slots=True)
class Listing:
    sass: tuple[str, ...]
    ptx: tuple[str, ...]


def parse_listing(text: str) -> Listing:
    sass: set[str] = set()
    ptx: set[str] = set()
    for line in text.splitlines():
        found = _LINE.match(line.strip())
        if not found:
            continue
        kind, arch = found.groups()
        if kind == "ELF":
            sass.add(arch)
        else:
            ptx.add(arch.replace("sm_", "compute_", 1))
    return Listing(sass=tuple(sorted(sass)), ptx=tuple(sorted(ptx)))


def cuobjdump_path() -> str | None:
    return shutil.which("cuobjdump")


def list_with_cuobjdump(path: Path, *, timeout: float = 600.0) -> Listing | None:
    """cuobjdump's listing of ``path``, or None when cuobjdump is not installed."""
    exe = cuobjdump_path()
    if exe is None:
        return None
    done = subprocess.run(
        [exe, "--list-elf", "--list-ptx", str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return parse_listing(done.stdout)


_FAMILY = re.compile(r"^((?:sm|compute)_\d+)f$")


def as_listed(names: tuple[str, ...] | list[str] | set[str]) -> set[str]:
    """Our arch names as ``cuobjdump --list-elf`` prints them.

    cuobjdump (CUDA 13.0) names a family-specific cubin by its base arch: an entry nvcc built
    for ``sm_100f`` is listed as ``…sm_100.cubin``. The fatbin header keeps the family flag,
    so the scan says ``sm_100f``; to compare, the ``f`` is dropped. ``a`` variants are listed
    with their suffix and stay.
    """
    return {_FAMILY.sub(r"\1", name) for name in names}
