"""Scan and judge real libraries compiled by nvcc; cuobjdump must agree where present."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from cudalibs import nvcc

from servedoctor.env.arch import parse_arch
from servedoctor.env.archjudge import judge
from servedoctor.env.cuobjdump import as_listed, cuobjdump_path, list_with_cuobjdump
from servedoctor.env.fatbin import scan_file
from servedoctor.env.ptx import cuda_for_ptx, driver_loads, parse_version

EXPECTED = {
    "sm80": (["sm_80"], []),
    "sm90a": (["sm_90a"], []),
    "sm90_ptx": (["sm_90"], ["compute_90"]),
    "sm120": (["sm_120"], []),
    "ptx80_plain": ([], ["compute_80"]),
    "several": (["sm_80", "sm_90a", "sm_100f"], ["compute_120"]),
}

GPUS = ["sm_80", "sm_86", "sm_90", "sm_100", "sm_103", "sm_120", "sm_121"]
E, C, P, N = "exact_sass", "compatible_sass", "ptx_jit", "none"
VERDICTS = {
    #            sm_80 sm_86 sm_90 sm_100 sm_103 sm_120 sm_121
    "sm80": [E, C, N, N, N, N, N],
    "sm90a": [N, N, E, N, N, N, N],
    "sm90_ptx": [N, N, E, P, P, P, P],
    "sm120": [N, N, N, N, N, E, C],
    "ptx80_plain": [P, P, P, P, P, P, P],
    "several": [E, C, E, E, C, P, P],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_scan_lists_sass_and_ptx(cuda_libs: dict[str, Path], name: str) -> None:
    result = scan_file(cuda_libs[name])
    assert result.error is None
    assert (result.sass, result.ptx) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(VERDICTS))
@pytest.mark.parametrize("gpu", GPUS)
def test_judgement(cuda_libs: dict[str, Path], name: str, gpu: str) -> None:
    verdict = judge(scan_file(cuda_libs[name]), parse_arch(gpu))
    assert verdict.how == VERDICTS[name][GPUS.index(gpu)]
    assert verdict.runnable is (verdict.how != "none")
    assert verdict.ptx_needs_cuda is None


def test_compressed_entries_are_read_from_their_headers(cuda_libs: dict[str, Path]) -> None:
    several = scan_file(cuda_libs["several"])
    assert several.compressed > 0  # built with -Xfatbin -compress-all
    assert scan_file(cuda_libs["sm80"]).compressed == 0


def test_message_names_what_is_missing(cuda_libs: dict[str, Path]) -> None:
    verdict = judge(scan_file(cuda_libs["sm90a"]), parse_arch("sm_120"))
    assert verdict.message == "libsm90a.so has sm_90a SASS and no PTX: no kernel for sm_120"


@pytest.mark.skipif(cuobjdump_path() is None, reason="cuobjdump is not installed")
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_cuobjdump_agrees(cuda_libs: dict[str, Path], name: str) -> None:
    listing = list_with_cuobjdump(cuda_libs[name])
    assert listing is not None
    result = scan_file(cuda_libs[name])
    assert (set(listing.sass), set(listing.ptx)) == (as_listed(result.sass), as_listed(result.ptx))


def test_ptx_isa_is_the_version_directive_of_the_ptx(cuda_libs: dict[str, Path]) -> None:
    # ptx80_plain is built without compression: its PTX text (`.version X.Y`) is in the file
    raw = cuda_libs["ptx80_plain"].read_bytes()
    match = re.search(rb"\.version (\d+)\.(\d+)", raw)
    assert match is not None
    assert scan_file(cuda_libs["ptx80_plain"]).ptx_isa == [f"{int(match[1])}.{int(match[2])}"]


def test_ptx_newer_than_the_driver_is_not_runnable(cuda_libs: dict[str, Path]) -> None:
    scan = scan_file(cuda_libs["sm90_ptx"])
    isa = parse_version(scan.ptx_isa[0])
    assert isa is not None
    needed = cuda_for_ptx(isa)
    assert needed is not None
    older = (needed[0], needed[1] - 1) if needed[1] else (needed[0] - 1, 9)
    gpu = parse_arch("sm_120")
    assert judge(scan, gpu, driver_cuda=needed).how == "ptx_jit"
    assert judge(scan, gpu).how == "ptx_jit"  # driver unknown: PTX counts
    blocked = judge(scan, gpu, driver_cuda=older)
    assert blocked.how == "ptx_too_new" and not blocked.runnable
    assert blocked.modules_without_code == blocked.modules
    assert blocked.message.endswith(
        f"needs a CUDA {needed[0]}.{needed[1]} driver; this driver supports CUDA "
        f"{older[0]}.{older[1]}"
    )
    # SASS does not depend on the driver's PTX support
    assert judge(scan, parse_arch("sm_90"), driver_cuda=older).how == "exact_sass"


def test_nvcc_writes_ptx_its_own_release_can_load(cuda_libs: dict[str, Path]) -> None:
    isa = parse_version(scan_file(cuda_libs["sm90_ptx"]).ptx_isa[0])
    version = subprocess.run(
        [nvcc() or "nvcc", "--version"], capture_output=True, text=True, check=True
    ).stdout
    release = re.search(r"release (\d+\.\d+)", version)
    assert isa is not None and release is not None
    assert driver_loads(isa, parse_version(release[1]))
