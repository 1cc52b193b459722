"""Scan and judge real libraries compiled by nvcc; cuobjdump must agree where present."""

from __future__ import annotations

from pathlib import Path

import pytest

from servedoctor.env.arch import parse_arch
from servedoctor.env.archjudge import judge
from servedoctor.env.cuobjdump import as_listed, cuobjdump_path, list_with_cuobjdump
from servedoctor.env.fatbin import scan_file

EXPECTED = {
    "sm80": (["sm_80"], []),
    "sm90a": (["sm_90a"], []),
    "sm90_ptx": (["sm_90"], ["compute_90"]),
    "sm120": (["sm_120"], []),
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
