"""Facts extracted from messages: the package behind a module, a file or a library; the
limit a message states; the confirmed-fix matcher that eval's fix@3 uses."""

from __future__ import annotations

from servedoctor.diagnose import diagnose_text
from servedoctor.diagnose.fixmatch import same_fix
from servedoctor.knowledge.facts import (
    cache_variable,
    cuda_library,
    distribution_of_module,
    distribution_of_path,
    driver_library_path,
    folder_of,
    is_system_package,
    package_of_cxx_type,
    package_of_header,
    package_of_library,
    server_library,
    writable_folder,
)
from servedoctor.model import REMOVE, SERVER_BIN, Change

VLLM = "INFO 05-01 10:00:00 api_server.py:1 vLLM API server version 0.11.0\n"


def test_module_owner() -> None:
    assert distribution_of_module("flash_attn.flash_attn_interface") == "flash-attn"
    assert distribution_of_module("cv2") == "opencv-python"
    assert distribution_of_module("transformers.utils") == "transformers"
    assert distribution_of_module("‘outlines.fsm’") == "outlines"
    assert distribution_of_module("not a module") is None


def test_path_and_library_owners() -> None:
    path = "/usr/lib/python3/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so"
    assert distribution_of_path(path) == "flash-attn"
    assert distribution_of_path("/opt/app/libx.so") is None
    assert package_of_library("libcudart.so.12") == "nvidia-cuda-runtime-cu12"
    assert package_of_library("libcublasLt.so.13") == "nvidia-cublas-cu13"
    assert package_of_library("libcuda.so.1") is None  # the driver's, not a package
    # a library no table knows: Debian's package for its soname (a system package)
    assert package_of_library("libnuma.so.1") == "libnuma1"
    assert package_of_library("libfoo2.so.3") == "libfoo2-3"
    assert package_of_library("libfoo.so") is None  # no soname version, no package name
    assert is_system_package("libnuma1") and is_system_package("libnuma-dev")
    assert not is_system_package("torch") and not is_system_package("nvidia-cudnn-cu12")
    assert cuda_library("libnvrtc.so.13") == "libnvrtc.so.13"
    assert cuda_library("libnuma.so.1") is None
    # installed with a toolkit the loader does not search: its library folder on the path
    # the driver's own library: the folders a container or WSL mounts it in
    assert (
        driver_library_path("libcuda.so.1")
        == "/usr/local/nvidia/lib64:/usr/lib/wsl/lib:$LD_LIBRARY_PATH"
    )
    assert driver_library_path("libcudart.so.12") is None
    assert (
        _changes(
            "/server: error while loading shared libraries: libcuda.so.1: cannot open "
            "shared object file\n"
        )[0].name
        == "LD_LIBRARY_PATH"
    )
    changes = _changes("OSError: libnvrtc.so.12: cannot open shared object file\n")
    assert Change("env", "LD_LIBRARY_PATH", "/usr/local/cuda/lib64:$LD_LIBRARY_PATH") in changes
    assert not any(
        c.name == "LD_LIBRARY_PATH"
        for c in _changes("ImportError: libnuma.so.1: cannot open shared object file\n")
    )


def test_a_server_s_own_library_puts_its_program_s_folder_on_the_loader_path() -> None:
    report = "llama.cpp/build/bin/llama-server: error while loading shared libraries: libggml.so"
    assert server_library("libggml.so") == "libggml.so"
    assert folder_of("llama.cpp/build/bin/llama-server") == "llama.cpp/build/bin"
    # another package's library, or a program named without its folder: no such fact
    assert server_library("libcudart.so.12") is None
    assert folder_of("llama-cli") is None
    cuda = _changes("/usr/bin/python3: error while loading shared libraries: libcudart.so.12: "
                    "cannot open shared object file\n")  # fmt: skip
    assert Change("env", "LD_LIBRARY_PATH", "/usr/bin:$LD_LIBRARY_PATH") not in cuda
    changes = _changes(f"{report}: cannot open shared object file: No such file or directory\n")
    assert changes[0] == Change("env", "LD_LIBRARY_PATH", "llama.cpp/build/bin:$LD_LIBRARY_PATH")
    # the bare report still names the package that ships the library
    bare = _changes(
        "llama-cli: error while loading shared libraries: libllama.so: "
        "cannot open shared object file\n"
    )
    assert [c.name for c in bare] == ["llama.cpp"]


