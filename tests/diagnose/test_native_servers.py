"""Native (ggml-based) servers: abort lines, kernel source paths, KoboldCpp's own log."""

from __future__ import annotations

import pytest

from servedoctor.diagnose import diagnose_text
from servedoctor.model import REMOVE


@pytest.mark.parametrize(
    "line",
    [
        "ggml/src/ggml-cuda/fattn.cu:110: fatal error",
        "exception: access violation writing 0x0000000000000050",
        "Illegal instruction (core dumped)",
    ],
)
def test_a_native_abort_is_a_failure(line: str) -> None:
    d = diagnose_text(f"main: loading model\n{line}\n")
    assert d.error_class is not None


def test_a_compilers_fatal_error_is_not_a_native_abort() -> None:
    # file:line:column: is a build message, not a process that stopped
    d = diagnose_text("csrc/ops.cu:12:10: fatal error: cuda_fp8.h: No such file or directory\n")
    assert (d.error_class, d.phase) == ("build_failure", "install")


@pytest.mark.parametrize(
    ("path", "component"),
    [
        ("ggml/src/ggml-cuda/fattn.cu", "attention"),
        (r"d:\a\llama.cpp\ggml\src\ggml-cuda\fattn.cu", "attention"),
        ("ggml/src/ggml-cuda/mmq.cu", "gemm_quant"),
        (r"D:\a\koboldcpp\koboldcpp\ggml\src\ggml-cuda\mmv.cu", "gemm_quant"),
    ],
)
def test_a_ggml_kernel_source_file_names_the_component(path: str, component: str) -> None:
    d = diagnose_text(f"{path}:51: fatal error\n")
    assert d.component == component
    assert d.phase == "serving"  # a kernel's source file: the model was computing


def test_an_assert_on_expert_ids_is_in_the_moe_layers() -> None:
    d = diagnose_text(
        "ggml/src/ggml-backend.cpp:1615: GGML_ASSERT(id >= 0 && id < n_expert) failed\n"
    )
    assert d.engine == "llamacpp"
    assert d.component == "moe"


def test_an_attention_kernel_abort_proposes_flash_attention_off_first() -> None:
    d = diagnose_text("ggml/src/ggml-cuda/fattn.cu:110: fatal error\n")
    first = d.hypotheses[0]
    assert (first.changes[0].name, first.changes[0].value) == ("--flash-attn", "off")
    assert first.rule == "FALL012"  # the located component's rule, not the class's guess


def test_the_more_confident_of_two_rules_speaks_for_a_shared_change() -> None:
    d = diagnose_text("ggml/src/ggml-cuda/fattn.cu:110: fatal error\n")
    same = [h for h in d.hypotheses if h.changes[0].name == "--flash-attn"]
    assert len(same) == 1
    assert same[0].confidence > 0.12 * 0.85  # above FALL010's guess for the same change


KOBOLD = (
    "***\nWelcome to KoboldCpp - Version 1.76\n"
    "Initializing dynamic library: koboldcpp_cublas.dll\n"
    "Starting Kobold API on port 5001 at http://localhost:5001/api/\n"
)


def test_koboldcpp_is_recognised_with_its_version_and_phases() -> None:
    log = KOBOLD + (
        "Processing Prompt [BLAS] (7168 / 7321 tokens)ggml_new_tensor_impl: not enough space in "
        "the scratch memory pool (needed 1279262720, available 1197473792)\n"
    )
    d = diagnose_text(log)
    assert d.engine == "koboldcpp"
    assert d.extras["engine_version"] == "1.76"
    assert d.phase == "prefill"
    assert d.component == "memory"
    change = d.hypotheses[0].changes[0]
    assert change.name == "--blasbatchsize"
    assert change.value is not None and int(change.value) < 1279262720


def test_koboldcpp_turns_flash_attention_off_by_removing_its_switch() -> None:
    d = diagnose_text(
        KOBOLD + "ggml/src/ggml-cuda/fattn.cu:110: fatal error\n",
        command_flags={"--flashattention": None},
    )
    assert d.engine == "koboldcpp"
    change = d.hypotheses[0].changes[0]
    assert (change.name, change.value) == ("--flashattention", REMOVE)


