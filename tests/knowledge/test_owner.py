"""Whose code raised it: the raising package's release and the engine's release."""

from __future__ import annotations

from servedoctor.diagnose import diagnose_text
from servedoctor.diagnose.fixmatch import same_fix
from servedoctor.diagnose.owner import RAISER_CONFIDENCE, engine_release
from servedoctor.logs.model import Frame
from servedoctor.model import Change, Hypothesis

VLLM = "INFO 05-01 10:00:00 api_server.py:1 vLLM API server version 0.11.0\n"
SITE = "/opt/venv/lib/python3.12/site-packages"


def _traceback(*frames: tuple[str, str], error: str) -> str:
    lines = ["Traceback (most recent call last):"]
    for path, func in frames:
        lines += [f'  File "{SITE}/{path}", line 10, in {func}', "    x = call()"]
    return "\n".join([*lines, error]) + "\n"


def _packages(hypotheses: tuple[Hypothesis, ...]) -> list[tuple[str, str | None]]:
    return [(c.name, c.value) for h in hypotheses for c in h.changes if c.kind == "package"]


def test_an_api_error_raised_in_a_library_names_that_library_and_the_engine_pin() -> None:
    log = VLLM + _traceback(
        ("vllm/entrypoints/openai/api_server.py", "build_app"),
        ("fastapi/routing.py", "add_api_route"),
        ("torch/nn/modules/module.py", "_call_impl"),
        error="TypeError: 'PydanticUndefinedType' object is not subscriptable",
    )
    packages = _packages(diagnose_text(log).hypotheses)
    assert ("fastapi", "the version vllm 0.11.0 requires") in packages


def test_torch_frames_pass_calls_through_to_the_library_below() -> None:
    log = VLLM + _traceback(
        ("flashinfer/prefill.py", "run"),
        ("torch/utils/_contextlib.py", "decorate_context"),
        error="ValueError: The dtype of q does not match the cached plan",
    )
    names = [name for name, _ in _packages(diagnose_text(log).hypotheses)]
    assert "flashinfer-python" in names
    assert "torch" not in names


def test_a_cuda_error_does_not_blame_the_package_it_surfaced_in() -> None:
    log = VLLM + _traceback(
        ("flashinfer/prefill.py", "run"),
        error="RuntimeError: CUDA error: an illegal memory access was encountered",
    )
    names = [name for name, _ in _packages(diagnose_text(log).hypotheses)]
    assert "flashinfer-python" not in names


