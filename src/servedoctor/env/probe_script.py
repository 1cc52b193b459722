"""What a Python environment holds, probed from inside it (standard library only).

This file runs as a script in the server's own interpreter (``python probe_script.py
ARGS_JSON``), which may be another Python version without servedoctor installed: it imports
nothing but the standard library, keeps to Python 3.8 syntax, and prints one JSON object.
``fingerprint.collect`` also calls its functions in-process for servedoctor's own Python.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import platform
import re
import sys
from importlib import metadata
from typing import Any

_LIBRARY_SUFFIXES = (".so", ".fatbin", ".o")  # as env.fatbin.LIBRARY_SUFFIXES
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _is_library(name: str) -> bool:
    return name.endswith(_LIBRARY_SUFFIXES) or ".so." in name


def probe_torch(notes: list[str]) -> dict[str, Any] | None:
    """torch's version, CUDA runtime, compiled arch list and NCCL, imported only if
    installed; None (with a note) when it is absent or does not import."""
    if importlib.util.find_spec("torch") is None:
        notes.append("torch is not installed")
        return None
    try:
        torch: Any = importlib.import_module("torch")
    except Exception as exc:
        notes.append(f"torch is installed but does not import: {type(exc).__name__}: {exc}")
        return None
    cuda = getattr(torch.version, "cuda", None)
    available: bool | None
    try:
        available = bool(torch.cuda.is_available())
    except Exception:
        available = None
    arch_list: list[str] = []
    try:
        arch_list = list(torch.cuda.get_arch_list())
        if not arch_list and hasattr(torch._C, "_cuda_getArchFlags"):
            # get_arch_list() is empty without a usable GPU; the compiled flags are not
            arch_list = (torch._C._cuda_getArchFlags() or "").split()
    except Exception:
        pass
    nccl: str | None = None
    try:
        raw = torch.cuda.nccl.version()
        nccl = ".".join(str(p) for p in raw) if isinstance(raw, tuple) else str(raw)
    except Exception:
        pass
    if cuda is None:
        notes.append(f"torch {torch.__version__} is a CPU build (no CUDA)")
    return {
        "version": str(torch.__version__),
        "cuda": cuda,
        "arch_list": arch_list,
        "cuda_available": available,
        "nccl": nccl,
    }


def probe_distributions(stack: list[list[Any]], libraries: bool) -> dict[str, Any]:
    """Every distribution (the first copy on sys.path wins, as imports do), its import
    names, the requirements naming torch, and the stack packages with their libraries.
    ``stack`` is ``[[names...], role, scan]`` per stack package, in order."""
    packages: dict[str, str] = {}
    requires_torch: list[list[str]] = []
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name or name in packages:
            continue
        packages[name] = dist.version
        for line in dist.requires or []:
            named = _NAME.match(line)
            if named and named.group(0).lower() == "torch":
                requires_torch.append([name, dist.version, line])
    modules: dict[str, list[str]] = {}
    if hasattr(metadata, "packages_distributions"):
        for module, dists in metadata.packages_distributions().items():
            for d in dists:
                modules.setdefault(d, []).append(module)
    found: list[list[Any]] = []
    libs: dict[str, list[str]] = {}
    for names, role, scan in stack:
        for candidate in names:
            try:
                dist = metadata.distribution(candidate)
            except metadata.PackageNotFoundError:
                continue
            shown = dist.metadata["Name"] or candidate
            found.append([shown, dist.version, role, bool(scan)])
            if scan and libraries:
                files = [f for f in dist.files or [] if _is_library(f.name)]
                libs[shown] = sorted(str(dist.locate_file(f)) for f in files)
            break
    return {
        "packages": packages,
        "modules": {k: sorted(set(v)) for k, v in modules.items()},
        "requires_torch": requires_torch,
        "stack": found,
        "libraries": libs,
    }


def main(argv: list[str]) -> None:
    args = json.loads(argv[1]) if len(argv) > 1 else {}
    notes: list[str] = []
    report = probe_distributions(args.get("stack", []), bool(args.get("libraries")))
    report["torch"] = probe_torch(notes) if args.get("torch", True) else None
    report["notes"] = notes
    report["python"] = f"{platform.python_version()} ({sys.executable})"
    report["prefix"] = sys.prefix
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv)
