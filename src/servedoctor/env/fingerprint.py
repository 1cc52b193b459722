"""The machine's fingerprint: GPUs, driver, CUDA, torch, NCCL and the serving stack.

Every probe is optional. NVML comes through ``pynvml`` (nvidia-ml-py); torch is imported
through importlib only when it is installed; nothing here raises because a GPU, a driver
or a package is missing — it says so in ``notes``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from servedoctor.env.arch import Arch, parse_arch
from servedoctor.env.stack import Installed, installed_stack, package_version


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
            "os": self.os,
            "notes": list(self.notes),
        }


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
            flags = torch._C._cuda_getArchFlags() or ""
            arch_list = flags.split()
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
    return TorchInfo(
        version=str(torch.__version__),
        cuda=cuda,
        arch_list=tuple(arch_list),
        cuda_available=available,
        nccl=nccl,
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


def _runtime_from_packages() -> str | None:
    for name in ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12"):
        version = package_version(name)
        if version:
            return ".".join(version.split(".")[:2])
    return None


def _nccl_from_packages() -> str | None:
    for name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12"):
        version = package_version(name)
        if version:
            return version
    return None


def collect(*, with_torch: bool = True) -> Fingerprint:
    """Probe this machine. Never raises for a missing GPU, driver or package."""
    notes: list[str] = []
    gpus, driver, cuda_driver = probe_nvml(notes)
    torch_info = probe_torch(notes) if with_torch else None
    runtime = (torch_info.cuda if torch_info else None) or _runtime_from_packages()
    nccl = (torch_info.nccl if torch_info else None) or _nccl_from_packages()
    return Fingerprint(
        gpus=gpus,
        driver_version=driver,
        cuda_driver=cuda_driver,
        cuda_runtime=runtime,
        nvcc=probe_nvcc(),
        torch=torch_info,
        nccl=nccl,
        packages=tuple(installed_stack()),
        python=platform.python_version() + f" ({sys.executable})",
        os=f"{platform.system()} {platform.release()} {platform.machine()}",
        notes=tuple(notes),
    )
