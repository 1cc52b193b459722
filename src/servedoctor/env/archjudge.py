"""Can this GPU run a library's device code? By exact SASS, compatible SASS, PTX JIT, or not.

The rules are CUDA's own:

* SASS (a cubin) for ``sm_XY`` runs on devices of the same major version and a minor
  version >= Y: "binary compatibility is guaranteed from one minor revision to the next one,
  but not from one minor revision to the previous one or across major revisions"
  (CUDA C++ Programming Guide, "Binary Compatibility",
  https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#binary-compatibility).
* PTX for ``compute_XY`` is JIT-compiled by the driver for any device of compute capability
  >= X.Y, newer majors included (same guide, "PTX Compatibility").
* Architecture-specific code, ``sm_XYa`` / ``compute_XYa`` (Hopper's ``sm_90a`` onwards),
  uses features that are not carried forward: it runs on compute capability X.Y *only*,
  neither forward nor backward compatible (guide, "Feature Availability", and
  https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#feature-availability).
* Family-specific code, ``sm_XYf`` / ``compute_XYf`` (CUDA 12.9+), runs on the devices of
  the same family: same major version, minor version >= Y — ``sm_100f`` runs on 10.0 and
  10.3, not on 11.0 or 12.0 (NVIDIA technical blog "NVIDIA Blackwell and NVIDIA CUDA 12.9
  Introduce Family-Specific Architecture Features",
  https://developer.nvidia.com/blog/nvidia-blackwell-and-nvidia-cuda-12-9-introduce-family-specific-architecture-features).

The driver prefers SASS for the device's own arch, then compatible SASS, then JIT from PTX.
It JIT-compiles only PTX whose ISA version its CUDA release knows (``env/ptx.py``): a library
whose only route to the GPU is newer PTX is judged ``ptx_too_new`` — it fails at first launch
with "the provided PTX was compiled with an unsupported toolchain".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from servedoctor.env.arch import Arch
from servedoctor.env.fatbin import Fatbin, FatbinEntry, ScanResult
from servedoctor.env.ptx import Version, cuda_for_ptx, driver_loads, format_version

How = Literal["exact_sass", "compatible_sass", "ptx_jit", "ptx_too_new", "none", "no_device_code"]
#: The judgements under which the GPU cannot run the library's kernels.
NOT_RUNNABLE: frozenset[How] = frozenset({"none", "ptx_too_new"})


def sass_runs_on(code: Arch, gpu: Arch) -> bool:
    """Does a cubin built for ``code`` run on a device of compute capability ``gpu``?"""
    if code.variant == "a":  # arch-specific: exactly X.Y
        return (code.major, code.minor) == (gpu.major, gpu.minor)
    # plain and family-specific cubins: same major, minor >= Y
    return code.major == gpu.major and gpu.minor >= code.minor


def ptx_jits_on(code: Arch, gpu: Arch) -> bool:
    """Can the driver JIT PTX built for ``code`` into SASS for ``gpu``?"""
    if code.variant == "a":  # arch-specific PTX only targets X.Y itself
        return (code.major, code.minor) == (gpu.major, gpu.minor)
    if code.variant == "f":  # family-specific PTX stays inside its family
        return code.major == gpu.major and gpu.minor >= code.minor
    return (gpu.major, gpu.minor) >= (code.major, code.minor)


def judge_code(sass: tuple[Arch, ...], ptx: tuple[Arch, ...], gpu: Arch) -> How:
    """The best way ``gpu`` can run code that carries these SASS and PTX targets."""
    gpu = gpu.base
    usable = [a for a in sass if sass_runs_on(a, gpu)]
    if any((a.major, a.minor) == (gpu.major, gpu.minor) for a in usable):
        return "exact_sass"
    if usable:
        return "compatible_sass"
    if any(ptx_jits_on(a, gpu) for a in ptx):
        return "ptx_jit"
    if not sass and not ptx:
        return "no_device_code"
    return "none"


@dataclass(frozen=True, slots=True)
class Judgement:
    """One library judged for one GPU."""

    file: str
    gpu: Arch
    how: How
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    modules: int
    modules_without_code: int
    #: with ``ptx_too_new``: the CUDA version the PTX needs, and the driver's
    ptx_needs_cuda: str | None = None
    driver_cuda: str | None = None

    @property
    def runnable(self) -> bool:
        return self.how not in NOT_RUNNABLE

    @property
    def message(self) -> str:
        name = self.file.rsplit("/", 1)[-1]
        carries = _carries(self.sass, self.ptx)
        gpu = self.gpu.sm
        if self.how == "none":
            return f"{name} has {carries}: no kernel for {gpu}"
        if self.how == "ptx_too_new":
            needs = f"a CUDA {self.ptx_needs_cuda}" if self.ptx_needs_cuda else "a newer"
            return (
                f"{name} has {carries}: no SASS for {gpu}, and its PTX needs {needs} "
                f"driver; this driver supports CUDA {self.driver_cuda}"
            )
        if self.how == "ptx_jit":
            return f"{name} has {carries}: no SASS for {gpu}, the driver must JIT its PTX"
        if self.how == "compatible_sass":
            return f"{name} has {carries}: runs on {gpu} through compatible SASS"
        if self.how == "exact_sass":
            return f"{name} has SASS for {gpu}"
        return f"{name} carries no CUDA device code"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "sass": list(self.sass),
            "ptx": list(self.ptx),
            "runnable": self.runnable,
            "how": self.how,
            "gpu": self.gpu.sm,
            "modules": self.modules,
            "modules_without_code": self.modules_without_code,
            "ptx_needs_cuda": self.ptx_needs_cuda,
            "driver_cuda": self.driver_cuda,
        }


def _carries(sass: tuple[str, ...], ptx: tuple[str, ...]) -> str:
    parts = []
    parts.append(f"{_join(sass)} SASS" if sass else "no SASS")
    parts.append(f"PTX {_join(ptx)}" if ptx else "no PTX")
    return " and ".join(parts)


def _join(items: tuple[str, ...]) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _judge_entries(
    entries: list[FatbinEntry], gpu: Arch, driver_cuda: Version | None
) -> tuple[How, Version | None]:
    """How ``gpu`` runs these entries under this driver; with ``ptx_too_new``, the CUDA
    version the PTX that would otherwise JIT needs."""
    sass = tuple(e.arch for e in entries if e.kind == "sass")
    ptx = [e for e in entries if e.kind == "ptx"]
    loadable = tuple(e.arch for e in ptx if driver_loads(e.ptx_isa, driver_cuda))
    how = judge_code(sass, loadable, gpu)
    if how != "none":
        return how, None
    blocked = [e for e in ptx if ptx_jits_on(e.arch, gpu.base) and e.ptx_isa is not None]
    if not blocked:
        return how, None
    needed = [cuda_for_ptx(e.ptx_isa) for e in blocked if e.ptx_isa is not None]
    known = [n for n in needed if n is not None]
    return "ptx_too_new", min(known) if known else None


def judge(scan: ScanResult, gpu: Arch, *, driver_cuda: Version | None = None) -> Judgement:
    """Judge a whole library: the union of its modules decides, as cuobjdump lists it.

    A library is loaded module by module as its kernels launch, so one module without code
    for the GPU does not stop the others; those are counted in ``modules_without_code``.
    ``driver_cuda`` (the CUDA version the driver supports, e.g. (12, 8)) rules out PTX too
    new for it; unknown, every PTX counts.
    """
    entries = [e for e in scan.entries if e.kind in ("sass", "ptx")]
    how, needs = _judge_entries(entries, gpu, driver_cuda)
    modules = [fb for fb in scan.fatbins if fb.sass or fb.ptx]
    without = sum(1 for fb in modules if _module_how(fb, gpu, driver_cuda) in NOT_RUNNABLE)
    return Judgement(
        file=scan.file,
        gpu=gpu.base,
        how=how,
        sass=tuple(scan.sass),
        ptx=tuple(scan.ptx),
        modules=len(modules),
        modules_without_code=without,
        ptx_needs_cuda=None if needs is None else format_version(needs),
        driver_cuda=None if driver_cuda is None else format_version(driver_cuda),
    )


def _module_how(fatbin: Fatbin, gpu: Arch, driver_cuda: Version | None) -> How:
    entries = [e for e in fatbin.entries if e.kind in ("sass", "ptx")]
    return _judge_entries(entries, gpu, driver_cuda)[0]
