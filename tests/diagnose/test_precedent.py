"""Precedents: labelled public failures that read like a log, and the fixes they confirm."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from servedoctor.diagnose import precedent
from servedoctor.diagnose.api import diagnose_text
from servedoctor.diagnose.precedent import (
    Case,
    Precedents,
    Reading,
    leaving_out,
    precedents_for,
    translate,
)
from servedoctor.knowledge.propose import Setting
from servedoctor.logs.events import extract
from servedoctor.logs.scan import Scanner
from servedoctor.model import REMOVE, Change


def _reading(text: str) -> Reading:
    reading = Reading()
    extract(reading.watch(Scanner(io.BytesIO(text.encode()))))
    return reading


def _case(
    n: int, words: str, *, corpus: str = "c", source: str | None = None, **labels: str
) -> Case:
    return Case(
        corpus=corpus,
        id=f"case-{n}",
        source=source or f"https://example.org/{n}",
        engine=labels.pop("engine", "vllm"),
        labels=labels,
        fix=None,
        digest=f"d{n}",
        words=frozenset(words.split()),
    )


def test_the_vote_follows_the_words_of_each_label() -> None:
    found = Precedents(
        [
            _case(1, "nccl timeout watchdog collective", error_class="nccl_error"),
            _case(2, "nccl watchdog allreduce timeout", error_class="nccl_error"),
            _case(3, "out memory allocate tried", error_class="cuda_oom"),
            _case(4, "memory allocate oom", error_class="cuda_oom"),
        ]
    )
    assert found.guess("error_class", {"watchdog", "collective", "hello"}) == "nccl_error"
    assert found.guess("error_class", {"allocate", "tried"}) == "cuda_oom"
    assert found.guess("error_class", {"unseen", "words"}) is None  # no known word, no vote


def test_a_default_is_replaced_only_by_a_clear_majority() -> None:
    cases = [_case(n, "alpha beta", phase="load") for n in range(3)]
    cases += [_case(9, "gamma", phase="startup")]
    found = Precedents(cases)
    assert found.outvotes("phase", {"alpha", "beta"}, "startup") is None  # two words: too close
    many = " ".join(f"w{i}" for i in range(40))
    found = Precedents([*(_case(n, many, phase="load") for n in range(3)), cases[-1]])
    assert found.outvotes("phase", set(many.split()), "startup") == "load"


def test_a_log_is_never_its_own_precedent_nor_its_threads_siblings() -> None:
    text = "ERROR something odd happened in the frobnicator\n"
    own = _reading(text).fingerprint
    same_thread = "https://example.org/thread"
    cases = [
        Case("c", "a-1", same_thread, "vllm", {"error_class": "other"}, None, own, frozenset()),
        Case("c", "a-2", same_thread, "vllm", {"error_class": "other"}, None, "x", frozenset()),
        Case("c", "b-1", "https://example.org/b", "vllm", {}, None, "y", frozenset()),
    ]
    kept = Precedents(cases).without(own)
    assert [c.id for c in kept.cases] == ["b-1"]


def test_scoring_a_corpus_leaves_its_cases_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "precedents.json"
    record = {"corpus": "setA", "id": "x-1", "labels": {"error_class": "other"}, "words": ["w"]}
    data.write_text(json.dumps({"schema": 1, "cases": [record]}))
    monkeypatch.setattr(precedent, "DATA", data)
    precedent._precedents.cache_clear()
    try:
        reading = _reading("Error: w failed\n")
        found = precedents_for(reading)
        assert found is not None and [c.id for c in found.cases] == ["x-1"]
        with leaving_out("setA"):
            assert precedents_for(reading) is None
        monkeypatch.setenv(precedent.EXCLUDE_ENV, "setA")
        assert precedents_for(reading) is None
    finally:
        precedent._precedents.cache_clear()


def test_an_error_line_is_read_but_a_warning_is_not() -> None:
    reading = _reading(
        "WARNING 01-02 10:00:00 [utils.py:12] failed to import triton\n"
        "E0724 03:14:20.707079 104002 rdma_context.cpp:261] Context is not active\n"
        "Error: the frobnicator could not start\n"
    )
    assert reading.error_line is not None
    assert reading.error_line[0] == 3
    quiet = _reading("WARNING 01-02 10:00:00 [utils.py:12] failed to import triton\n")
    assert quiet.error_line is None
    assert {"frobnicator", "triton", "rdma_context"} <= reading.words


@pytest.mark.parametrize(
    "line",
    [
        "FileNotFoundError: [Errno 2] No such file or directory: 'MmaDecl.h'",
        "GGML_ASSERT(talloc->buffer_id >= 0)",
        "Backend.forward_decode() got an unexpected keyword argument 'sinks'",
        "model requires more system memory (4.0 GiB) than is available (3.9 GiB)",
        "--decode-backend fast on SM100+ requires --state-dtype bfloat16, got None",
    ],
)
def test_a_pasted_error_without_the_word_error_is_still_read(line: str) -> None:
    assert _reading(line + "\n").error_line == (1, line)


def test_a_pasted_check_names_the_setting_it_wants() -> None:
    d = diagnose_text("--decode-backend fast on SM100+ requires --state-dtype bfloat16, got None\n")
    assert d.error_class is not None
    assert Change("flag", "--state-dtype", "bfloat16") in [
        c for h in d.hypotheses for c in h.changes
    ]


def test_a_confirmed_fix_is_spelled_for_the_engine_that_failed() -> None:
    eager = {"kind": "flag", "name": "--enforce-eager", "value": None}
    assert translate(eager, "vllm", "sglang", "0.5.23") == Change(
        kind="flag", name="--cuda-graph-backend-decode", value="disabled"
    )
    backend = {"kind": "flag", "name": "--attention-backend", "value": "triton"}
    assert translate(backend, "sglang", "vllm", "0.33.0") == Change(
        kind="flag", name="--attention-backend", value="TRITON_ATTN"
    )
    # a flag of one engine that no knob maps is not offered to another
    assert (
        translate({"kind": "flag", "name": "--nsa-prefill", "value": "x"}, "sglang", "vllm", None)
        is None
    )


def test_what_a_server_cannot_read_is_not_offered() -> None:
    p2p = {"kind": "env", "name": "NCCL_P2P_DISABLE", "value": "1"}
    assert translate(p2p, "vllm", "sglang", None) == Change(
        kind="env", name="NCCL_P2P_DISABLE", value="1"
    )
    assert translate(p2p, "vllm", "llamacpp", None) is None  # one compiled binary: no NCCL
    pin = {"kind": "package", "name": "transformers", "value": "4.51.3"}
    assert translate(pin, "vllm", "ollama", None, {"transformers"}) is None
    assert (
        translate({"kind": "env", "name": "VLLM_USE_V1", "value": "0"}, "vllm", "sglang", None)
        is None
    )
    # another thread's patch variable: offered only where this log names it
    patch = {"kind": "env", "name": "GENESIS_GDN_MAX_BATCHED_TOKENS", "value": "4128"}
    assert translate(patch, "vllm", "vllm", None, {"nccl", "error"}) is None
    assert translate(patch, "vllm", "vllm", None, {"genesis", "error"}) is not None
    preload = {"kind": "env", "name": "LD_PRELOAD", "value": "/x/nvidia/nccl/lib/libnccl.so.2"}
    assert translate(preload, "vllm", "vllm", None, {"importerror", "sdfake"}) is None
    # an unknown release may be an old one: the flag must be in every release read
    newer = {"kind": "flag", "name": "--no-async-scheduling", "value": None}
    assert translate(newer, "vllm", "vllm", None) is None
    assert translate(newer, "vllm", "vllm", "0.33.0") is not None


def test_nothing_in_effect_and_nothing_absent_is_proposed() -> None:
    command = {"--max-model-len": "4096"}
    setting = Setting("vllm", "0.33.0", command.get, flags_known=True)
    assert precedent._moot(Change(kind="flag", name="--max-model-len", value="4096"), setting)
    assert not precedent._moot(Change(kind="flag", name="--max-model-len", value="2048"), setting)
    assert precedent._moot(Change(kind="flag", name="--enforce-eager", value=REMOVE), setting)


def test_a_failure_no_rule_knows_gets_a_class_and_a_change() -> None:
    d = diagnose_text(
        "[server] starting\n"
        "[server] frobnicator: engine core exited unexpectedly, the xyzzy plugin could not start\n"
    )
    assert d.error_class is not None
    assert d.phase is not None
    assert any(h.changes for h in d.hypotheses) or "No change to try" in d.summary


def test_a_healthy_log_still_reads_as_no_failure() -> None:
    d = diagnose_text(
        "INFO 01-02 10:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
        "INFO 01-02 10:00:05 [launcher.py:2] Route: /v1/models\n"
        "INFO:     Application startup complete.\n"
    )
    assert d.error_class is None
    assert d.summary == "No failure found in the log."


def test_a_library_pin_is_offered_only_when_the_log_names_the_library() -> None:
    pin = {"kind": "package", "name": "outlines", "value": "0.0.30"}
    named = {"outlines", "json_schema"}
    assert translate(pin, "sglang", "sglang", None, named) == Change(
        kind="package", name="outlines", value="0.0.30"
    )
    assert translate(pin, "sglang", "sglang", None, {"torch"}) is None
    hub = {"kind": "package", "name": "huggingface-hub", "value": ">=0.32"}
    assert translate(hub, "vllm", "sglang", None, {"huggingface_hub"}) == Change(
        kind="package", name="huggingface-hub", value="another release"
    )
    # words, not a version, or a server's own release: the rules' to offer
    vague = {"kind": "package", "name": "pydantic", "value": ">=2 (with fastapi upgraded)"}
    assert translate(vague, "vllm", "vllm", None, {"pydantic"}) is None
    server = {"kind": "package", "name": "ollama", "value": "0.3.13"}
    assert translate(server, "ollama", "vllm", None, {"ollama"}) is None


def test_an_unknown_servers_log_gets_a_precedents_variable_only_for_what_it_names() -> None:
    fix = {"kind": "env", "name": "VLLM_USE_DEEP_GEMM", "value": "0"}
    named = translate(fix, "vllm", None, None, {"runtimeerror", "deepgemm", "available"})
    assert named == Change("env", "VLLM_USE_DEEP_GEMM", "0")
    assert translate(fix, "vllm", None, None, {"importerror", "sdfake", "required"}) is None
    # a server that is known and is not vLLM never gets vLLM's variable this way
    assert translate(fix, "vllm", "llamacpp", None, {"deepgemm"}) is None


def test_a_precedents_variable_needs_every_word_of_its_subject_in_the_log() -> None:
    fix = {"kind": "env", "name": "VLLM_USE_V2_MODEL_RUNNER", "value": "0"}
    assert translate(fix, "vllm", None, None, {"model", "runner", "panicked"}) is None