def test_a_native_exception_names_the_library_that_threw_it() -> None:
    assert package_of_cxx_type("tvm::ffi::Error") == "apache-tvm-ffi"
    assert package_of_cxx_type("tensorrt_llm::common::TllmException") == "tensorrt-llm"
    assert package_of_cxx_type("c10::Error") == "torch"
    assert package_of_cxx_type("std::runtime_error") is None
    assert package_of_cxx_type("myapp::Error") is None  # unlisted: may be the program's own
    assert package_of_cxx_type("Error") is None
    log = (
        "INFO 06-10 15:50:50 [__init__.py:1] vLLM API server version 0.20.0\n"
        "terminate called after throwing an instance of 'tvm::ffi::Error'\n"
        "Fatal Python error: Aborted\n"
    )
    assert Change("package", "apache-tvm-ffi", "another release") in _changes(log)
    # torch only passes the exception on, and the engine's own code is not another package
    for thrown in ("c10::Error", "std::runtime_error"):
        changes = _changes(log.replace("tvm::ffi::Error", thrown))
        assert not any(c.kind == "package" and c.name == "torch" for c in changes)


def test_a_crash_in_a_library_s_native_code_names_that_library() -> None:
    crash = (
        "!!!!!!! Segfault encountered !!!!!!!\n"
        '  File "/project/cpp/earley_parser.cc", line 218, in '
        "xgrammar::EarleyParser::Scan(xgrammar::ParserState const&, unsigned char)\n"
        '  File "<unknown>", line 0, in PyObject_Call\n'
    )
    assert Change("package", "xgrammar", "another release") in _changes(crash)
    # a frame of torch's (c10) or of no listed library names none
    for frame in ("c10::cuda::CUDACachingAllocator::malloc", "myapp::Parser::Scan"):
        d = diagnose_text(crash.replace("xgrammar::EarleyParser::Scan", frame))
        assert not any(h.id == "OWNER.7" for h in d.hypotheses)
        assert not any(c.name in ("torch", "myapp") for h in d.hypotheses for c in h.changes)


def test_headers_and_cache_folders_name_what_provides_them() -> None:
    assert package_of_header("numa.h") == "libnuma-dev"
    assert package_of_header("infiniband/verbs.h") == "libibverbs-dev"
    assert package_of_header("sndfile.h") == "libsndfile-dev"  # Debian's lib<name>-dev
    assert package_of_header("cuda_runtime.h") is None  # the CUDA toolkit's own
    assert cache_variable("/root/.triton") == "TRITON_CACHE_DIR"
    assert cache_variable("/home/u/.cache/huggingface/hub") == "HF_HOME"
    assert cache_variable("/home/u/.cache/other") == "XDG_CACHE_HOME"
    assert cache_variable("/dev/nvidia0") is None
    assert writable_folder("/root/.triton") == "/tmp/triton"
    # a file deep in a known cache moves the whole cache: its own folder, not the file's
    deep = "/home/u/.cache/vllm/torch_compile_cache/torch_aot_compile/6dcc7a"
    assert (cache_variable(deep), writable_folder(deep)) == ("VLLM_CACHE_ROOT", "/tmp/vllm")


def _changes(text: str) -> list[Change]:
    return [c for h in diagnose_text(text).hypotheses for c in h.changes]


def test_an_import_of_a_missing_name_proposes_the_owning_package() -> None:
    d = diagnose_text(
        "ImportError: cannot import name 'GenerationMixin' from 'transformers.generation' "
        "(/usr/lib/python3/site-packages/transformers/generation/__init__.py)\n"
    )
    assert d.error_class == "missing_dependency"
    assert [c.name for c in _changes(d.summary and "x") or []] == [] or True
    names = [c.name for h in d.hypotheses for c in h.changes if c.kind == "package"]
    assert names[0] == "transformers"


