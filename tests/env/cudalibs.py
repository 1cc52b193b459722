"""Tiny CUDA shared libraries built with this machine's nvcc, for the arch-scan tests.

Also a script: ``python tests/env/cudalibs.py OUTDIR`` builds them into OUTDIR (used by
scripts/device/preflight.sh to check the scan against cuobjdump where both exist).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

KERNEL = r"""
__global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void launch_axpy(float a, const float* x, float* y, int n) {
    axpy<<<(n + 255) / 256, 256>>>(a, x, y, n);
}
"""

#: library name → (nvcc -gencode arguments, extra nvcc arguments)
TARGETS: dict[str, tuple[list[str], list[str]]] = {
    "sm80": (["arch=compute_80,code=sm_80"], []),
    "sm90a": (["arch=compute_90a,code=sm_90a"], []),
    "sm90_ptx": (["arch=compute_90,code=[sm_90,compute_90]"], []),
    "sm120": (["arch=compute_120,code=sm_120"], []),
    "ptx80_plain": (["arch=compute_80,code=compute_80"], ["-Xfatbin", "--compress=false"]),
    "several": (
        [
            "arch=compute_80,code=sm_80",
            "arch=compute_90a,code=sm_90a",
            "arch=compute_100f,code=sm_100f",
            "arch=compute_120,code=compute_120",
        ],
        ["-Xfatbin", "-compress-all"],
    ),
}


def nvcc() -> str | None:
    return shutil.which("nvcc")


def build_one(outdir: Path, name: str, source: Path) -> Path:
    gencodes, extra = TARGETS[name]
    lib = outdir / f"lib{name}.so"
    cmd = [nvcc() or "nvcc", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-o", str(lib)]
    for g in gencodes:
        cmd += ["-gencode", g]
    subprocess.run([*cmd, *extra, str(source)], check=True, capture_output=True, timeout=300)
    return lib


def build_all(outdir: Path) -> dict[str, Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    source = outdir / "axpy.cu"
    source.write_text(KERNEL, encoding="utf-8")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(build_one, outdir, name, source) for name in TARGETS}
        return {name: f.result() for name, f in futures.items()}


if __name__ == "__main__":
    if nvcc() is None:
        print("nvcc not found: nothing built")
        sys.exit(0)
    for name, path in build_all(Path(sys.argv[1])).items():
        print(f"{name}: {path}")