def test_a_failure_inside_the_engine_offers_its_release_among_the_first_three() -> None:
    log = VLLM + _traceback(
        ("vllm/worker/worker_base.py", "execute_model"),
        ("vllm/model_executor/models/llama.py", "forward"),
        error="RuntimeError: something inside the model went wrong",
    )
    hypotheses = diagnose_text(log).hypotheses
    assert ("vllm", "the release before 0.11.0") in _packages(hypotheses[:3])
    # above the class's generic switches; below what a rule or the raising package's own
    # code says
    release = next(h for h in hypotheses if h.changes[0].name == "vllm")
    generic = [h.confidence for h in hypotheses if h.id.startswith("FALL")]
    assert generic and release.confidence > max(generic)
    assert release.confidence < RAISER_CONFIDENCE
    recognised = diagnose_text(
        VLLM
        + _traceback(
            ("vllm/worker/worker_base.py", "execute_model"),
            ("vllm/model_executor/models/llama.py", "forward"),
            error="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        )
    ).hypotheses
    assert recognised[0].changes[0].kind != "package"


def test_no_engine_release_for_a_taken_port() -> None:
    port = VLLM + "OSError: [Errno 98] Address already in use\n"
    assert "vllm" not in [n for n, _ in _packages(diagnose_text(port).hypotheses)]


def test_an_import_name_matches_its_distribution_in_fix_at_3() -> None:
    fix = {"kind": "package", "name": "flashinfer", "value": "0.1.6"}
    assert same_fix(Change("package", "flashinfer-python", "x"), fix, "sglang")
    assert not same_fix(Change("package", "flash-attn", "x"), fix, "sglang")


def test_a_kernel_library_without_this_arch_proposes_a_build_of_that_library() -> None:
    log = (
        "CUDA Error: no kernel image is available for execution on the device (209) "
        "/tmp/build/flashinfer-0.1.4/include/flashinfer/attention/handler.cuh: line 169\n"
    )
    d = diagnose_text(log)
    assert d.culprit == "flashinfer"
    assert ("flashinfer-python", "a build with this GPU's arch") in _packages(d.hypotheses)


def test_with_the_version_known_the_release_after_it_is_offered_too() -> None:
    frames = (Frame(file=f"{SITE}/vllm/model_executor/layers/sampler.py", line=1, func="_sample"),)
    found = engine_release(frames, error_class="numerical", engine="vllm", engine_version="0.11.0")
    assert [(h.changes[0].name, h.changes[0].value) for h in found] == [
        ("vllm", "the release before 0.11.0"),
        ("vllm", "the release after 0.11.0"),
    ]
    assert (
        engine_release(frames, error_class="port_conflict", engine="vllm", engine_version="1") == []
    )


def test_a_call_that_no_longer_fits_a_packages_api_names_that_package() -> None:
    log = VLLM + (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/vllm/v1/structured_output/backend_guidance.py", line 161, in validate\n'
        "    err = llguidance.LLMatcher.validate_grammar(grm, tokenizer=None)\n"
        "TypeError: LLMatcher.validate_grammar() got some positional-only arguments passed as "
        "keyword arguments: 'tokenizer'\n"
    )
    d = diagnose_text(log)
    assert ("llguidance", "the version vllm 0.11.0 requires") in _packages(d.hypotheses)
    assert d.component == "environment"


def test_a_method_of_some_object_is_not_a_package() -> None:
    log = VLLM + (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/vllm/worker/model_runner.py", line 10, in run\n'
        "    out = model.forward(x, cache=c)\n"
        "TypeError: forward() got an unexpected keyword argument 'cache'\n"
    )
    assert all(name != "model" for name, _ in _packages(diagnose_text(log).hypotheses))


def test_a_flag_that_turns_warm_up_off_does_not_date_the_failure() -> None:
    log = (
        "No compatible code objects found for: gfx1152, value of HIP_FORCE_SPIRV_CODEOBJECT: 0\n"
        "zsh: segmentation fault  llama-server -m x.gguf --no-warmup\n"
    )
    d = diagnose_text(log)
    assert d.phase != "warmup"
    assert Change("env", "HSA_OVERRIDE_GFX_VERSION", "11.5.0") in [
        c for h in d.hypotheses for c in h.changes
    ]


def test_a_fault_located_in_a_kernel_library_offers_another_release_of_it() -> None:
    log = VLLM + _traceback(
        ("vllm/v1/worker/gpu_model_runner.py", "execute_model"),
        ("flashinfer/decode.py", "run"),
        error="RuntimeError: Error in function 'BatchDecodeWithPagedKVCacheRun' at decode.cuh:7",
    )
    d = diagnose_text(log)
    assert d.culprit == "flashinfer"
    packages = _packages(d.hypotheses)
    assert ("flashinfer-python", "another release") in packages
    # among the first three, above the engine's own release (the less specific suspect)
    assert ("flashinfer-python", "another release") in _packages(d.hypotheses[:3])
    assert ("vllm", "the release before 0.11.0") not in _packages(d.hypotheses[:3])


def test_no_library_release_for_a_binary_server_or_a_missing_arch() -> None:
    arch = (
        "CUDA Error: no kernel image is available for execution on the device (209) "
        "/tmp/build/flashinfer-0.1.4/include/flashinfer/attention/handler.cuh: line 169\n"
    )
    assert ("flashinfer-python", "another release") not in _packages(diagnose_text(arch).hypotheses)


def test_a_library_named_after_a_python_package_belongs_to_it() -> None:
    from servedoctor.knowledge.facts import package_of_library

    assert package_of_library("libnvinfer_plugin_tensorrt_llm.so.9") == "tensorrt-llm"
    assert package_of_library("libtorch_cuda.so") == "torch"
    assert package_of_library("libsomething_else.so") is None  # and no soname: no package


def test_one_package_described_in_words_is_offered_once() -> None:
    log = "ValueError: Model architectures ['Qwen2_5_VLForConditionalGeneration'] failed to be inspected.\n"
    d = diagnose_text(log)
    assert d.error_class == "model_unsupported"
    assert [n for n, _ in _packages(d.hypotheses)].count("transformers") == 1


def test_an_engine_that_pins_its_own_build_of_a_kernel_library_moves_that_build() -> None:
    from servedoctor.knowledge.facts import package_of_kernel_library

    log = "Assertion failed: deep_gemm/include/deep_gemm/impls/layout.cuh:40, condition: x == 0\n"
    assert ("deep-gemm", "another release") in _packages(diagnose_text(log).hypotheses)
    assert package_of_kernel_library("deepgemm", "sglang") == "sgl-deep-gemm"
    assert package_of_kernel_library("deepgemm", "vllm") == "deep-gemm"
    assert package_of_kernel_library("flashinfer", "sglang") == "flashinfer-python"
    assert package_of_kernel_library("flashmla", "vllm") == "vllm"  # compiled into its wheel
    assert package_of_kernel_library("cutlass", "sglang") is None


def test_a_compile_pass_failing_offers_the_release_before_the_stated_one() -> None:
    log = "RuntimeError: Tried to erase Node size_1 but it still had 2 users in the graph: {a: None}!\n"
    stated = _packages(diagnose_text(log, engine="vllm", engine_version="0.19.0").hypotheses)
    assert ("vllm", "the release before 0.19.0") in stated
    unknown = _packages(diagnose_text(log, engine="vllm").hypotheses)
    assert ("vllm", "another release") in unknown