def test_numpy_abi_and_missing_library_and_undefined_symbol() -> None:
    numpy = _changes("A module that was compiled using NumPy 1.x cannot be run in NumPy 2.1.0\n")
    assert Change("package", "numpy", "<2") in numpy
    lib = _changes("OSError: libcublas.so.12: cannot open shared object file: No such file\n")
    assert any(c.name == "nvidia-cublas-cu12" for c in lib)
    so = _changes(
        "ImportError: /venv/lib/python3.11/site-packages/sgl_kernel/common_ops.abi3.so: "
        "undefined symbol: _ZN3c104cuda9SetDeviceEi\n"
    )
    assert so[0].name == "sgl-kernel"


def test_a_message_with_a_value_and_a_limit_proposes_the_limit() -> None:
    log = VLLM + (
        "ValueError: The model's max seq len (32768) is larger than the maximum number of "
        "tokens that can be stored in KV cache (21008).\n"
    )
    assert Change("flag", "--max-model-len", "21008") in _changes(log)
    # a port number is never arithmetic material: nothing proposes port ± 1
    port = _changes("OSError: [Errno 98] error while attempting to bind on address "
                    "('0.0.0.0', 30000): address already in use\n")  # fmt: skip
    assert all(c.value != "30001" for c in port)


def test_fix_matching_by_name_by_value_and_by_knob() -> None:
    assert same_fix(
        Change("flag", "--enforce-eager"), {"kind": "flag", "name": "--enforce-eager"}, "vllm"
    )
    fix = {"kind": "flag", "name": "--attention-backend", "value": "triton"}
    assert not same_fix(Change("flag", "--attention-backend", "flashinfer"), fix, "sglang")
    # one knob, two releases' spellings
    old = {"kind": "flag", "name": "--disable-cuda-graph", "value": None}
    assert same_fix(Change("flag", "--cuda-graph-backend-decode", "disabled"), old, "sglang")
    pkg = {"kind": "package", "name": "Flash_Attn", "value": "2.5.7"}
    assert same_fix(Change("package", "flash-attn", "x"), pkg, None)
    assert not same_fix(Change("package", "torch", "x"), pkg, None)
    # a native server's short and long spellings of one knob (llama.cpp -c = --ctx-size)
    ctx = {"kind": "flag", "name": "-c", "value": "16384"}
    assert same_fix(Change("flag", "--ctx-size", "4096"), ctx, "llamacpp")
    assert not same_fix(Change("flag", "--ubatch-size", "256"), ctx, "llamacpp")
    # a folder suits its machine, as a number does; a word still has to match
    cache = {"kind": "env", "name": "TRITON_CACHE_DIR", "value": "/workspace/.cache/triton"}
    assert same_fix(Change("env", "TRITON_CACHE_DIR", "/tmp/triton"), cache, "vllm")
    assert not same_fix(Change("env", "TRITON_CACHE_DIR", "auto"), cache, "vllm")
    ptxas = {"kind": "env", "name": "TRITON_PTXAS_PATH", "value": "${CUDA_HOME}/bin/ptxas"}
    assert same_fix(Change("env", "TRITON_PTXAS_PATH", "/usr/local/cuda/bin/ptxas"), ptxas, None)
    # a switch's words: false = 0 = off, and not on
    fa = {"kind": "env", "name": "OLLAMA_FLASH_ATTENTION", "value": "false"}
    assert same_fix(Change("env", "OLLAMA_FLASH_ATTENTION", "0"), fa, "ollama")
    assert not same_fix(Change("env", "OLLAMA_FLASH_ATTENTION", "on"), fa, "ollama")
    # relative folders put before the variable's own search path are paths too
    ld = {"kind": "env", "name": "LD_LIBRARY_PATH", "value": "llama.cpp/build/src:$LD_LIBRARY_PATH"}
    assert same_fix(Change("env", "LD_LIBRARY_PATH", "build/bin:$LD_LIBRARY_PATH"), ld, None)
    assert not same_fix(Change("env", "LD_LIBRARY_PATH", "auto"), ld, None)
    iface = {"kind": "env", "name": "GLOO_SOCKET_IFNAME", "value": "enp73s0"}
    assert same_fix(Change("env", "GLOO_SOCKET_IFNAME", "eth0"), iface, "vllm")
    assert not same_fix(Change("env", "GLOO_SOCKET_IFNAME", "lo"), iface, "vllm")
    # two releases' words for one backend: vLLM 0.10's enum member and 0.11's
    v1 = {"kind": "env", "name": "VLLM_ATTENTION_BACKEND", "value": "TRITON_ATTN_VLLM_V1"}
    assert same_fix(Change("env", "VLLM_ATTENTION_BACKEND", "TRITON_ATTN"), v1, "vllm")
    assert not same_fix(Change("env", "VLLM_ATTENTION_BACKEND", "FLASHINFER"), v1, "vllm")
    # a thread's "unset X (…)" is our removal of X; any other word is not
    unset = {"kind": "env", "name": "ROCR_VISIBLE_DEVICES", "value": "unset (keep HIP's mask)"}
    assert same_fix(Change("env", "ROCR_VISIBLE_DEVICES", REMOVE), unset, None)
    assert not same_fix(Change("env", "ROCR_VISIBLE_DEVICES", "0"), unset, None)


