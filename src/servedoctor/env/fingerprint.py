"""The machine's fingerprint: GPUs, driver, CUDA, torch, NCCL and the serving stack.

Every probe is optional. NVML comes through ``pynvml`` (nvidia-ml-py); torch is imported
through importlib only when it is installed; nothing here raises because a GPU, a driver
or a package is missing — it says so in ``notes``.
"""

from __future__ import annotations

import contextlib
import json
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servedoctor.env import probe_script
from servedoctor.env.arch import Arch, parse_arch
from servedoctor.env.serverenv import same_prefix
from servedoctor.env.stack import Installed, stack_packages


@dataclass(frozen=True, slots=True)
class GpuInfo:
    index: int
    name: str
    arch: str  # sm_XY
    memory_mib: int | None
    mig: str | None  # "enabled" / "disabled" / None when the GPU has no MIG

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "arch": self.arch,
            "memory_mib": self.memory_mib,
            "mig": self.mig,
        }


@dataclass(frozen=True, slots=True)
class TorchInfo:
    version: str
    cuda: str | None  # the CUDA runtime torch was built with (torch.version.cuda)
    arch_list: tuple[str, ...]
    cuda_available: bool | None
    nccl: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "cuda": self.cuda,
            "arch_list": list(self.arch_list),
            "cuda_available": self.cuda_available,
            "nccl": self.nccl,
        }


@dataclass(frozen=True, slots=True)
class Fingerprint:
    gpus: tuple[GpuInfo, ...] = ()
    driver_version: str | None = None
    cuda_driver: str | None = None  # highest CUDA version the driver supports, e.g. "13.0"
    cuda_runtime: str | None = None
    nvcc: str | None = None
    torch: TorchInfo | None = None
    nccl: str | None = None
    packages: tuple[Installed, ...] = ()
    python: str = ""
    os: str = ""
    notes: tuple[str, ...] = field(default=())
    interpreter: str = ""  # the Python whose environment was probed
    distributions: tuple[tuple[str, str], ...] = ()  # every package it sees, with version
    modules: tuple[tuple[str, tuple[str, ...]], ...] = ()  # distribution → import names
    libraries: tuple[tuple[str, tuple[str, ...]], ...] = ()  # stack package → libraries
    requires_torch: tuple[tuple[str, str, str], ...] = ()  # (package, version, requirement)

    @property
    def gpu_arch(self) -> Arch | None:
        return parse_arch(self.gpus[0].arch) if self.gpus else None

    def version_of(self, name: str) -> str | None:
        wanted = _norm(name)
        return next((p.version for p in self.packages if _norm(p.name) == wanted), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": [g.to_dict() for g in self.gpus],
            "driver_version": self.driver_version,
            "cuda_driver": self.cuda_driver,
            "cuda_runtime": self.cuda_runtime,
            "nvcc": self.nvcc,
            "torch": self.torch.to_dict() if self.torch else None,
            "nccl": self.nccl,
            "packages": {p.name: p.version for p in self.packages},
            "python": self.python,
            "interpreter": self.interpreter,
            "installed": dict(self.distributions),
            "os": self.os,
            "notes": list(self.notes),
        }

    def installed(self) -> dict[str, str]:
        """Every distribution the interpreter sees, with its version."""
        return dict(self.distributions)

    def import_names(self) -> dict[str, tuple[str, ...]]:
        """Distribution → the top-level modules it installs (``PyYAML`` → ``yaml``)."""
        return dict(self.modules)

    def stack_libraries(self) -> dict[str, list[Path]]:
        """Compiled libraries of the stack packages marked ``scan`` (when collected with
        ``libraries=True``)."""
        return {name: [Path(p) for p in paths] for name, paths in self.libraries}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --- NVML -------------------------------------------------------------------------------


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe_nvml(notes: list[str]) -> tuple[tuple[GpuInfo, ...], str | None, str | None]:
    """GPUs, driver version and the driver's CUDA version, or empty with a note."""
    try:
        import pynvml
    except ImportError:
        notes.append("NVML: nvidia-ml-py is not installed")
        return (), None, None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        notes.append(f"no NVIDIA GPU visible (NVML: {_text(exc) or type(exc).__name__})")
        return (), None, None
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda_driver: str | None = None
        try:
            packed = int(pynvml.nvmlSystemGetCudaDriverVersion_v2())
            cuda_driver = f"{packed // 1000}.{packed % 1000 // 10}"
        except Exception as exc:
            notes.append(f"NVML: CUDA driver version unknown ({_text(exc)})")
        gpus = []
        for i in range(int(pynvml.nvmlDeviceGetCount())):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory: int | None
            try:
                memory = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // (1024 * 1024)
            except Exception:
                memory = None
            gpus.append(
                GpuInfo(
                    index=i,
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    arch=Arch(int(major), int(minor)).sm,
                    memory_mib=memory,
                    mig=_mig_mode(pynvml, handle),
                )
            )
        if not gpus:
            notes.append("NVML found no GPU")
        return tuple(gpus), driver, cuda_driver
    except Exception as exc:
        notes.append(f"NVML query failed: {_text(exc) or type(exc).__name__}")
        return (), None, None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _mig_mode(pynvml: Any, handle: Any) -> str | None:
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except Exception:  # NotSupported on GPUs without MIG
        return None
    return "enabled" if int(current) == 1 else "disabled"


