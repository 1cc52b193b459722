"""Where a run happened: the GPUs and driver (NVML), the engine's and torch's versions as
the server's own interpreter sees them.

Read once, when the first report of a run is written (at the end of ``launch``), and kept
in the run folder as ``machine.json``, so a report written later still names the machine
the run had, not the one the report is written on.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from servedoctor.engines import all_engines
from servedoctor.env.serverenv import installed_packages, server_interpreter

__all__ = ["MACHINE_NAME", "machine_facts", "read_machine"]

MACHINE_NAME = "machine.json"


def _gpus() -> tuple[list[str], str | None]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return [], None
    try:
        names: list[str] = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name if isinstance(name, str) else name.decode()
            total = pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            names.append(f"{name} · sm_{major}{minor} · {total:.0f} GiB")
        driver = pynvml.nvmlSystemGetDriverVersion()
        return names, driver if isinstance(driver, str) else driver.decode()
    except Exception:
        return [], None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def machine_facts(engine: str, command: Sequence[str]) -> dict[str, Any]:
    """The facts of this machine and of the server's interpreter, now."""
    gpus, driver = _gpus()
    facts: dict[str, Any] = {"gpus": gpus, "driver": driver}
    spec = all_engines().get(engine)
    python = server_interpreter(list(command)) if command else None
    packages = installed_packages(python) if python else {}
    lowered = {k.lower().replace("_", "-"): v for k, v in packages.items()}
    if spec is not None and spec.distribution:
        facts["engine_version"] = lowered.get(spec.distribution.lower().replace("_", "-"))
    facts["torch"] = lowered.get("torch")
    facts["python"] = python
    return facts


def read_machine(run_dir: Path, engine: str, command: Sequence[str]) -> dict[str, Any]:
    """``machine.json`` of the run folder; written from :func:`machine_facts` when missing."""
    path = run_dir / MACHINE_NAME
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return data
    facts = machine_facts(engine, command)
    with contextlib.suppress(OSError):
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    return facts
