"""A small fingerprint of where a fix runs: enough to tell when past findings apply.

GPU names and compute capabilities (NVML), driver, the engine's package version, torch and
its CUDA build, Python, and the machine. Fields that are unknown are left out.
"""

from __future__ import annotations

import contextlib
import platform
from importlib import metadata
from typing import Any

from servedoctor.engines.spec import all_engines

__all__ = ["current_fingerprint"]


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _gpus() -> list[str]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            out.append(f"{name if isinstance(name, str) else name.decode()} sm_{major}{minor}")
        return out
    except Exception:
        return []
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def current_fingerprint(engine: str) -> dict[str, Any]:
    fp: dict[str, Any] = {
        "engine": engine,
        "machine": platform.machine(),
        "python": platform.python_version_tuple()[0] + "." + platform.python_version_tuple()[1],
    }
    gpus = _gpus()
    fp["gpus"] = gpus or "none"
    spec = all_engines().get(engine)
    # A native engine is one binary: no Python package holds its version.
    distribution = spec.distribution if spec is not None and not spec.native else None
    for key, package in (("engine_version", distribution), ("torch", "torch")):
        version = _version(package) if package else None
        if version:
            fp[key] = version
    return fp
