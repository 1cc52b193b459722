"""Servers that are one compiled binary (llama.cpp, Ollama): their own knobs, no pip changes."""

from __future__ import annotations

from servedoctor.diagnose import diagnose_text
from servedoctor.engines.adapter import spellings
from servedoctor.model import Change

OLLAMA = (
    'time=2025-09-28T22:25:24.499-04:00 level=INFO source=routes.go:1 msg="Listening on '
    '127.0.0.1:11434 (version 0.12.3)"\n'
    'time=2025-09-28T22:25:24.501-04:00 level=INFO source=server.go:672 msg="loading model"\n'
)


def _changes(text: str) -> list[Change]:
    return [c for h in diagnose_text(text).hypotheses for c in h.changes]


def test_ollama_is_recognised_with_its_version() -> None:
    d = diagnose_text(OLLAMA + "Error: llama runner process has terminated: exit status 2\n")
    assert (d.engine, d.extras["engine_version"]) == ("ollama", "0.12.3")


def test_a_kernel_without_code_for_this_arch_turns_flash_attention_off_in_ollamas_spelling() -> (
    None
):
    log = OLLAMA + (
        "ggml-cuda/fattn-wmma-f16.cu:437: ERROR: CUDA kernel flash_attn_ext_f16 has no device "
        "code compatible with CUDA arch 720. ggml-cuda.cu was compiled for: 750,800\n"
    )
    d = diagnose_text(log)
    assert (d.error_class, d.component) == ("arch_unsupported", "attention")
    changes = _changes(log)
    assert Change("env", "OLLAMA_FLASH_ATTENTION", "0") in changes
    assert Change("package", "ollama", "the release before 0.12.3") in changes


def test_no_pip_package_or_pytorch_setting_is_proposed_for_a_binary_server() -> None:
    log = OLLAMA + "CUDA error: out of memory\n  current device: 0, in function alloc\n"
    changes = _changes(log)
    assert diagnose_text(log).error_class == "cuda_oom"
    assert all(c.name != "PYTORCH_CUDA_ALLOC_CONF" for c in changes)
    assert all(c.kind != "package" or c.name == "ollama" for c in changes)
    # a Python server keeps PyTorch's allocator setting
    assert [s.env for s in spellings("expandable_segments", "vllm")] == ["PYTORCH_CUDA_ALLOC_CONF"]
    assert spellings("expandable_segments", "llamacpp") == []


def test_nccl_saying_it_has_no_network_plugin_is_not_a_missing_library() -> None:
    log = (
        "host:1:1 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object "
        "file: No such file or directory No plugin found (libnccl-net.so), using internal "
        "implementation\n"
    )
    assert diagnose_text(log).error_class != "missing_dependency"


def test_a_minimum_version_message_proposes_that_minimum() -> None:
    log = (
        "Exception: flashinfer_python is installed with version 0.6.3, which is less than the "
        "minimum required version 0.6.4. Please reinstall.\n"
    )
    assert Change("package", "flashinfer_python", ">=0.6.4") in _changes(log)


def test_ollamas_vendored_ggml_paths_name_ollama_not_llama_cpp() -> None:
    log = (
        "Error: 500 Internal Server Error: llama runner process has terminated: CUDA error: "
        "invalid argument\n  current device: 0, in function ggml_backend_cuda_buffer_set_tensor "
        "at //ml/backend/ggml/ggml/src/ggml-cuda/ggml-cuda.cu:667\n"
        "//ml/backend/ggml/ggml/src/ggml-cuda/ggml-cuda.cu:84: CUDA error\n"
    )
    d = diagnose_text(log)
    assert d.engine == "ollama"
    assert d.phase == "load"  # set_tensor copies weights to the GPU


def test_gpus_without_peer_access_turn_the_custom_all_reduce_off() -> None:
    log = (
        "[TensorRT-LLM][INFO] Loaded engine size: 15448 MiB\n[TensorRT-LLM][ERROR] CUDA runtime "
        "error in error: peer access is not supported between these two devices\n"
    )
    d = diagnose_text(log)
    assert (d.error_class, d.component) == ("nccl_error", "communication")
    assert Change("flag", "--use_custom_all_reduce", "disable") in _changes(log)


def test_ggmls_own_flash_attention_kernel_is_not_the_flash_attn_package() -> None:
    log = (
        "ggml\\src\\ggml-cuda\\template-instances\\../fattn-mma-f16.cuh:1246: ERROR: CUDA kernel "
        "flash_attn_ext_f16 has no device code compatible with CUDA arch 750.\n"
    )
    d = diagnose_text(log)
    assert (d.component, d.culprit) == ("attention", "ggml")
    assert all(c.name != "flash-attn" for c in _changes(log))


def test_a_line_every_engine_prints_does_not_decide_the_engine() -> None:
    log = (
        "INFO:     Application startup complete.\n"
        "ERROR 06-13 07:35:59 [core.py:517] cupy_backends.cuda.libs.nccl.NcclError: "
        "NCCL_ERROR_SYSTEM_ERROR: unhandled system error\n"
    )
    assert diagnose_text(log).engine != "lmdeploy"