# --- torch ------------------------------------------------------------------------------


def probe_torch(notes: list[str]) -> TorchInfo | None:
    """torch's version, CUDA runtime and compiled arch list, imported only if installed."""
    return _torch_info(probe_script.probe_torch(notes))


def _torch_info(raw: Any) -> TorchInfo | None:
    if not isinstance(raw, dict):
        return None
    return TorchInfo(
        version=str(raw["version"]),
        cuda=raw.get("cuda"),
        arch_list=tuple(str(a) for a in raw.get("arch_list") or ()),
        cuda_available=raw.get("cuda_available"),
        nccl=raw.get("nccl"),
    )


# --- toolkit and the rest ---------------------------------------------------------------

_NVCC_RELEASE = re.compile(r"release (\d+\.\d+)")


def probe_nvcc() -> str | None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    try:
        done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    found = _NVCC_RELEASE.search(done.stdout)
    return found.group(1) if found else None


def _first_version(packages: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    table = {_norm(k): v for k, v in packages.items()}
    return next((table[_norm(n)] for n in names if _norm(n) in table), None)


_RUNTIMES = ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12")
_NCCLS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12")


def probe_environment(
    python: str | None, *, with_torch: bool = True, libraries: bool = False, timeout: float = 180
) -> dict[str, Any]:
    """What ``python``'s environment holds (``probe_script``'s report), probed in a
    subprocess of that interpreter; in-process for servedoctor's own (``None``). A Python
    that cannot be run gives a report with a note and nothing else."""
    stack = [[list(p.name), p.role, p.scan] for p in stack_packages()]
    if python is None:
        notes: list[str] = []
        report = probe_script.probe_distributions(stack, libraries)
        report["torch"] = probe_script.probe_torch(notes) if with_torch else None
        report["notes"] = notes
        report["python"] = f"{platform.python_version()} ({sys.executable})"
        report["prefix"] = sys.prefix
        return report
    args = json.dumps({"stack": stack, "libraries": libraries, "torch": with_torch})
    try:
        proc = subprocess.run([python, "-I", probe_script.__file__, args], capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        if not isinstance(report, dict):
            raise ValueError(report)
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        why = (proc.stderr.strip().splitlines() or [""])[-1] if "proc" in locals() else str(exc)
        return {"notes": [f"cannot probe the server's Python {python}: {why or exc}"],
                "python": python}  # fmt: skip
    return report


def collect(
    *, with_torch: bool = True, python: str | None = None, libraries: bool = False
) -> Fingerprint:
    """Probe this machine (NVML, nvcc) and the environment of ``python`` (the server's
    interpreter; servedoctor's own when None or the same). Never raises for a missing GPU,
    driver, package or interpreter."""
    notes: list[str] = []
    gpus, driver, cuda_driver = probe_nvml(notes)
    own = python is None or same_prefix(python)
    report = probe_environment(None if own else python, with_torch=with_torch, libraries=libraries)
    notes += [str(n) for n in report.get("notes", [])]
    packages = {str(k): str(v) for k, v in (report.get("packages") or {}).items()}
    torch_info = _torch_info(report.get("torch"))
    runtime = (torch_info.cuda if torch_info else None) or _first_version(packages, _RUNTIMES)
    if runtime and not (torch_info and torch_info.cuda):
        runtime = ".".join(runtime.split(".")[:2])
    nccl = (torch_info.nccl if torch_info else None) or _first_version(packages, _NCCLS)
    stack = tuple(Installed(str(n), str(v), str(r), bool(s))
                  for n, v, r, s in report.get("stack") or [])  # fmt: skip
    return Fingerprint(
        gpus=gpus,
        driver_version=driver,
        cuda_driver=cuda_driver,
        cuda_runtime=runtime,
        nvcc=probe_nvcc(),
        torch=torch_info,
        nccl=nccl,
        packages=stack,
        python=str(report.get("python", "")),
        os=f"{platform.system()} {platform.release()} {platform.machine()}",
        notes=tuple(notes),
        interpreter=sys.executable if own else str(python),
        distributions=tuple(sorted(packages.items())),
        modules=tuple(sorted((str(k), tuple(v)) for k, v in (report.get("modules") or {}).items())),
        libraries=tuple(
            sorted((str(k), tuple(v)) for k, v in (report.get("libraries") or {}).items())
        ),
        requires_torch=tuple(tuple(map(str, r)) for r in report.get("requires_torch") or []),  # type: ignore[misc]
    )
