"""Rules that read a failure's context (what the server was doing just before it, the phase it
happened in) and the change each engine spells for them."""

from __future__ import annotations

from servedoctor.diagnose import diagnose_text
from servedoctor.model import Diagnosis

SAVE = "srv  prompt_save:  - saving prompt with length 77712, total state size = 18821.469 MiB"
ASSERT = "/opt/llama.cpp/src/llama-context.cpp:2210: GGML_ASSERT(total_size == size) failed"


def _changes(d: Diagnosis) -> list[tuple[str, str | None]]:
    return [(c.name, c.value) for h in d.hypotheses for c in h.changes]


def _spelled(log: str, engine: str, version: str | None = None) -> list[tuple[str, str | None]]:
    return _changes(diagnose_text(log, engine=engine, engine_version=version))


def test_a_failure_right_after_a_host_cache_save_suspects_that_cache() -> None:
    d = diagnose_text(f"{SAVE}\n{ASSERT}\n", engine="llamacpp")
    assert "HOSTKV001" in d.rules
    assert d.component == "memory"
    assert d.phase == "serving"
    assert ("--cache-ram", "0") in _spelled(f"{SAVE}\n{ASSERT}\n", "llamacpp")


def test_a_save_long_before_the_failure_says_nothing_of_it() -> None:
    busy = "\n".join(f"slot update_slots: id 0 | task {n} | n_past = {n * 64}" for n in range(12))
    d = diagnose_text(f"{SAVE}\n{busy}\n{ASSERT}\n", engine="llamacpp")
    assert "HOSTKV001" not in d.rules


def test_the_tier_is_spelled_for_each_engine_that_has_one() -> None:
    log = "updating prompt cache\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert ("--enable-hierarchical-cache", "<remove>") in _spelled(log, "sglang", "0.5.23")


def test_a_trtllm_line_prefix_names_its_engine() -> None:
    log = (
        "[07/08/2025-19:47:15] [TRT-LLM] [RANK 1] [E] Failed to initialize executor on rank 1: "
        "Executor creation failed due to insufficient GPU memory.\n"
    )
    assert diagnose_text(log).engine == "trtllm"


def test_an_rdma_completion_error_of_the_kv_transfer_offers_the_other_backend() -> None:
    log = (
        "E0724 03:14:20.700000 104002 transfer_engine.cpp:100] Failed to complete transfer: "
        "local protection error\n"
    )
    d = diagnose_text(log, engine="sglang", engine_version="0.5.23")
    assert (d.error_class, d.component) == ("other", "communication")
    assert ("--disaggregation-transfer-backend", "nixl") in _spelled(log, "sglang", "0.5.23")
    # vLLM sets its connector in a JSON document: nothing to spell
    assert "--disaggregation-transfer-backend" not in dict(_spelled(log, "vllm"))


def test_nccl_s_system_error_suspects_its_shared_memory_transport_too() -> None:
    log = (
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
    )
    assert ("NCCL_SHM_DISABLE", "1") in _spelled(log, "vllm")
    # a binary server without NCCL is offered nothing of it
    assert "NCCL_SHM_DISABLE" not in dict(_spelled(log, "llamacpp"))


def test_a_wrapper_waiting_for_llama_server_is_a_hang_while_loading() -> None:
    log = "Loading model m-GGUF...\nStill waiting for llama-server...\nllama-server failed to start within timeout\n"
    d = diagnose_text(log)
    assert (d.engine, d.error_class, d.phase) == ("llamacpp", "hang", "load")