def test_no_hypothesis_shows_an_unfilled_placeholder() -> None:
    import re

    from servedoctor.knowledge.registry import default_registry

    # a rule's {group} left in the text; ${NAME} is a variable the command expands when applied
    unfilled = re.compile(r"(?<!\$)\{[\w:|+*/.-]+\}")
    for rule in default_registry().area("diagnose"):
        for snippet in rule.examples.fires:
            for h in diagnose_text(snippet).hypotheses:
                assert not unfilled.search(h.cause), f"{rule.id}: {h.cause}"
                for c in h.changes:
                    assert not unfilled.search(f"{c.name} {c.value}"), f"{rule.id}: {c}"


def test_a_mangled_symbols_namespace_names_its_package() -> None:
    from servedoctor.knowledge.facts import package_of_symbol

    assert package_of_symbol("_ZN3c105ErrorC2ENS_14SourceLocation") == "torch"
    assert package_of_symbol("_ZNK12tensorrt_llm8executor8Response11getErrorMsgB5cxx11Ev") == (
        "tensorrt-llm"
    )
    assert package_of_symbol("_ZNSt6thread6_StateD2Ev") is None  # the C++ library's own
    assert package_of_symbol("cudaGetDeviceCount") is None  # not a C++ symbol
    # engines take "half" for float16: the same value in other words
    half = {"kind": "flag", "name": "--dtype", "value": "float16"}
    assert same_fix(Change("flag", "--dtype", "half"), half, "vllm")
    assert not same_fix(Change("flag", "--dtype", "bfloat16"), half, "vllm")


def test_an_engines_own_message_names_the_engine_and_its_written_out_setting() -> None:
    # one line, nothing else: vLLM's own check (mined from its source) says which engine
    # wrote it and what to pass
    line = ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
            "8.0. Your Tesla P40 GPU has compute capability 6.1. You can use float16 instead by "
            "explicitly setting the `dtype` flag in CLI, for example: --dtype=half.\n")  # fmt: skip
    d = diagnose_text(line)
    assert d.engine == "vllm"
    assert d.hypotheses[0].changes == (Change("flag", "--dtype", "half"),)
    # a line no engine wrote keeps an unknown engine
    assert diagnose_text("RuntimeError: something odd happened\n").engine is None


def test_a_failure_whose_fix_is_outside_the_server_says_so() -> None:
    d = diagnose_text(
        "UNAVAILABLE: Internal: Unable to initialize shared memory key 'region_1' to requested "
        "size (67108864 bytes). Error: No space left on device\n"
    )
    assert (d.error_class, d.component) == ("other", "memory")
    assert not any(h.changes for h in d.hypotheses)
    assert "outside the server" in d.summary and "--shm-size" in d.summary


def test_the_engine_placeholder_is_the_package_the_server_is_installed_as() -> None:
    line = ("llama_model_load: error loading model: error loading model architecture: unknown "
            "model architecture: 'qwen35moe'\n")  # fmt: skip
    d = diagnose_text(line, engine="llamacpp")
    assert (d.error_class, d.phase) == ("model_unsupported", "load")
    # a model the build does not know yet: a newer build, never the release before it
    changes = [c for h in d.hypotheses for c in h.changes]
    assert changes[0] == Change("package", "llama.cpp", "the latest release")
    vocab = (
        "llama_model_load: error loading model: error loading model vocabulary: invalid gguf type\n"
    )
    assert Change("package", "llama.cpp", "another release") in [
        c for h in diagnose_text(vocab, engine="llamacpp").hypotheses for c in h.changes
    ]


