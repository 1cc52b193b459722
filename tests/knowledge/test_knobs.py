"""Knobs, engine adapters and the proposals they make: every spelling exists where claimed,
every value is in range, and nothing is proposed that the user's engine would refuse."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servedoctor.diagnose import diagnose_text
from servedoctor.engines.adapter import (
    adapter,
    choose,
    known_adapters,
    other_spellings,
    spell,
    spellings,
    version_from_fields,
)
from servedoctor.engines.inventory import inventory, known_inventories
from servedoctor.knowledge.knobs import knob, vocabulary
from servedoctor.knowledge.mined import is_generated
from servedoctor.knowledge.propose import Setting, propose
from servedoctor.knowledge.registry import default_registry
from servedoctor.knowledge.schema import ChangeSpec
from servedoctor.model import REMOVE, Change

SAMPLE = {"none": None, "fraction": "0.8", "int": "64", "port": "30001", "text": "x"}


def _sample(knob_id: str) -> str | None:
    k = knob(knob_id)
    return (k.choices or ["auto"])[0] if k.value == "choice" else SAMPLE[k.value]


def test_every_adapter_knob_is_in_the_vocabulary_and_every_engine_has_one() -> None:
    assert {"sglang", "vllm", "transformers"} <= set(known_adapters())
    for engine in known_adapters():
        table = adapter(engine)
        assert table is not None
        assert all(vocabulary().get(k) for k in table.knobs)


@pytest.mark.parametrize("engine", sorted(known_inventories()))
def test_every_spelling_exists_in_some_release_of_its_engine(engine: str) -> None:
    inv = inventory(engine)
    table = adapter(engine)
    assert inv is not None and table is not None
    for knob_id, options in table.knobs.items():
        for option in options:
            if option.flag is None:
                continue
            assert any(inv.flag(option.flag, v) for v in inv.versions), (knob_id, option.flag)


@pytest.mark.parametrize("engine", sorted(known_inventories()))
def test_every_knob_spelled_for_each_release_exists_in_that_release(engine: str) -> None:
    inv = inventory(engine)
    table = adapter(engine)
    assert inv is not None and table is not None
    for version in [*inv.versions, None]:
        known = inv.resolve(version)
        for knob_id in table.knobs:
            change = spell(knob_id, _sample(knob_id), engine=engine, version=version)
            if change is None or change.kind != "flag" or change.value == REMOVE:
                continue
            flag = inv.flag(change.name, known)
            assert flag is not None, f"{engine} {version}: {knob_id} → {change.name}"
            if change.value is not None:  # a switch is never given a value
                assert flag.type_at(known) != "bool" or flag.nargs, f"{engine} {version}: {change}"
            choices = flag.choices_at(known)
            if choices and change.value is not None:
                assert change.value in choices, f"{engine} {version}: {change}"


def test_the_current_releases_get_their_current_spellings() -> None:
    # SGLang 0.5.23 deprecates --disable-cuda-graph and dropped --nsa-decode-backend
    assert spell("cuda_graphs_off", None, engine="sglang", version="0.5.23") == Change(
        "flag", "--cuda-graph-backend-decode", "disabled"
    )
    assert spell("cuda_graphs_off", None, engine="sglang", version="0.5.3") == Change(
        "flag", "--disable-cuda-graph", None
    )
    assert spell("sparse_attention_decode", "tilelang", engine="sglang", version="0.5.23") == (
        Change("flag", "--dsa-decode-backend", "tilelang")
    )
    assert spell("sparse_attention_decode", "tilelang", engine="sglang", version="0.4.6") is None
    # vLLM took --attention-backend in 0.15; older releases read an environment variable
    assert spell("attention_portable", None, engine="vllm", version="0.33.0") == Change(
        "flag", "--attention-backend", "TRITON_ATTN"
    )
    assert spell("attention_portable", None, engine="vllm", version="0.11.1") == Change(
        "env", "VLLM_ATTENTION_BACKEND", "TRITON_ATTN"
    )
    # whose backend enum named it TRITON_ATTN_VLLM_V1 until 0.11 (inventory/env_values)
    assert spell("attention_portable", None, engine="vllm", version="0.10.1") == Change(
        "env", "VLLM_ATTENTION_BACKEND", "TRITON_ATTN_VLLM_V1"
    )
    # an engine that cannot express a knob gets no proposal
    assert spell("cuda_graphs_off", None, engine="transformers", version=None) is None
    assert spell("free_port", "8080", engine="llamacpp", version=None) == Change(
        "flag", "--port", "8080"
    )


def test_no_version_prefers_a_spelling_every_release_accepts() -> None:
    choice = choose("cuda_graphs_off", "sglang", None)
    assert choice is not None and choice.flag == "--disable-cuda-graph"


def test_a_spelling_the_server_reports_in_effect_wins() -> None:
    shown = {"--nsa-decode-backend"}
    choice = choose("sparse_attention_decode", "sglang", "0.5.15", shown.__contains__)
    assert choice is not None and choice.flag == "--nsa-decode-backend"


def test_the_release_is_dated_by_the_fields_its_config_dump_names() -> None:
    assert version_from_fields("sglang", ["nsa_decode_backend", "mem_fraction_static"]) in {
        "0.5.5",
        "0.5.10",
        "0.5.15",
    }
    assert version_from_fields("sglang", ["dsa_decode_backend"]) in {"0.5.15", "0.5.20", "0.5.23"}
    assert version_from_fields("nosuchengine", ["x"]) is None


def test_other_spellings_of_a_refused_flag_are_the_same_knob() -> None:
    alts = other_spellings(Change("flag", "--cuda-graph-backend-decode", "disabled"), "sglang")
    assert Change("flag", "--disable-cuda-graph", None) in alts
    alts = other_spellings(Change("flag", "--attention-backend", "TRITON_ATTN"), "vllm")
    assert Change("env", "VLLM_ATTENTION_BACKEND", "TRITON_ATTN") in alts


@given(st.text(max_size=12))
def test_knob_values_are_in_range_or_refused(raw: str) -> None:
    for kind in ("fraction", "int", "port"):
        k = next(x for x in vocabulary().knobs if x.value == kind)
        value = k.check(raw)
        if value is None:
            continue
        number = float(value)
        if kind == "fraction":
            assert 0 < number <= 1
        else:
            assert number >= 1 and number == int(number)
            if kind == "port":
                assert number <= 65535


@given(st.integers(min_value=-(10**6), max_value=10**6))
def test_a_port_proposal_is_always_a_port(port: int) -> None:
    spec = ChangeSpec(knob="free_port", value="{p}", cause="c")
    setting = Setting(engine="vllm", version=None, value_of=lambda _: None)
    change = propose(spec, {"p": str(port)}, setting)
    if change is not None:
        assert change.value is not None and 1 <= int(change.value) <= 65535
    else:
        assert not 1 <= port <= 65535


def test_a_free_port_is_chosen_when_the_rule_gives_none() -> None:
    spec = ChangeSpec(knob="free_port", cause="c")
    setting = Setting(engine="sglang", version=None, value_of=lambda _: "30000")
    change = propose(spec, {}, setting)
    assert change is not None and change.name == "--port"
    assert change.value != "30000" and 1 <= int(change.value or 0) <= 65535


def test_a_step_on_the_setting_in_effect_stays_a_fraction() -> None:
    spec = ChangeSpec(knob="static_memory", value="{current-0.05}", default="0.8", cause="c")
    flags = {"--mem-fraction-static": "0.88"}
    change = propose(spec, {}, Setting("sglang", None, flags.get))
    assert change == Change("flag", "--mem-fraction-static", "0.83")
    low = {"--mem-fraction-static": "0.03"}
    assert propose(spec, {}, Setting("sglang", None, low.get)) is None  # would leave (0, 1]
    assert propose(spec, {}, Setting("sglang", None, {}.get)) == Change(
        "flag", "--mem-fraction-static", "0.8"
    )


def _flag_changes(text: str, engine: str) -> list[Change]:
    return _diagnosed_flags(text, engine)[1]


def _diagnosed_flags(text: str, engine: str) -> tuple[str | None, list[Change]]:
    d = diagnose_text(text, engine=engine)
    version = d.extras.get("engine_version")
    return version, [c for h in d.hypotheses for c in h.changes if c.kind == "flag"]


@pytest.mark.parametrize("engine", ["sglang", "vllm", "transformers"])
def test_every_flag_a_rule_example_proposes_exists_for_the_engine(engine: str) -> None:
    inv = inventory(engine)
    assert inv is not None
    for rule in default_registry().area("diagnose"):
        for snippet in rule.examples.fires:
            version, changes = _diagnosed_flags(snippet, engine)
            for change in changes:
                if change.value == REMOVE:
                    continue
                known = inv.resolve(version)
                assert inv.flag(change.name, known), f"{rule.id}: {change} for {engine} {known}"


def test_rules_name_knobs_not_engine_flags_where_a_knob_exists() -> None:
    spelled = {
        (s.flag or "")
        for engine in known_adapters()
        for k in vocabulary().knobs
        for s in spellings(k.id, engine)
    }
    for rule in default_registry():
        if is_generated(rule):
            continue  # mined from one engine's message: it writes out that engine's own setting
        for spec in rule.changes:
            if spec.kind == "flag":
                assert spec.name not in spelled, f"{rule.id} names {spec.name}: use its knob"


def test_a_log_from_an_unknown_server_gets_no_flag_and_says_why() -> None:
    d = diagnose_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert all(c.kind != "flag" for h in d.hypotheses for c in h.changes)
    d = diagnose_text("RuntimeError: Something unexpected happened in the scheduler loop\n")
    if not any(h.changes for h in d.hypotheses):
        assert "pass --engine" in d.summary


def test_the_same_failure_is_spelled_for_each_engine() -> None:
    log = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    sglang = {c.name for c in _flag_changes(log, "sglang")}
    vllm = {c.name for c in _flag_changes(log, "vllm")}
    assert "--mem-fraction-static" in sglang and "--gpu-memory-utilization" not in sglang
    assert "--gpu-memory-utilization" in vllm and "--mem-fraction-static" not in vllm


def test_a_change_not_for_native_engines_is_offered_only_to_the_others() -> None:
    spec = ChangeSpec(knob="cuda_graphs_off", cause="x", native=False)
    assert propose(spec, {}, Setting("llamacpp", None, {}.get)) is None
    assert propose(spec, {}, Setting("ollama", None, {}.get)) is None
    assert propose(spec, {}, Setting("vllm", None, {}.get)) == Change("flag", "--enforce-eager")
    # the same knob without the restriction reaches llama.cpp's own spelling
    anywhere = ChangeSpec(knob="cuda_graphs_off", cause="x")
    assert propose(anywhere, {}, Setting("llamacpp", None, {}.get)) == Change(
        "env", "GGML_CUDA_DISABLE_GRAPHS", "1"
    )
