"""Whose log is an excerpt: the engines' own words, mined from their releases."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from servedoctor.diagnose.api import diagnose_text
from servedoctor.engines.inventory import inventory
from servedoctor.knowledge.signatures import DATA, engine_of_text, engines_in, release_bound
from servedoctor.model import Change

# vLLM 0.4-0.6's check, worded differently from today's: only an older release prints it
OLD_VLLM = (
    "ValueError: The model's max seq len (56000) is larger than the maximum number of tokens "
    "that can be stored in KV cache (43328). Try increasing `gpu_memory_utilization` or "
    "decreasing `max_model_len` when initializing the engine."
)


def test_the_file_holds_every_engines_releases_up_to_the_inventoried_latest() -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))["engines"]
    for engine in ("vllm", "sglang"):
        entry = data[engine]
        inv = inventory(engine)
        assert inv is not None
        assert inv.versions[-1] in entry["releases"]
        assert len(entry["releases"]) >= 8  # a history, not one release
        assert len(entry["signatures"]) > 1000
        for words, first, last in entry["signatures"]:
            assert len(words.split()) >= 6
            assert 0 <= first <= last < len(entry["releases"])


def test_an_older_releases_message_names_its_engine() -> None:
    assert engine_of_text([OLD_VLLM]) == "vllm"


def test_a_message_later_releases_dropped_bounds_the_release() -> None:
    bound = release_bound([OLD_VLLM], "vllm")
    assert bound is not None
    assert Version(bound) < Version("0.11.1")  # reworded since
    today = "ValueError: Free memory on device (70.1/79.2 GiB) on startup is less than desired GPU"
    assert release_bound([today + " memory utilization (0.9, 71.3 GiB)."], "vllm") is None
    # the diagnosis spells its changes for that release and says so
    d = diagnose_text(OLD_VLLM + "\n")
    assert d.extras.get("release_bound") == bound


def test_a_variable_only_the_older_part_of_the_bounded_releases_reads_is_still_offered() -> None:
    # printed by vLLM 0.9-0.16: V0 (VLLM_USE_V1=0) went in 0.11, yet the user may run 0.10;
    # a server ignores a variable it does not read, so it is offered (a flag would not be)
    line = "AssertionError: V1 CPU offloading requires uva (pin memory) support\n"
    d = diagnose_text(line)
    floor, bound = d.extras.get("release_floor"), d.extras.get("release_bound")
    assert floor is not None and bound is not None
    assert Version(floor) < Version("0.11") <= Version(bound)
    changes = [c for h in d.hypotheses for c in h.changes]
    assert Change("env", "VLLM_USE_V1", "0") in changes


def test_a_message_wrapped_when_pasted_still_names_its_engine() -> None:
    words = OLD_VLLM.split()
    lines = [" ".join(words[:9]), " ".join(words[9:18]), " ".join(words[18:])]
    assert engine_of_text(lines) == "vllm"


@pytest.mark.parametrize(
    "line",
    [
        # torch's own messages, printed under every engine
        "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
        "multiprocessing, you must use the 'spawn' start method",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.10 GiB of which 1.12 GiB is free.",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected",
    ],
)
def test_libraries_every_engine_runs_on_name_no_engine(line: str) -> None:
    assert engine_of_text([line]) is None


def test_an_engines_own_variable_names_it() -> None:
    line = "ValueError: cupy is not installed but required since VLLM_USE_RAY_COMPILED_DAG is set"
    assert engines_in([line])["vllm"] == 1
    assert engine_of_text([line]) == "vllm"


def test_words_of_two_engines_in_equal_measure_name_neither() -> None:
    both = "SGLANG_ENABLE_JIT_DEEPGEMM=0 VLLM_USE_DEEP_GEMM=0"
    assert engine_of_text([both]) is None


def test_a_diagnosis_of_a_bare_excerpt_is_spelled_for_the_engine_it_names() -> None:
    d = diagnose_text(OLD_VLLM + "\n")
    assert d.engine == "vllm"
    changes = [c for h in d.hypotheses for c in h.changes]
    assert any(c.name == "--max-model-len" for c in changes)