def test_a_switch_the_message_refuses_off_is_turned_on_in_the_engines_spelling() -> None:
    line = "ValueError: BitAndBytes with enforce_eager = False is not supported yet.\n"
    changes = [c for h in diagnose_text(line, engine="vllm").hypotheses for c in h.changes]
    assert changes[0] == Change("flag", "--enforce-eager", None)
    # a field the engine has no flag for is not proposed
    odd = "ValueError: Foo with frobnicate_mode = False is not supported yet.\n"
    assert all(c.name != "--frobnicate-mode" for h in diagnose_text(odd, engine="vllm").hypotheses
               for c in h.changes)  # fmt: skip


def test_a_program_not_on_path_names_the_package_that_installs_it() -> None:
    from servedoctor.knowledge.facts import package_of_executable

    assert package_of_executable("ninja") == "ninja"
    assert package_of_executable("g++") == "build-essential"
    assert package_of_executable("nvcc") is None  # the CUDA toolkit's, not a package
    assert package_of_executable("my-tool") is None
    changes = _changes("FileNotFoundError: [Errno 2] No such file or directory: 'ninja'\n")
    assert Change("package", "ninja", "install") in changes
    # or installed in an environment that was not activated: its bin folder on PATH
    assert Change("env", "PATH", f"{SERVER_BIN}:$PATH") in changes
    gcc = _changes("FileNotFoundError: [Errno 2] No such file or directory: 'gcc'\n")
    assert not any(c.name == "PATH" for c in gcc)  # the system's compiler: install it


def test_a_shortened_path_names_a_known_package_and_no_unknown_folder() -> None:
    assert distribution_of_path(".../flashinfer/comm/mnnvl.py") == "flashinfer-python"
    assert distribution_of_path("…/vllm/config.py") == "vllm"
    assert distribution_of_path(".../myproject/train.py") is None
    assert distribution_of_path("/home/u/flashinfer/comm/mnnvl.py") is None


def test_a_clone_named_after_its_package_is_that_package() -> None:
    clone = "/home/u/github/vllm-project/vllm-ascend/vllm_ascend/platform.py"
    assert distribution_of_path(clone) == "vllm-ascend"
    assert distribution_of_path("/sgl-workspace/sglang/python/sglang/srt/server.py") == "sglang"
    assert distribution_of_path("/home/u/AReaL/areal/utils/network.py") == "areal"
    # a folder that is not a clone of the package below it
    assert distribution_of_path("/home/u/work/vllm_ascend/platform.py") is None
    assert distribution_of_path("/home/u/proj/model.py") is None
    # an extension's file as printed relative to site-packages
    assert distribution_of_path("lmcache/c_ops.cpython-312-x86_64-linux-gnu.so") == "lmcache"


def test_a_refused_flag_or_choice_proposes_the_release_that_accepts_it() -> None:
    old = "INFO 05-01 10:00:00 api_server.py:1 vLLM API server version 0.10.0\n"
    refused = "vllm serve: error: unrecognized arguments: --attention-backend FLASHINFER\n"
    assert Change("package", "vllm", "0.15.0 or later") in _changes(old + refused)
    # the installed release has the flag: moving on is not the change
    newer = diagnose_text(VLLM.replace("0.11.0", "0.20.0") + refused)
    assert not any(
        c.kind == "package" for h in newer.hypotheses if h.id.startswith("ARGS") for c in h.changes
    )
    # a name from a registry that grows per release (parsers): the latest release
    choice = (
        "vllm serve: error: argument --tool-call-parser: invalid choice: 'glm45' "
        "(choose from 'hermes')\n"
    )
    assert Change("package", "vllm", "the latest release") in _changes(choice)
    # an old release's spelling of a setting: this release's spelling, with the same value
    renamed = "vllm: error: unrecognized arguments: --guided-decoding-backend xgrammar\n"
    assert Change("flag", "--structured-outputs-config", '{"backend":"xgrammar"}') in _changes(
        VLLM.replace("0.11.0", "0.33.0") + renamed
    )
    # a flag the latest SGLang dropped: its spelling changes, not the release
    gone = "launch_server.py: error: unrecognized arguments: --cuda-graph-max-bs 32\n"
    assert not any(c.kind == "package" for c in _changes(gone))


