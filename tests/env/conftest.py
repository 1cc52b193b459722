from __future__ import annotations

from pathlib import Path

import pytest
from cudalibs import build_all, nvcc


@pytest.fixture(scope="session")
def cuda_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny CUDA libraries, built once per session; skipped without nvcc."""
    if nvcc() is None:
        pytest.skip("nvcc is not installed")
    return build_all(tmp_path_factory.mktemp("cudalibs"))
