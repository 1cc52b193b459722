"""A library built with relocatable device code keeps a second fatbin for device linking."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from servedoctor.env.fatbin import scan_file

SOURCE = (
    '__global__ void k(int* x) { x[0] = 1; }\nextern "C" void launch(int* x) { k<<<1, 1>>>(x); }\n'
)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_relocatable_device_code_is_not_counted_as_loadable(tmp_path: Path) -> None:
    (tmp_path / "a.cu").write_text(SOURCE)
    lib = tmp_path / "librdc.so"
    subprocess.run(
        [
            "nvcc",
            "-rdc=true",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-gencode",
            "arch=compute_90,code=sm_90",
            "-gencode",
            "arch=compute_80,code=compute_80",
            str(tmp_path / "a.cu"),
            "-o",
            str(lib),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    result = scan_file(lib)
    # the loadable .nv_fatbin holds the linked sm_90 cubin; the PTX sits in __nv_relfatbin,
    # which the driver never loads, so it must not make the library look JIT-able
    assert result.sass == ["sm_90"]
    assert result.ptx == []
    assert "compute_80" in result.extras["relocatable"]