def test_memory_running_out_while_decoding_offers_fewer_sequences() -> None:
    log = (
        "[2026-01-01 10:00:00 TP0] Decode batch. #running-req: 256, #token: 90000\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    d = diagnose_text(log, engine="sglang", engine_version="0.5.23")
    assert d.phase == "decode"
    assert ("--max-running-requests", "64") in _spelled(log, "sglang", "0.5.23")


def test_ranks_timing_out_while_loading_get_a_longer_distributed_timeout() -> None:
    log = (
        "[2026-01-01 10:00:00 TP0] Load weight begin. avail mem=78.00 GB\n"
        "[rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=3, OpType=BROADCAST, Timeout(ms)=600000) ran for 600031 ms\n"
    )
    assert ("--dist-timeout", "3600") in _spelled(log, "sglang", "0.5.23")


def test_sglang_s_watchdog_limit_is_doubled_from_the_one_in_effect() -> None:
    log = "[2025-10-29 11:25:58 TP3] Watchdog timeout (self.watchdog_timeout=300)\n"
    assert ("--watchdog-timeout", "600") in _spelled(log, "sglang", "0.5.23")


WATCHDOG = "[2025-03-10 16:29:01 TP0] Watchdog timeout (self.watchdog_timeout=300)\n"


def test_a_hang_across_tensor_parallel_ranks_suspects_the_custom_all_reduce() -> None:
    # the knob (tensor_parallel) is read under each engine's name for it: SGLang's dump,
    # vLLM's command flag
    sglang = diagnose_text("server_args=ServerArgs(model_path='m', tp_size=2)\n" + WATCHDOG)
    assert "HANG007" in sglang.rules
    vllm = diagnose_text(
        "No available shared memory broadcast block found in 60 second.\n",
        engine="vllm",
        command_flags={"--tensor-parallel-size": "4"},
    )
    assert "HANG007" in vllm.rules
    assert ("--disable-custom-all-reduce", None) in _changes(vllm)


def test_a_hang_on_one_gpu_does_not_suspect_the_all_reduce() -> None:
    d = diagnose_text("server_args=ServerArgs(model_path='m', tp_size=1)\n" + WATCHDOG)
    assert d.error_class == "hang"
    assert "HANG007" not in d.rules


def test_a_timeout_that_names_its_variable_raises_it_from_the_value_it_states() -> None:
    d = diagnose_text(
        "ray.exceptions.RayChannelTimeoutError: System error: If the execution is expected to "
        "take a long time, increase RAY_CGRAPH_get_timeout which is currently 10 seconds. "
        "Otherwise, this may indicate that the execution is hanging.\n",
        engine="vllm",
    )
    assert d.error_class == "hang"
    assert ("RAY_CGRAPH_get_timeout", "100") in _changes(d)


def test_a_grammar_library_refusing_a_schema_is_spelled_per_engine_and_release() -> None:
    log = '"message": "The provided JSON schema contains features not supported by xgrammar."\n'
    assert ("--guided-decoding-backend", "auto") in _spelled(log, "vllm", "0.8.5")
    assert ("--structured-outputs-config", '{"backend":"auto"}') in _spelled(log, "vllm", "0.33.0")
    sglang = _spelled(log, "sglang", "0.5.23")
    assert ("--grammar-backend", "llguidance") in sglang
    # SGLang has no automatic grammar backend
    assert not any(flag == "--grammar-backend" and value == "auto" for flag, value in sglang)


def test_row_split_buffers_in_a_native_failure_suggest_a_layer_split() -> None:
    log = (
        "load_tensors:  CUDA0_Split model buffer size =  9208.75 MiB\n"
        "/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:75: CUDA error\n"
    )
    assert ("--split-mode", "layer") in _spelled(log, "llamacpp")


def test_a_library_not_found_that_the_engine_replaces_is_not_the_failure() -> None:
    d = diagnose_text(
        "deep_gemm not found in site-packages, trying vendored vllm.third_party.deep_gemm\n"
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
    )
    assert d.error_class == "illegal_memory_access"


def test_a_resolver_warning_is_not_the_failure_when_the_server_raised_one() -> None:
    log = (
        "ValueError: Free memory on device cuda:0 (3.22/4.0 GiB) on startup is less than "
        "desired GPU memory utilization (0.85, 3.4 GiB). Decrease GPU memory utilization.\n"
        "vllm 0.18.1 requires transformers<5,>=4.56.0, but you have transformers 5.3.0 which "
        "is incompatible.\n"
    )
    assert diagnose_text(log, engine="vllm").error_class == "cuda_oom"
    alone = diagnose_text(log.splitlines()[1] + "\n", engine="vllm")
    assert alone.error_class == "missing_dependency"
    assert ("transformers", "<5,>=4.56.0") in _changes(alone)


def test_a_draft_model_that_fails_drops_speculative_decoding_in_each_engine() -> None:
    log = "E srv    load_model: failed to load draft model, 'draft.gguf'\n"
    assert ("--model-draft", "<remove>") in _spelled(log, "llamacpp")
    assert ("--speculative-config", "<remove>") in _spelled(log, "vllm", "0.33.0")
    assert ("--speculative-algorithm", "<remove>") in _spelled(log, "sglang", "0.5.23")


def test_a_failure_in_aiter_attention_turns_that_attention_off() -> None:
    log = "TypeError: AiterFlashAttentionImpl.__init__() got multiple values for argument 'x'\n"
    d = diagnose_text(log, engine="vllm")
    assert d.component == "attention"
    assert ("VLLM_ROCM_USE_AITER_MHA", "0") in _spelled(log, "vllm", "0.33.0")


def test_ranks_that_cannot_reach_the_rendezvous_store_are_a_distributed_failure() -> None:
    d = diagnose_text(
        "[E329 06:28:12.542939754 socket.cpp:1023] [c10d] The client socket has timed out "
        "after 600000ms while trying to connect to (10.0.0.33, 54485).\n"
    )
    assert (d.error_class, d.phase, d.component) == ("nccl_error", "startup", "communication")


def test_a_log_that_reached_serving_without_an_error_is_no_failure() -> None:
    log = (
        "main: loading model\n"
        "main: model loaded\n"
        "main: server is listening on http://127.0.0.1:8080 - starting the main loop\n"
        "srv  update_slots: all slots are idle\n"
    )
    assert diagnose_text(log, engine="llamacpp").error_class is None


def test_a_message_wrapped_over_two_lines_is_read_whole() -> None:
    log = (
        "ValueError: Free memory on device cuda:0 (104.5/121.69 GiB) on startup is less than\n"
        "desired GPU memory utilization (0.92, 111.95 GiB).\n"
    )
    d = diagnose_text(log, engine="vllm", engine_version="0.33.0")
    assert d.error_class == "cuda_oom"
    assert ("--gpu-memory-utilization", "0.87") in _changes(d)


def test_a_wrapped_message_whose_next_line_starts_with_the_flag_it_names_is_read_whole() -> None:
    log = (
        "RuntimeError: Not enough memory. Please try to increase\n"
        "   --mem-fraction-static. Current value: mem_fraction_static=0.93\n"
    )
    assert diagnose_text(log).error_class == "kv_cache_capacity"


def test_a_dependency_named_in_words_installs_the_package_that_provides_it() -> None:
    cupy = diagnose_text(
        "ValueError: cupy is not installed but required since "
        "VLLM_USE_RAY_COMPILED_DAG_CHANNEL_TYPE is set to 'nccl'\n"
    )
    assert cupy.error_class == "missing_dependency"
    assert ("cupy-cuda12x", "install") in _changes(cupy)
    cudnn = diagnose_text(
        "RuntimeError: cuDNN is not available. Please install cuDNN to use FP8 GEMM functions.\n"
    )
    assert ("nvidia-cudnn-cu12", "install") in _changes(cudnn)


def test_a_fault_while_a_decode_graph_replays_happened_in_decode() -> None:
    log = (
        "[2026-04-13 11:30:26 TP2 EP2] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "sglang/srt/managers/scheduler.py", line 1319, in event_loop_normal\n'
        "    result = self.run_batch(batch)\n"
        '  File "sglang/srt/model_executor/cuda_graph_runner.py", line 1161, in replay\n'
        "    self.graphs[graph_key].replay()\n"
        "torch.AcceleratorError: CUDA error: an illegal instruction was encountered\n"
    )
    assert diagnose_text(log).phase == "decode"


def test_a_device_out_of_memory_from_other_runtimes_is_out_of_memory() -> None:
    for line in (
        "level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
        "hipErrorOutOfMemory: out of memory",
        "vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
    ):
        assert diagnose_text(line + "\n").error_class == "cuda_oom", line


def test_a_server_that_keeps_several_models_loaded_is_asked_to_keep_one() -> None:
    log = (
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1825.82 MiB on device 0: "
        "cudaMalloc failed: out of memory\n"
    )
    assert ("OLLAMA_MAX_LOADED_MODELS", "1") in _spelled(log, "ollama")
    assert not any(name == "OLLAMA_MAX_LOADED_MODELS" for name, _ in _spelled(log, "llamacpp"))


def test_a_jit_build_without_a_compiler_or_headers_names_the_os_package() -> None:
    cc = "RuntimeError: Failed to find C compiler. Please specify via CC environment variable\n"
    assert ("build-essential", "install") in _spelled(cc, "sglang", "0.5.23")
    assert ("build-essential", "install") in _spelled(cc, "llamacpp")  # an OS package
    headers = "fatal error: Python.h: No such file or directory\n"
    assert _spelled(headers, "vllm", "0.33.0")[0] == ("python3-dev", "install")


def test_a_failure_inside_a_kv_connector_starts_once_without_it() -> None:
    log = (
        "torch.AcceleratorError: CUDA error: no kernel image is available for execution on "
        "the device\nat lmcache/v1/gpu_connector.py -> lmc_ops.multi_layer_kv_transfer\n"
    )
    assert ("--kv-transfer-config", "<remove>") in _spelled(log, "vllm", "0.33.0")


def test_dynamo_s_own_error_is_a_tracing_failure_not_triton() -> None:
    log = "torch._dynamo.exc.TorchRuntimeError: Dynamo failed to run FX node with fake tensors:\n"
    d = diagnose_text(log, engine="vllm", engine_version="0.33.0")
    assert d.error_class == "other"
    assert "TORCH002" in d.rules
    assert ("--enforce-eager", None) in _spelled(log, "vllm", "0.33.0")


def test_a_refused_kv_cache_dtype_goes_back_to_the_model_s_own() -> None:
    log = "ValueError: fp8_e5m2 kv-cache is not supported with fp8 checkpoints.\n"
    assert diagnose_text(log).error_class == "model_unsupported"
    assert ("--kv-cache-dtype", "auto") in _spelled(log, "vllm", "0.33.0")


def test_a_missing_build_tool_on_path_is_a_missing_dependency() -> None:
    log = "RuntimeError: Worker failed with error '[Errno 2] No such file or directory: 'ninja''\n"
    assert diagnose_text(log).error_class == "missing_dependency"


def test_a_log_viewer_s_timestamp_prefix_does_not_hide_the_traceback() -> None:
    prefix = "2026-05-01 20:50:26.798 | (EngineCore pid=114) "
    log = "".join(
        prefix + line + "\n"
        for line in (
            "ERROR 05-01 18:50:26 [core.py:1100] Traceback (most recent call last):",
            'ERROR 05-01 18:50:26 [core.py:1100]   File "/x/vllm/v1/engine/core.py", line 1, in f',
            "ERROR 05-01 18:50:26 [core.py:1100]     g()",
            "ERROR 05-01 18:50:26 [core.py:1100] ValueError: moe_backend='triton' is not "
            "supported for NvFP4 MoE. Expected one of ['cutlass', 'marlin'].",
        )
    )
    d = diagnose_text(log, engine="vllm", engine_version="0.33.0")
    assert d.extras.get("class_source") is None  # read from the traceback, not voted
    assert ("--moe-backend", "cutlass") in _changes(d)


def test_the_first_three_changes_are_three_different_settings() -> None:
    # the message's own limit and the generic step both set max_model_len: the computed
    # value speaks for it, and the step waits until the other settings had their turn
    d = diagnose_text(
        "ValueError: The model's max seq len (56000) is larger than the maximum number of "
        "tokens that can be stored in KV cache (43328). Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"
        "vllm/v1/core/kv_cache_utils.py"
    )
    settings = [(c.kind, c.name) for h in d.hypotheses[:3] for c in h.changes]
    assert len(settings) == len(set(settings)) == 3
    first = d.hypotheses[0].changes[0]
    assert first.value == "43328"