def test_a_native_backtrace_alone_is_a_crash_located_by_its_frames() -> None:
    log = (
        "#3 ggml_cuda_flash_attn_ext_mma_f16(ggml_backend_cuda_context&, ggml_tensor*)\n"
        "#4 ggml_backend_cuda_graph_compute(ggml_backend*, ggml_cgraph*)\n"
        "#6 llama_context::graph_compute(ggml_cgraph*, bool)\n"
        "#8 llama_context::decode(llama_batch const&)\n"
    )
    d = diagnose_text(log)
    assert d.error_class == "other"
    assert d.engine == "llamacpp"  # its own C++ symbols, not another ggml server's markers
    assert d.component == "attention"


def test_one_native_frame_is_not_a_crash() -> None:
    assert diagnose_text("#3 some_function(int)\n").error_class is None


def test_without_the_command_a_switch_the_failure_shows_on_is_offered_for_removal() -> None:
    d = diagnose_text(KOBOLD + "ggml/src/ggml-cuda/fattn.cu:110: fatal error\n")
    change = d.hypotheses[0].changes[0]
    assert (change.name, change.value) == ("--flashattention", REMOVE)


def test_with_the_command_known_a_switch_it_lacks_is_not_removed() -> None:
    d = diagnose_text(
        KOBOLD + "ggml/src/ggml-cuda/fattn.cu:110: fatal error\n",
        command_flags={"--contextsize": "4096"},
    )
    assert "--flashattention" not in [c.name for h in d.hypotheses for c in h.changes]


LLAMA_WARMUP = (
    "llama_context: n_ctx = 4096\n"
    "common_init_from_params: warming up the model with an empty run - please wait ... "
    "(--no-warmup to disable)\n"
)


def test_llama_cpp_kernel_errors_before_it_listens_are_its_warm_up() -> None:
    log = LLAMA_WARMUP + (
        "CUDA error: invalid resource handle\n"
        "  current device: 0, in function ggml_cuda_compute_forward at ggml/src/ggml-cuda/ggml-cuda.cu:2738\n"
    )
    assert diagnose_text(log).phase == "warmup"


def test_after_it_listens_they_are_serving_and_prompt_processing_is_prefill() -> None:
    listening = LLAMA_WARMUP + "main: server is listening on http://127.0.0.1:8080\n"
    crash = "ggml/src/ggml-cuda/fattn.cu:110: fatal error\n"
    assert diagnose_text(listening + crash).phase == "serving"
    prompt = "slot update_slots: id  0 | task 0 | prompt processing progress, n_past = 4096\n"
    assert diagnose_text(listening + prompt + crash).phase == "prefill"


def test_a_sycl_error_is_a_failure_located_by_its_function() -> None:
    log = (
        "SYCL error: CHECK_TRY_ERROR(dpct::gemm_batch(*main_stream, trans, nontrans))\n"
        "  in function ggml_sycl_mul_mat_batched_sycl at ggml/src/ggml-sycl.cpp:3438\n"
    )
    d = diagnose_text(log)
    assert (d.error_class, d.phase, d.component) == ("other", "serving", "gemm_quant")


def test_a_placeholder_named_triton_backend_is_not_sglangs_triton_attention() -> None:
    log = "E0101 failed to load 'tensorrt_llm' version 1: unable to find backend '${triton_backend}'\n"
    d = diagnose_text(log)
    assert d.culprit != "triton"
    assert d.phase == "load"


def test_a_step_halves_the_engines_own_default_when_the_command_does_not_set_it() -> None:
    d = diagnose_text(
        "ggml_cuda_init: found 1 ROCm devices:\n"
        "ggml/src/ggml-cuda/ggml-cuda.cu:359: HipVMM Failure: out of memory\n"
    )
    changes = [(c.name, c.value) for h in d.hypotheses for c in h.changes]
    assert ("--ubatch-size", "256") in changes  # llama.cpp's own 512, halved


def test_a_binary_server_still_gets_the_system_stack_it_runs_on() -> None:
    log = (
        "ggml_cuda_init: found 1 ROCm devices:\n"
        "Segmentation fault (core dumped)\n"
        "segfault at 10 ip 7f11 sp 7ffd error 4 in libamd_comgr.so.3.0\n"
    )
    d = diagnose_text(log)
    assert d.engine == "llamacpp"
    assert ("rocm", "another release") in [
        (c.name, c.value) for h in d.hypotheses for c in h.changes
    ]