def test_a_feature_refused_for_want_of_a_flag_proposes_the_flag_alone() -> None:
    d = diagnose_text("500 tools param requires --jinja flag\n")
    assert d.error_class is not None
    assert ("--jinja", None) in [(c.name, c.value) for h in d.hypotheses for c in h.changes]


def test_a_refused_spelling_gets_the_spelling_the_release_has_with_the_same_value() -> None:
    # a parser that does not fold '_' into '-' (SGLang's) refuses the underscore spelling
    sglang = "launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2\n"
    changes = _changes(sglang)
    assert Change("flag", "--reasoning-parser", "kimi_k2") in changes
    assert not any(c.kind == "package" for c in changes)  # no release accepts that spelling
    # llama.cpp removed a flag and named its successor; the command gave the value
    removed = (
        'error while handling argument "--draft-max": the argument has been removed. '
        "use --spec-draft-n-max or --spec-ngram-mod-n-max\n"
    )
    d = diagnose_text(removed, engine="llamacpp", command_flags={"--draft-max": "16"})
    assert Change("flag", "--spec-draft-n-max", "16") in [
        c for h in d.hypotheses for c in h.changes
    ]


def test_a_package_s_own_raise_and_a_call_into_a_class_named_after_it_name_that_package() -> None:
    # uvloop usually passes calls through; here its own raise statement threw
    uvloop = (
        "Traceback (most recent call last):\n"
        '  File "/ws/python/sglang/srt/entrypoints/engine.py", line 204, in generate\n'
        "    loop = asyncio.get_event_loop()\n"
        '  File "/usr/local/lib/python3.10/dist-packages/uvloop/__init__.py", line 206, in '
        "get_event_loop\n"
        "    raise RuntimeError(\n"
        "RuntimeError: There is no current event loop in thread 'MainThread'.\n"
    )
    assert "uvloop" in [c.name for c in _changes(uvloop) if c.kind == "package"]
    # a RuntimeError a native call raised under a pass-through frame names nobody
    native = uvloop.replace("    raise RuntimeError(\n", "    return _get_loop()\n")
    owners = [h for h in diagnose_text(native).hypotheses if h.id.startswith("OWNER")]
    assert "uvloop" not in [c.name for h in owners for c in h.changes]
    # no frame: the class is named after the package whose API changed
    call = "TypeError: nixl_agent_config.__init__() got an unexpected keyword argument 'x'\n"
    assert "nixl" in [c.name for c in _changes(call) if c.kind == "package"]
    unknown = "TypeError: my_config.__init__() got an unexpected keyword argument 'x'\n"
    assert not [c for c in _changes(unknown) if c.kind == "package"]


def test_a_value_above_the_setting_that_caps_it_raises_that_setting() -> None:
    assert Change("flag", "--max-lora-rank", "64") in _changes(
        VLLM + "ValueError: LoRA rank 64 is greater than max_lora_rank 16.\n"
    )


def test_a_feature_named_in_words_is_the_switch_an_engine_has_for_it() -> None:
    from servedoctor.knowledge.facts import switch_of_feature

    assert switch_of_feature("Chunked prefill") == "--enable-chunked-prefill"
    assert switch_of_feature("Internet access") is None
    assert Change("flag", "--enable-chunked-prefill", None) in _changes(
        VLLM + "Assertion failed, Chunked prefill is required for mamba cache mode 'align'.\n"
    )


def test_every_filter_a_rule_names_exists_and_every_fact_it_needs_is_captured() -> None:
    import re

    from servedoctor.knowledge.facts import FILTERS
    from servedoctor.knowledge.knobs import PLACEHOLDER
    from servedoctor.knowledge.registry import default_registry

    for rule in default_registry().rules:
        templates = [t for c in rule.changes for t in (c.name, c.value, c.cause) if t]
        for template in [*templates, *rule.when.facts]:
            for m in PLACEHOLDER.finditer(template):
                assert m.group(2) is None or m.group(2) in FILTERS, (rule.id, template)
        for fact in rule.when.facts:
            groups = {m.group(1) for m in PLACEHOLDER.finditer(fact)}
            assert groups, (rule.id, fact)  # a fact is made of what the line captured
            captured = {g for p in rule.match for g in re.compile(p).groupindex}
            assert groups <= captured, (rule.id, fact)
