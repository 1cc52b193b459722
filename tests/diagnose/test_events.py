from __future__ import annotations

import io

from servedoctor.logs.events import Event, extract
from servedoctor.logs.scan import Scanner


def events_of(text: str) -> list[Event]:
    return extract(Scanner(io.BytesIO(text.encode())))


def only(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e.kind == kind]


CHAINED = """\
Traceback (most recent call last):
  File "/x/torch/_ops.py", line 795, in __call__
    return self._op(*args, **kwargs)
RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/x/sglang/srt/managers/scheduler.py", line 1992, in run_scheduler_process
    scheduler = Scheduler(server_args)
  File "/x/sglang/srt/model_executor/model_runner.py", line 631, in init_cuda_graphs
    self.cuda_graph_runner = CudaGraphRunner(self)
Exception: Capture cuda graph failed: RMSNorm failed
Possible solutions:
1. disable cuda graph by --disable-cuda-graph
"""


def test_chained_tracebacks_are_two_events_with_frames_and_messages() -> None:
    tbs = only(events_of(CHAINED), "traceback")
    assert len(tbs) == 2
    first, second = tbs
    assert first.fields["exc_type"] == "RuntimeError"
    assert [f.func for f in first.frames] == ["__call__"]
    assert first.frames[0].code == "return self._op(*args, **kwargs)"
    assert second.fields["chained"] is True
    assert [f.func for f in second.frames] == ["run_scheduler_process", "init_cuda_graphs"]
    assert second.fields["message"].splitlines()[1] == "Possible solutions:"
    assert second.fields["exc_line"] == 13


def test_truncated_traceback_without_header_is_still_assembled() -> None:
    text = (
        '  File "/x/vllm/moe.py", line 90, in moe_permute\n'
        "    a = b[idx]\n"
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
    )
    (tb,) = only(events_of(text), "traceback")
    assert tb.fields["truncated"] is True
    assert tb.frames[-1].func == "moe_permute"
    assert tb.fields["exc_type"] == "torch.AcceleratorError"


def test_rich_boxed_traceback() -> None:
    text = (
        "╭───────────── Traceback (most recent call last) ─────────────╮\n"
        "│ /usr/lib/python3/site-packages/vllm/engine/core.py:88 in run │\n"
        "│ /usr/lib/python3/site-packages/vllm/worker/gpu.py:12 in load │\n"
        "╰──────────────────────────────────────────────────────────────╯\n"
        "ValueError: bad config\n"
    )
    (tb,) = only(events_of(text), "traceback")
    assert [f.func for f in tb.frames] == ["run", "load"]
    assert tb.fields["exc_type"] == "ValueError"


def test_kernel_assertion_flood_folds_into_one_event() -> None:
    line = (
        "../aten/src/ATen/native/cuda/Indexing.cu:1093: indexSelectSmallIndex: "
        "block: [24,0,0], thread: [{t},0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
    )
    text = "".join(line.format(t=t % 128) for t in range(100_000))
    (folded,) = only(events_of(text), "kernel_assert")
    assert folded.count == 100_000
    assert folded.fields["kernel"] == "indexSelectSmallIndex"
    assert folded.fields["condition"] == "srcIndex < srcSelectDimSize"
    assert folded.fields["source"].endswith("Indexing.cu:1093")


def test_oom_numbers_are_parsed() -> None:
    text = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.11 GiB of which 1.02 GiB is free.\n"
    )
    (oom,) = only(events_of(text), "oom")
    assert oom.fields["tried"] == "2.00 GiB"
    assert oom.fields["capacity"] == "79.11 GiB"
    assert oom.fields["free"] == "1.02 GiB"


def test_override_and_version_warning_and_config_dump() -> None:
    text = (
        "[2026-02-26 05:19:58] WARNING server_args.py:1177: Set NSA backends for fp8_e4m3 KV Cache: "
        "prefill=flashmla_auto, decode=flashmla_kv.\n"
        "[2026-02-26 05:19:58] server_args=ServerArgs(model_path='m', kv_cache_dtype='fp8_e4m3', tp_size=8)\n"
        "[2025-01-01 00:00:00 TP0] Attention backend not explicitly specified. Use fa3 backend by default.\n"
    )
    events = events_of(text)
    overrides = {(e.fields["name"], e.fields.get("value")) for e in only(events, "override")}
    assert ("--nsa-decode-backend", "flashmla_kv") in overrides
    assert ("--attention-backend", "fa3") in overrides
    assert only(events, "config")[0].fields["engine"] == "sglang"


def test_interleaved_ranks_build_separate_tracebacks() -> None:
    text = (
        "[2025-01-01 00:00:00 TP0] Traceback (most recent call last):\n"
        "[2025-01-01 00:00:00 TP1] Traceback (most recent call last):\n"
        '[2025-01-01 00:00:00 TP0]   File "/a.py", line 1, in forward_decode\n'
        '[2025-01-01 00:00:00 TP1]   File "/b.py", line 2, in forward_extend\n'
        "[2025-01-01 00:00:00 TP0] RuntimeError: zero\n"
        "[2025-01-01 00:00:00 TP1] RuntimeError: one\n"
    )
    tbs = {e.rank: e for e in only(events_of(text), "traceback")}
    assert tbs["TP0"].frames[0].func == "forward_decode"
    assert tbs["TP1"].frames[0].func == "forward_extend"
    assert tbs["TP1"].fields["message"] == "one"


def test_thread_dump_frames_are_stored_outermost_first() -> None:
    text = (
        "Thread 0x00007fce47ae1480 (most recent call first):\n"
        '  File "/x/threading.py", line 320 in wait\n'
        '  File "/x/scheduler.py", line 1147 in process_batch_result_prefill\n'
        '  File "/x/scheduler.py", line 1796 in run_scheduler_process\n'
    )
    (stack,) = only(events_of(text), "stack")
    assert [f.func for f in stack.frames] == [
        "run_scheduler_process",
        "process_batch_result_prefill",
        "wait",
    ]