def test_an_abort_in_the_sampler_is_a_decode_step_in_sampling() -> None:
    log = (
        "#3  0x00005555 in ggml_abort ()\n"
        "#4  0x00005556 in common_sampler_sample(common_sampler*, llama_context*, int, bool) ()\n"
        "#5  0x00005557 in server_context::update_slots() ()\n"
        "#6  0x00005558 in main ()\n"
    )
    d = diagnose_text(log)
    assert (d.component, d.phase) == ("sampling", "decode")


def test_the_llama_cpp_sources_and_ggml_cuda_functions_name_the_engine() -> None:
    assert diagnose_text(
        "/b/llama.cpp/src/llama.cpp:6171: GGML_ASSERT(a == b) failed\n"
    ).engine == ("llamacpp")
    glued = "done in 12.0 msggml_cuda_host_malloc: failed to allocate 5.00 MiB of pinned memory: out of memory\n"
    d = diagnose_text(glued)
    assert d.engine == "llamacpp"
    assert d.error_class == "other"  # host memory, not the GPU's
    assert ("GGML_CUDA_NO_PINNED", "1") in [
        (c.name, c.value) for h in d.hypotheses for c in h.changes
    ]


def test_a_native_library_reporting_a_failed_call_is_a_failure() -> None:
    d = diagnose_text("Error occurred when running GEMM! (numBatches: 8, GemmMNK: 64 64 64)\n")
    assert d.error_class == "other"


def test_llama_server_s_own_load_line_dates_a_loader_assert_to_load() -> None:
    log = (
        "0.00.034.405 I srv    load_model: loading model '/models/m.gguf'\n"
        "/src/llama.cpp/src/llama-model.cpp:1227: GGML_ASSERT(hparams.n_layer_dense < 4) failed\n"
    )
    d = diagnose_text(log)
    assert (d.engine, d.phase, d.component) == ("llamacpp", "load", "model")
    assert d.error_class == "model_unsupported"


def test_ollama_s_runner_under_its_new_name_is_still_ollama_s() -> None:
    log = (
        "Error: 500 Internal Server Error: llama-server process has terminated: exit status 1: "
        "radv/amdgpu: Not enough memory for command submission.\n"
    )
    d = diagnose_text(log)
    assert (d.engine, d.error_class) == ("ollama", "cuda_oom")


def test_a_native_server_s_undated_failure_happened_while_it_loaded_the_model() -> None:
    log = "Error: llama runner process has terminated: error:unexpected end of stream\n"
    d = diagnose_text(log)
    assert (d.engine, d.error_class, d.phase) == ("ollama", "other", "load")
    # a Python server's undated failure stays at start-up
    assert diagnose_text("RuntimeError: something odd\n", engine="vllm").phase == "startup"


def test_ggml_s_cuda_check_abort_line_is_a_failure() -> None:
    d = diagnose_text("ggml/src/ggml-cuda/ggml-cuda.cu:102: CUDA error\n")
    assert (d.engine, d.error_class) == ("llamacpp", "other")


def test_a_matmul_by_expert_id_is_the_moe_layers() -> None:
    log = (
        "CUDA error: an illegal memory access was encountered\n"
        "current device: 0, in function launch_mul_mat_q_id at /src/ggml/src/ggml-cuda/mmq_id_common.cuh:3976\n"
    )
    assert diagnose_text(log).component == "moe"


@pytest.mark.parametrize(
    "marker",
    [
        'INFO [            update_slots] kv cache rm [p0, end) | tid="1" id_slot=0 p0=24576',
        'VERB [            update_slots] tokenizing prompt | tid="1" id_slot=0 id_task=0',
    ],
)
def test_an_older_servers_prompt_chunks_date_a_failure_to_prefill(marker: str) -> None:
    log = (
        "llama_model_loader: loaded meta data\n"
        "main: server is listening on http://127.0.0.1:8080\n"
        f"{marker}\n"
        "ggml/src/ggml-cuda/ggml-cuda.cu:122: CUDA error\n"
    )
    assert diagnose_text(log).phase == "prefill"


