"""Phase from frames: lifecycle stages nest, serving code runs inside capture."""

from __future__ import annotations

from servedoctor.diagnose import diagnose_text


def tb(*frames: str, error: str) -> str:
    body = "".join(
        f'  File "/x/{f.split(":")[0]}", line 1, in {f.split(":")[1]}\n    call()\n' for f in frames
    )
    return f"Traceback (most recent call last):\n{body}{error}\n"


def test_vllm_capture_inside_kv_cache_initialisation_is_graph_capture() -> None:
    text = tb(
        "vllm/v1/engine/core.py:_initialize_kv_caches",
        "vllm/v1/worker/gpu_worker.py:compile_or_warm_up_model",
        "vllm/v1/worker/gpu_model_runner.py:capture_model",
        "vllm/v1/worker/gpu_model_runner.py:_dummy_run",
        error="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    )
    d = diagnose_text(text)
    assert (d.error_class, d.phase) == ("cuda_oom", "graph_capture")


def test_serving_code_inside_sglang_graph_capture_does_not_make_it_decode() -> None:
    text = tb(
        "sglang/srt/model_executor/model_runner.py:init_cuda_graphs",
        "sglang/srt/model_executor/cuda_graph_runner.py:capture",
        "sglang/srt/model_executor/model_runner.py:forward_decode",
        "sglang/srt/mem_cache/memory_pool.py:set_kv_buffer",
        error="RuntimeError: CUDA error: an illegal memory access was encountered",
    )
    assert diagnose_text(text).phase == "graph_capture"


def test_decode_step_while_serving() -> None:
    text = tb(
        "sglang/srt/managers/scheduler.py:event_loop_overlap",
        "sglang/srt/managers/scheduler.py:run_batch",
        "sglang/srt/model_executor/model_runner.py:forward_decode",
        error="RuntimeError: CUDA error: an illegal memory access was encountered",
    )
    assert diagnose_text(text).phase == "decode"


def test_kernel_fault_under_the_engine_constructor_is_its_first_forward_pass() -> None:
    sglang = tb(
        "sglang/srt/managers/scheduler.py:__init__",
        "sglang/srt/model_executor/model_runner.py:__init__",
        "torch/_ops.py:__call__",
        error="RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device",
    )
    vllm = tb(
        "vllm/engine/llm_engine.py:from_engine_args",
        "vllm/model_executor/layers/quantization/utils.py:apply",
        error="RuntimeError: CUDA error: no kernel image is available for execution on the device",
    )
    assert diagnose_text(sglang, engine="sglang").phase == "graph_capture"
    assert diagnose_text(vllm, engine="vllm").phase == "memory_setup"


def test_step_marker_right_before_the_error_names_the_step() -> None:
    marker = "[2024-07-28 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 6, #queue-req: 0\n"
    error = "RuntimeError: CUDA error: an illegal memory access was encountered"
    body = tb("sglang/srt/managers/scheduler.py:event_loop_normal", error=error)
    assert diagnose_text(marker + body).phase == "prefill"
    far = marker + "".join(f"INFO: line {i}\n" for i in range(10)) + body
    assert diagnose_text(far).phase == "serving"


def test_scheduler_frames_are_not_the_component_of_a_kernel_fault() -> None:
    text = tb(
        "vllm/v1/engine/core.py:run_engine_core",
        error="RuntimeError: CUDA error: no kernel image is available for execution on the device",
    )
    assert diagnose_text(text).component == "environment"


def test_rank_prefixed_exception_line_after_its_frame_is_the_error() -> None:
    text = (
        '[rank0]:   File "/x/vllm/worker/worker.py", line 565, in raise_if_cache_size_invalid\n'
        "[rank0]:     raise ValueError(\n"
        "[rank0]: ValueError: The model's max seq len (60000) is larger than the maximum number"
        " of tokens that can be stored in KV cache (58384).\n"
    )
    assert diagnose_text(text).error_class == "kv_cache_capacity"


def test_tgi_router_span_names_the_step() -> None:
    line = (
        "2023-12-22T00:21:35.318928Z ERROR batch{{batch_size=1}}:{step}:{step}{{id=1 size=1}}: "
        "text_generation_client: router/client/src/lib.rs:33: Server error: CUDA out of memory. "
        "Tried to allocate 222.00 MiB. GPU 0 has a total capacty of 39.39 GiB of which 217.94 MiB "
        "is free.\n"
    )
    for step in ("prefill", "decode"):
        d = diagnose_text(line.format(step=step), engine="tgi")
        assert (d.error_class, d.phase) == ("cuda_oom", step)


def test_weights_that_do_not_fit_the_model_fail_in_load() -> None:
    text = (
        "(EngineCore_DP0 pid=5) ERROR 11-12 13:42:18 [core.py:708] ValueError: There is no "
        "module or parameter named 'mlp_AR' in TransformersForCausalLM\n"
        "(EngineCore_DP0 pid=5) Traceback (most recent call last):\n"
        '(EngineCore_DP0 pid=5)   File "/x/vllm/v1/engine/core.py", line 699, in run_engine_core\n'
        "(EngineCore_DP0 pid=5)     engine_core = EngineCoreProc(*args, **kwargs)\n"
    )
    d = diagnose_text(text, engine="vllm")
    assert (d.error_class, d.phase, d.component) == ("model_unsupported", "load", "model")


def test_a_truncated_stack_is_read_one_call_further() -> None:
    text = (
        "RuntimeError: Triton Error [CUDA]: device-side assert triggered\n"
        "[2025-11-05 17:42:27 TP2] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/x/sglang/srt/managers/scheduler.py", line 1986, in run_batch\n'
        "    batch_result = self.model_worker.forward_batch_generation(\n"
        '  File "/x/sglang/srt/speculative/eagle_worker_v2.py", line 560, in forward_batch_generation\n'
        "    batch_output = self.{call}(model_worker_batch, draft_input.allocate_lens)\n"
    )
    assert diagnose_text(text.format(call="verify"), engine="sglang").phase == "decode"
    assert diagnose_text(text.format(call="prepare"), engine="sglang").phase == "serving"


def test_nccl_timeout_late_in_the_run_is_serving() -> None:
    line = (
        "[rank16]:[E214 06:46:21.341531487 ProcessGroupNCCL.cpp:1834] [PG ID 2 PG GUID 3 Rank 16] "
        "Timeout at NCCL work: {n}, last enqueued NCCL work: {n}, last completed NCCL work: {m}.\n"
    )
    assert diagnose_text(line.format(n=9301, m=9300)).phase == "serving"
    assert diagnose_text(line.format(n=2, m=1)).phase == "startup"


def test_tgi_shard_names_the_method_that_raised() -> None:
    text = (
        "2024-06-26T07:35:08.486443Z ERROR text_generation_launcher: Method {m} encountered an error.\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2219, in all_reduce\n'
        "    work = group.allreduce([tensor], opts)\n"
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2395, unhandled cuda error\n"
        "Cuda failure 'device-side assert triggered'\n"
    )
    for method, phase in (("Prefill", "prefill"), ("Decode", "decode")):
        d = diagnose_text(text.format(m=method), engine="tgi")
        assert (d.error_class, d.phase) == ("device_assert", phase)


def test_vllm_after_weights_loaded_is_memory_setup() -> None:
    text = (
        "INFO 01-28 03:20:58 model_runner.py:1115] Loading model weights took 79.3595 GB\n"
        "ERROR 01-28 03:21:01 engine.py:387] OutOfResources.__init__() missing 2 required "
        "positional arguments: 'limit' and 'name'\n"
    )
    d = diagnose_text(text, engine="vllm")
    assert (d.error_class, d.phase) == ("triton_error", "memory_setup")


def test_capture_only_errors_name_graph_capture() -> None:
    line = (
        "[E ProcessGroupNCCL.cpp:915] [Rank 0] NCCL watchdog thread terminated with exception: "
        "CUDA error: operation not permitted when stream is capturing\n"
    )
    assert diagnose_text(line).phase == "graph_capture"


def test_tgi_warmup_frames_are_warmup() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/x/text_generation_server/server.py", line 66, in Warmup\n'
        "    max_supported_total_tokens = self.model.warmup(batch)\n"
        '  File "/x/text_generation_server/models/flash_causal_lm.py", line 755, in warmup\n'
        "    raise RuntimeError(\n"
        "RuntimeError: Not enough memory to handle 4096 prefill tokens. You need to decrease "
        "`--max-batch-prefill-tokens`\n"
    )
    d = diagnose_text(text, engine="tgi")
    assert (d.error_class, d.phase) == ("cuda_oom", "warmup")


