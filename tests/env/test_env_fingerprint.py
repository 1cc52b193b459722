from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from servedoctor.env import fingerprint as fpmod
from servedoctor.env import probe_script
from servedoctor.env.arch import Arch
from servedoctor.env.fingerprint import collect, probe_nvml


class _Memory:
    total = 143771 * 1024 * 1024


class _NVMLError(Exception):
    pass


def _fake_pynvml(*, fail_init: bool = False, mig: bool = False) -> types.ModuleType:
    mod = types.ModuleType("pynvml")

    def init() -> None:
        if fail_init:
            raise _NVMLError("NVML Shared Library Not Found")

    def mig_mode(_h: Any) -> tuple[int, int]:
        if not mig:
            raise _NVMLError("Not Supported")
        return (1, 1)

    mod.nvmlInit = init  # type: ignore[attr-defined]
    mod.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    mod.nvmlSystemGetDriverVersion = lambda: "580.95.05"  # type: ignore[attr-defined]
    mod.nvmlSystemGetCudaDriverVersion_v2 = lambda: 13000  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = lambda: 2  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = lambda h: b"NVIDIA H200"  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCudaComputeCapability = lambda h: (9, 0)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMemoryInfo = lambda h: _Memory()  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMigMode = mig_mode  # type: ignore[attr-defined]
    return mod


def test_nvml_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(mig=True))
    notes: list[str] = []
    gpus, driver, cuda = probe_nvml(notes)
    assert [(g.name, g.arch, g.memory_mib, g.mig) for g in gpus] == [
        ("NVIDIA H200", "sm_90", 143771, "enabled")
    ] * 2
    assert (driver, cuda, notes) == ("580.95.05", "13.0", [])


def test_no_gpu_is_a_note_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(fail_init=True))
    notes: list[str] = []
    assert probe_nvml(notes) == ((), None, None)
    assert notes == ["no NVIDIA GPU visible (NVML: NVML Shared Library Not Found)"]


def test_collect_without_gpu_and_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(fail_init=True))
    monkeypatch.setattr(probe_script.importlib.util, "find_spec", lambda name: None)
    fp = collect()
    assert fp.gpus == () and fp.torch is None and fp.gpu_arch is None
    assert "torch is not installed" in fp.notes
    data = fp.to_dict()
    assert data["gpus"] == [] and data["torch"] is None
    assert set(data) >= {"driver_version", "cuda_driver", "cuda_runtime", "packages", "notes"}


def test_torch_probe_reads_compiled_arch_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = types.SimpleNamespace(
        __version__="2.11.0+cu130",
        version=types.SimpleNamespace(cuda="13.0"),
        cuda=types.SimpleNamespace(
            is_available=lambda: False,
            get_arch_list=lambda: [],  # empty without a usable GPU
            nccl=types.SimpleNamespace(version=lambda: (2, 27, 7)),
        ),
        _C=types.SimpleNamespace(_cuda_getArchFlags=lambda: "sm_75 sm_80 sm_90 sm_100 sm_120"),
    )
    monkeypatch.setattr(probe_script.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(probe_script.importlib, "import_module", lambda name: torch)
    info = fpmod.probe_torch([])
    assert info is not None
    assert info.arch_list == ("sm_75", "sm_80", "sm_90", "sm_100", "sm_120")
    assert (info.cuda, info.nccl, info.cuda_available) == ("13.0", "2.27.7", False)


def test_gpu_arch_from_first_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    monkeypatch.setattr(probe_script.importlib.util, "find_spec", lambda name: None)
    assert collect().gpu_arch == Arch(9, 0)
