"""Process names from line prefixes are evidence: which engine, which of its processes."""

from __future__ import annotations

from servedoctor.diagnose import diagnose_text

V1 = (
    "(VllmWorker rank=0 pid=12144) ERROR 04-30 16:21:27 [multiproc_executor.py:380] "
    "WorkerProc hit an exception.\n"
    "(VllmWorker rank=0 pid=12144) ERROR 04-30 16:21:27 [multiproc_executor.py:380] "
    "RuntimeError: something failed while capturing\n"
)


def test_the_worker_prefix_names_the_engine() -> None:
    assert diagnose_text(V1).engine == "vllm"


def test_v1_workers_offer_the_v0_engine_where_the_release_has_it() -> None:
    d = diagnose_text(V1, engine_version="0.8.4")
    assert ("VLLM_USE_V1", "0") in [(c.name, c.value) for h in d.hypotheses for c in h.changes]


def test_v0_worker_processes_do_not() -> None:
    v0 = V1.replace("VllmWorker rank=0", "VllmWorkerProcess")
    d = diagnose_text(v0)
    # the ranked three (what follows them is what similar public threads did)
    assert "VLLM_USE_V1" not in [c.name for h in d.hypotheses[:3] for c in h.changes]


def test_the_current_worker_and_api_server_names_are_vllm_s() -> None:
    log = (
        "(Worker_TP1 pid=3534) ERROR 10-11 22:28:17 [multiproc_executor.py:694] "
        "RuntimeError: Could not find nvcc\n"
    )
    assert diagnose_text(log).engine == "vllm"


def test_a_server_that_embeds_llama_cpp_keeps_its_own_name() -> None:
    log = (
        "error making request: an error was encountered while running the model: EOF\n"
        "ggml_cuda_cpy_fn: unsupported type combination (q4_0 to f32)\n"
    )
    d = diagnose_text(log)
    assert d.engine == "ollama"  # ggml's own line would say llama.cpp on its own
    assert d.hypotheses[0].changes[0].name == "OLLAMA_KV_CACHE_TYPE"


def test_llama_cpp_lines_alone_are_llama_cpp() -> None:
    log = "ggml_cuda_cpy_fn: unsupported type combination (q4_0 to f32)\n"
    assert diagnose_text(log).engine == "llamacpp"


def test_an_engine_named_by_its_own_message_has_its_own_phase_markers_read() -> None:
    from servedoctor.diagnose.observe import named, observe
    from servedoctor.logs.events import extract
    from servedoctor.logs.lines import clean

    log = (
        "INFO:     Application startup complete.\n"
        "Shutting down\n"
        "ValueError: This model requires `--tokenizer-mode mistral`\n"
    )
    lines = [clean(n, raw) for n, raw in enumerate(log.encode().splitlines(), start=1)]
    obs = observe(extract(lines))
    assert obs.engine is None
    assert [p.fields["phase"] for p in obs.phases] == ["serving"]  # the generic markers
    vllm = named(obs, "vllm")
    assert [p.fields["phase"] for p in vllm.phases] == ["serving", "shutdown"]
    assert obs.engine is None  # a copy
    assert diagnose_text(log).phase == "shutdown"


def test_the_format_of_a_log_s_lines_names_its_engine() -> None:
    vllm = "INFO 12-30 17:35:37 [__init__.py:216] Automatically detected platform cuda.\nRuntimeError: boom\n"
    assert diagnose_text(vllm).engine == "vllm"
    llama = "0.00.034.405 I srv    load_model: loading model 'm.gguf'\n/x/y.cpp:12: GGML_ASSERT(a) failed\n"
    assert diagnose_text(llama).engine == "llamacpp"
    # a format nobody owns names nobody
    plain = "2025-01-01 10:00:00,000 - app - ERROR - RuntimeError: boom\n"
    assert diagnose_text(plain).engine is None