def test_a_model_that_was_running_is_serving() -> None:
    text = (
        "Error: an unknown error was encountered while running the model CUDA error: out of memory\n"
        "  current device: 0, in function ggml_cuda_pool_malloc_vmm at ggml-cuda.cu:8583\n"
    )
    d = diagnose_text(text)
    assert (d.error_class, d.phase) == ("cuda_oom", "serving")


def test_torch_compiled_code_failing_is_graph_capture_not_start_up() -> None:
    text = tb(
        "vllm/v1/worker/gpu_worker.py:determine_available_memory",
        "vllm/v1/worker/gpu_model_runner.py:profile_run",
        "torch/fx/graph_module.py:__call__",
        "torch/_inductor/output_code.py:__call__",
        error="ValueError: too many values to unpack (expected 12)",
    )
    assert diagnose_text(text).phase == "graph_capture"


def test_a_message_about_something_captured_in_a_graph_is_graph_capture() -> None:
    line = (
        "NCCL WARN NCCL cannot be captured in a graph if either it wasn't built with CUDA "
        "runtime >= 11.3 or if the installed CUDA driver < R465.\n"
    )
    assert diagnose_text(line).phase == "graph_capture"


def test_a_request_model_of_an_openai_endpoint_fails_while_serving() -> None:
    from servedoctor.diagnose import diagnose_text

    log = (
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.12/site-packages/aphrodite/endpoints/openai/protocol.py", '
        "line 820, in check_context\n"
        "    assert values.get('max_length') <= values.get('max_context_length')\n"
        "AttributeError: 'Schema' object has no attribute 'get'\n"
    )
    assert diagnose_text(log).phase == "serving"