def test_ollamas_gpu_discovery_line_names_it_without_its_key_value_format() -> None:
    # the line as people paste it, its time= level= msg= prefix cut away
    log = (
        'inference compute  filter_id=GPU-4f7d  library=CUDA compute=6.1 name=CUDA0 description="Tesla P40"\n'
        "ggml-cuda.cu:106: CUDA error\n"
        "CUDA error: the provided PTX was compiled with an unsupported toolchain.\n"
    )
    assert diagnose_text(log).engine == "ollama"


def test_a_forks_own_sources_name_the_package_to_change() -> None:
    # ik_llama.cpp's iqk kernels abort; the release to try is the fork's, not llama.cpp's
    fork = diagnose_text(
        "llm_load_tensors: offloaded 62/62 layers to GPU\n"
        "/src/ik_llama.cpp/ggml/src/iqk/iqk_mul_mat.cpp:551: GGML_ASSERT(Nx%num_rows == 0) failed\n"
    )
    plain = diagnose_text(
        "llm_load_tensors: offloaded 62/62 layers to GPU\n"
        "/src/llama.cpp/ggml/src/ggml-cuda/mmq.cu:551: GGML_ASSERT(nrows > 0) failed\n"
    )
    packages = {
        name: {c.name for h in d.hypotheses for c in h.changes if c.kind == "package"}
        for name, d in (("fork", fork), ("plain", plain))
    }
    assert "ik_llama.cpp" in packages["fork"] and "llama.cpp" not in packages["fork"]
    assert "llama.cpp" in packages["plain"] and "ik_llama.cpp" not in packages["plain"]


@pytest.mark.parametrize(
    ("folder", "package"),
    [
        # a binding's CI build of its own copy of llama.cpp
        ("/home/runner/work/xllamacpp/xllamacpp/thirdparty/llama.cpp", "xllamacpp"),
        # pip's temporary build folder and an unpacked sdist carry a hash and a version
        (
            "/tmp/pip-install-zh/llama-cpp-python_c40ab0ad2da54363b5e19e835a1b6768/vendor/llama.cpp",
            "llama-cpp-python",
        ),
        ("/tmp/tmpd_qz/llama_cpp_python-0.3.6/vendor/llama.cpp", "llama-cpp-python"),
        # a repository named after the package it builds wheels of
        (
            "/home/runner/work/llama-cpp-python-cuBLAS-wheels/llama-cpp-python-cuBLAS-wheels/vendor/llama.cpp",
            "llama-cpp-python",
        ),
        # llama.cpp's own CI: its own package
        ("/home/runner/work/llama.cpp/llama.cpp", "llama.cpp"),
    ],
)
def test_a_project_that_vendors_llama_cpp_is_the_package_to_change(
    folder: str, package: str
) -> None:
    d = diagnose_text(
        "common_init_from_params: warming up the model with an empty run - please wait ...\n"
        f"{folder}/ggml/src/ggml-cuda/ggml-cuda.cu:96: CUDA error\n"
        "CUDA error: an illegal memory access was encountered\n"
    )
    releases = {c.name for h in d.hypotheses for c in h.changes if c.kind == "package"}
    assert package in releases
    assert releases.isdisjoint({"xllamacpp", "llama-cpp-python", "llama.cpp"} - {package})


def test_localai_is_recognised_by_its_backend_lines_and_owns_its_backends_abi() -> None:
    d = diagnose_text(
        "+ exec /backends/cuda12-vllm-cpp/lib/ld.so /backends/cuda12-vllm-cpp/vllm-cpp\n"
        "panic: vllm-cpp: ABI mismatch: library reports v10, backend built against v5\n"
        "goroutine 1 [running]:\n"
    )
    assert (d.engine, d.error_class) == ("localai", "abi_mismatch")
    first = d.hypotheses[0].changes[0]
    assert (first.kind, first.name) == ("package", "localai")


def test_mistral_rs_is_recognised_by_its_crates_and_its_release_is_the_change() -> None:
    d = diagnose_text(
        "2026-05-18T10:11:55.399572Z ERROR mistralrs_core::engine: prompt step - Model failed "
        "with error: channel closed\n"
        "thread '<unnamed>' panicked at /root/.cargo/registry/src/mistralrs-core-0.8.1/src/"
        "engine/mod.rs:473:48:\n"
        "called `Result::unwrap()` on an `Err` value: SendError { .. }\n"
    )
    assert d.engine == "mistralrs"
    assert "mistralrs-cli" in {c.name for h in d.hypotheses for c in h.changes}