def test_a_module_or_file_of_the_vllm_package_names_vllm_but_its_docs_site_does_not() -> None:
    assert (
        diagnose_text("AttributeError: module 'vllm.envs' has no attribute 'is_set'\n").engine
        == "vllm"
    )
    so = "ImportError: /usr/lib/python3/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c10\n"
    assert diagnose_text(so).engine == "vllm"
    docs = "RuntimeError: boom, see https://docs.vllm.ai/en/latest/ for help\n"
    assert diagnose_text(docs).engine is None


def test_a_model_address_on_ollama_s_registry_does_not_name_ollama() -> None:
    log = (
        "exec_cmd: podman run --label ai.ramalama.model=ollama://tinyllama quay.io/img llama-run m\n"
        "ERROR (catatonit:2): failed to exec pid1: No such file or directory\n"
    )
    d = diagnose_text(log)
    assert d.engine != "ollama"
    assert d.error_class == "missing_dependency"


def test_the_program_a_traceback_starts_in_names_the_engine_over_what_it_imports() -> None:
    log = "\n".join(
        [
            "INFO 02-17 02:35:21 __init__.py:190] Automatically detected platform cuda.",
            "(EngineCore pid=1) INFO vllm kernels loaded",
            "(EngineCore pid=1) INFO vllm kernels ready",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.10/runpy.py", line 196, in _run_module_as_main',
            "    return _run_code(code, main_globals, None,",
            '  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 6, in <module>',
            "    from sglang.srt.entrypoints.http_server import launch_server",
            '  File "/usr/local/lib/python3.10/dist-packages/vllm/_custom_ops.py", line 9, in <module>',
            "    import vllm._C",
            "ImportError: vllm/_C.abi3.so: undefined symbol: _ZN3c1010Dispatcher",
        ]
    )
    assert diagnose_text(log + "\n").engine == "sglang"


def test_pip_building_an_engine_s_distribution_names_that_engine() -> None:
    log = (
        "Building wheels for collected packages: sglang\n"
        "  error: subprocess-exited-with-error\n"
        "ERROR: Failed building wheel for sglang\n"
        "Failed to build sglang\n"
    )
    assert diagnose_text(log).engine == "sglang"
    # a package that is no engine's names none
    assert diagnose_text(log.replace("sglang", "flash-attn")).engine is None


def test_the_engine_settings_class_printed_whole_names_vllm() -> None:
    log = (
        "INFO 2025-03-29 06:17:53,742 DS-R1 a3e34qi7 -- Starting with engine args: "
        "AsyncEngineArgs(model='DeepSeek-R1', served_model_name=None, enforce_eager=False)\n"
        + "INFO 2025-03-29 06:17:54,000 DS-R1 a3e34qi7 -- loading\n" * 40
        + "RuntimeError: NCCL error: unhandled system error\n"
    )
    d = diagnose_text(log)
    assert d.engine == "vllm"
    assert d.extras["flags_in_effect"]["enforce_eager"] == "false"  # a dump of its settings


def test_a_native_backtrace_of_the_servers_own_binary_names_it() -> None:
    abort = (
        "llama-vocab.cpp:1472: GGML_ASSERT(pc_type == GGUF_TYPE_INT8) failed\n"
        "/bin/ollama(ggml_abort+0x136)[0x5584c1e66436]\n"
        "/bin/ollama(+0x116c96a)[0x5584c1f7b96a]\n"
        "SIGABRT: abort\n"
    )
    assert diagnose_text(abort).engine == "ollama"
    # a frame of another program is not Ollama's
    assert diagnose_text(abort.replace("/bin/ollama(", "/usr/bin/myapp(")).engine != "ollama"


def test_ollamas_cli_at_a_prompt_names_it_over_the_llama_cpp_lines_it_embeds() -> None:
    log = (
        "❯ ollama run gemma3:4b \n"
        "Error: 500 Internal Server Error: model failed to load, check ollama server logs\n"
        "ggml_metal_init: picking default device: Apple M5\n"
        "ggml_metal_library_init: error: Error Domain=MTLLibraryErrorDomain Code=3\n"
    )
    assert diagnose_text(log).engine == "ollama"