def test_a_kernel_source_under_a_prefill_or_decode_folder_names_the_step() -> None:
    from servedoctor.diagnose import diagnose_text

    prefill = "RuntimeError: Assertion error (/deps/kern/csrc/sm90/prefill/sparse/phase1.cuh:614): `res` failed.\n"
    decode = "RuntimeError: CUDA error at /deps/kern/csrc/decode/splitkv.cuh:88: an illegal memory access\n"
    assert diagnose_text(prefill).phase == "prefill"
    assert diagnose_text(decode).phase == "decode"


def test_waking_a_sleeping_engine_allocates_its_memory_again() -> None:
    from servedoctor.diagnose import diagnose_text

    log = (
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.10/site-packages/vllm/entrypoints/llm.py", line 1244, in wake_up\n'
        "    self.llm_engine.wake_up()\n"
        "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
    )
    assert diagnose_text(log).phase == "memory_setup"


def test_running_compiled_code_is_not_compiling_it() -> None:
    # a compiled graph that runs during vLLM's memory profile fails in memory set-up: the
    # inductor frames that only call the compiled code do not date it to graph capture
    frames = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/x/vllm/v1/worker/gpu_worker.py", line 1, in determine_available_memory',
            "    self.model_runner.profile_run()",
            '  File "/x/torch/_inductor/standalone_compile.py", line 122, in __call__',
            "    return self._compiled_fn(*args)",
            '  File "/x/torch/_inductor/output_code.py", line 656, in __call__',
            "    return self.current_callable(inputs)",
            '  File "/x/torch/_inductor/utils.py", line 3401, in run',
            "    out = model(new_inputs)",
            '  File "/root/.cache/vllm/inductor_cache/d7/cd7kqi.py", line 554, in call',
            "    torch.ops._C.rms_norm.default(buf8, buf3)",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ]
    )
    assert diagnose_text(frames + "\n").phase == "memory_setup"
    compiling = frames.replace("output_code.py", "compile_fx.py").replace("__call__", "fx_codegen")
    assert diagnose_text(compiling + "\n").phase == "graph_capture"


def test_a_request_parameter_in_the_message_dates_it_to_serving() -> None:
    for line in (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set\n',
        "VLLMValidationError: top_p must be in (0, 1], got 0. (parameter=top_p, value=0)\n",
    ):
        assert diagnose_text(line).phase == "serving", line


def test_what_only_a_request_has_dates_the_failure_to_serving() -> None:
    for line in (
        'GET /health HTTP/1.1" 500 Internal Server Error\n',
        "RuntimeError: Handshake failed for request chatcmpl-3f9a0c1d2e\n",
        "AttributeError: 'NoneType' object has no attribute 'sampled_token_ids'\n",
        "ValueError: The decoder prompt (length 18425) is longer than the maximum model length\n",
    ):
        assert diagnose_text(line).phase == "serving", line
    # an answered request is no failure's date; a startup error stays at startup
    assert (
        diagnose_text("ValueError: invalid literal for int() with base 10: ''\n").phase != "serving"
    )


def test_a_checkpoint_s_weights_architecture_or_tokenizer_in_the_message_dates_it_to_load() -> None:
    for line in (
        "TypeError: load_lora_weights() missing 1 required positional argument: 'adapter_id'\n",
        "RuntimeError: Can not found rewrite for architectures: ['Qwen2VLForConditionalGeneration']\n",
        "ValueError: Tokenizer class FooTokenizer does not exist or is not currently imported.\n",
    ):
        assert diagnose_text(line).phase == "load", line
    # a request's tool choice is not its checkpoint
    assert diagnose_text("ValueError: tool_choice must be auto\n").phase == "serving"


def test_what_an_attention_kernel_or_feature_is_called_names_the_attention_component() -> None:
    for line in (
        "RuntimeError: Worker failed with error 'FlashInfer backend currently does not support "
        "attention sinks, please use trtllm on blackwell'\n",
        "Failed to run MLA, error: no kernel image is available for execution on the device\n",
        "[TM][FATAL] kernels/attention/decoding.cu(34): Check failed: kernel No decoding kernel\n",
    ):
        assert diagnose_text(line).component == "attention", line
    # a camel-cased class that contains the letters is no attention word
    assert diagnose_text("KeyError: 'FooMLAConfig'\n").component != "attention"
    assert diagnose_text("ValueError: no PD for non-MLA hybrid models\n").component != "attention"