def test_native_cpp_backtrace_is_a_stack() -> None:
    text = (
        "[TensorRT-LLM][ERROR] Assertion failed: d == a + length\n"
        "1       0x7f6ce803be0b /opt/libplugin.so(+0x35e0b) [0x7f6ce803be0b]\n"
        "2       0x7f6ce809746c tensorrt_llm::plugins::Creator::deserializePlugin(void const*) + 908\n"
    )
    (stack,) = only(events_of(text), "stack")
    assert stack.frames[0].func.startswith("tensorrt_llm::plugins::Creator::deserializePlugin")


def test_blank_lines_between_frames_do_not_split_a_traceback() -> None:
    # text-generation-inference relays a shard's stderr with a blank line after each line
    text = (
        "ERROR shard-manager: text_generation_launcher: Shard complete standard error output:\n\n"
        "Traceback (most recent call last):\n\n"
        '  File "/opt/conda/bin/text-generation-server", line 8, in <module>\n'
        "    sys.exit(app())\n\n"
        '  File "/x/text_generation_server/server.py", line 201, in serve_inner\n'
        "    model = get_model(\n\n"
        '  File "/x/text_generation_server/models/__init__.py", line 648, in get_model\n'
        '    raise ValueError(f"Unsupported model type {model_type}")\n\n'
        "ValueError: Unsupported model type phi3\n"
    )
    (tb,) = only(events_of(text), "traceback")
    assert [f.func for f in tb.frames] == ["<module>", "serve_inner", "get_model"]
    assert tb.fields["exc_type"] == "ValueError" and tb.fields["truncated"] is False


MARKED_FRAME = """\
  File "/opt/conda/lib/python3.9/asyncio/events.py", line 80, in _run
    self._context.run(self._callback, *self._args)
> File "/opt/tgi/server.py", line 133, in serve_inner
    model = get_model(
  File "/opt/torch/distributed/distributed_c10d.py", line 3315, in barrier
    work = group.barrier(opts=opts)
RuntimeError: CUDA error: operation not supported
"""


def test_a_frame_marked_with_an_arrow_stays_in_its_traceback() -> None:
    (tb,) = only(events_of(MARKED_FRAME), "traceback")
    assert [f.func for f in tb.frames] == ["_run", "serve_inner", "barrier"]
    assert tb.fields["exc_type"] == "RuntimeError"


GDB = """\
#0  0x00007e0a5a510813 in __GI___wait4 (pid=34514) at ../sysdeps/unix/sysv/linux/wait4.c:30
#1  0x00007e0a5ab5c0d3 in ggml_print_backtrace () from libggml-base.so
#3 ggml_cuda_flash_attn_ext_mma_f16(ggml_backend_cuda_context&, ggml_tensor*)
#4 ggml_backend_cuda_graph_compute(ggml_backend*, ggml_cgraph*)
"""


def test_gdb_backtrace_lines_are_native_frames_innermost_first() -> None:
    (stack,) = only(events_of(GDB), "stack")
    assert stack.frames[-1].func.startswith("__GI___wait4")  # innermost is printed first
    # the stack is named where the crash was, past the frames that only report it
    assert stack.text.startswith("ggml_cuda_flash_attn_ext_mma_f16")
    assert all(f.file == "<native>" for f in stack.frames)


def test_an_unknown_frame_does_not_split_a_gdb_backtrace() -> None:
    text = GDB.replace(
        "#3 ggml_cuda", "#2  0x00007735c816d6f4 in ?? () from libggml-base.so\n#3 ggml_cuda"
    )
    (stack,) = only(events_of(text), "stack")
    assert len(stack.frames) == 5


WRAPPED = """\
tabbyapi-1  | ERROR:      File "/usr/local/lib/python3.10/dist-packages/exllamav2/config.py",
tabbyapi-1  | line 378, in prepare
tabbyapi-1  | ERROR:        raise ValueError(f" ## Could not find {prefix}.* in model")
tabbyapi-1  | ERROR:    ValueError:  ## Could not find model.embed_tokens.* in model
"""


def test_a_frame_wrapped_after_its_file_is_one_frame() -> None:
    (tb,) = only(events_of(WRAPPED), "traceback")
    (frame,) = tb.frames
    assert (frame.file.rsplit("/", 2)[-2:], frame.line, frame.func) == (
        ["exllamav2", "config.py"],
        378,
        "prepare",
    )
    assert tb.fields["exc_type"] == "ValueError"


def test_a_file_line_not_followed_by_its_line_number_is_dropped_quietly() -> None:
    text = '  File "/x/a.py",\nRuntimeError: CUDA error: an illegal memory access was encountered\n'
    assert only(events_of(text), "traceback")[0].fields["exc_type"] == "RuntimeError"


def test_a_frame_without_a_function_is_a_module_being_compiled() -> None:
    # Python prints no function for a SyntaxError's frame or an annotation evaluated at import
    text = (
        'File ".../flashinfer/comm/mnnvl.py", line 54\n'
        "    from .fd_exchange import broadcast_fd, exchange_fds\n"
        'File ".../flashinfer/comm/fd_exchange.py", line 55\n'
        "    def _fd_ancillary(fd: int) -> tuple[array.array[int]]:\n"
        "TypeError: type 'array.array' is not subscriptable\n"
    )
    (tb,) = only(events_of(text), "traceback")
    assert [f.file for f in tb.frames][-1] == ".../flashinfer/comm/fd_exchange.py"
    assert tb.frames[-1].func == "<module>" and tb.frames[-1].line == 55
