"""The versioned flag inventories (read from the released wheels) and their loader."""

from __future__ import annotations

from datetime import date

import pytest

from servedoctor.engines.inventory import Inventory, inventory, known_inventories


def _inv(engine: str) -> Inventory:
    inv = inventory(engine)
    assert inv is not None, engine
    return inv


def test_known_inventories() -> None:
    assert set(known_inventories()) >= {"sglang", "vllm", "transformers", "llamacpp"}
    assert inventory("no-such-engine") is None


def test_resolve_versions() -> None:
    inv = _inv("sglang")
    assert inv.versions == ["0.4.6", "0.5.1", "0.5.5", "0.5.10", "0.5.15", "0.5.20", "0.5.23"]
    assert inv.latest == "0.5.23"
    assert inv.resolve(None) == "0.5.23"
    assert inv.resolve("not a version") == "0.5.23"
    assert inv.resolve("0.3.0") == "0.4.6"  # older than all → oldest
    assert inv.resolve("9.0") == "0.5.23"  # newer than all → latest
    assert inv.resolve("0.5.12") == "0.5.10"  # between → newest known <= it
    assert inv.resolve("0.1.dev1+g6804e1b81") == "0.5.23"  # an untagged build: unknown
    assert inv.resolve("0.5.10") == "0.5.10"
    assert inv.resolve("0.5.15.post1") == "0.5.15"
    assert inv.resolve("v0.5.20") == "0.5.20"
    assert inv.resolve("0.5.15rc2") == "0.5.10"  # a release candidate precedes its release
    vllm = _inv("vllm")
    assert vllm.resolve("0.11.1rc2") == "0.11.0"
    assert vllm.resolve("0.8.5.post1") == "0.8.5"


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_span_of_versions(engine: str) -> None:
    inv = _inv(engine)
    assert len(inv.versions) >= 4
    dates = [inv.released(v) for v in inv.versions]
    assert all(dates), dates
    first, last = date.fromisoformat(str(dates[0])), date.fromisoformat(str(dates[-1]))
    assert (last - first).days >= 300
    assert dates == sorted(str(d) for d in dates)  # ascending versions, ascending dates


def test_every_flag_lists_known_versions() -> None:
    for engine in known_inventories():
        inv = _inv(engine)
        known = set(inv.versions)
        for f in inv.flags:
            assert f.versions and set(f.versions) <= known, f.name
            assert set(f.deprecated_in) <= set(f.versions), f.name
            assert f.name.startswith("-"), f.name


def test_sglang_facts() -> None:
    inv = _inv("sglang")
    for ver in inv.versions:
        assert inv.has("--mem-fraction-static", ver)
        assert inv.has("--attention-backend", ver)
        assert inv.has("--chunked-prefill-size", ver)
        assert inv.has("--tp-size", ver) and inv.has("--tensor-parallel-size", ver)
    # --disable-cuda-graph still parses in 0.5.23, deprecated in favour of the backend flags.
    f = inv.flag("--disable-cuda-graph", "0.5.23")
    assert f is not None and f.deprecated("0.5.23") and not f.deprecated("0.5.10")
    assert f.replacement is not None and "--cuda-graph-backend-" in f.replacement
    assert inv.has("--cuda-graph-backend-decode", "0.5.23")
    assert not inv.has("--cuda-graph-backend-decode", "0.5.10")
    # --cuda-graph-max-bs: deprecated in 0.5.15, gone by 0.5.20 (split into -decode/-prefill).
    assert inv.has("--cuda-graph-max-bs", "0.5.10")
    assert not inv.has("--cuda-graph-max-bs", "0.5.23")
    max_bs = inv.flag("--cuda-graph-max-bs", "0.5.15")
    assert max_bs is not None and max_bs.deprecated("0.5.15")
    assert max_bs.replacement == "--cuda-graph-max-bs-decode"
    assert inv.has("--cuda-graph-max-bs-decode", "0.5.23")
    # NSA backends were renamed DSA.
    assert inv.has("--nsa-decode-backend", "0.5.10")
    assert not inv.has("--nsa-decode-backend", "0.5.23")
    assert not inv.has("--nsa-decode-backend", "0.4.6")
    assert inv.has("--dsa-decode-backend", "0.5.23")
    # Spelling variants and version-less lookups (latest).
    assert inv.has("--mem_fraction_static")
    assert inv.has("--mem-fraction-static=0.8")
    assert not inv.has("--no-such-flag")
    assert not inv.has("--no-enable-torch-compile")  # store_true flags are not negatable


def test_sglang_choices_by_version() -> None:
    inv = _inv("sglang")
    f = inv.flag("--attention-backend")
    assert f is not None
    latest = f.choices_at(inv.latest)
    old = f.choices_at("0.4.6")
    assert latest is not None and old is not None
    assert "flashinfer" in latest and "flashinfer" in old and "fa3" in latest
    assert old != latest


def test_vllm_facts() -> None:
    inv = _inv("vllm")
    for ver in inv.versions:
        for name in (
            "--gpu-memory-utilization",
            "--enforce-eager",
            "--max-num-seqs",
            "--max-num-batched-tokens",
            "--max-model-len",
            "--kv-cache-dtype",
            "--disable-custom-all-reduce",
            "--tensor-parallel-size",
            "--port",
            "--api-key",
        ):
            assert inv.has(name, ver), (name, ver)
    eager = inv.flag("--enforce-eager")
    assert eager is not None and eager.type == "bool" and eager.negatable
    assert inv.has("--no-enforce-eager")  # BooleanOptionalAction
    assert not inv.has("--no-max-num-seqs")
    tp = inv.flag("-tp")
    assert tp is not None and tp.name == "--tensor-parallel-size"
    util = inv.flag("--gpu-memory-utilization")
    assert util is not None and util.type == "float"
    # --attention-backend became a CLI flag after 0.11 (an environment variable before).
    assert not inv.has("--attention-backend", "0.11.0")
    assert inv.has("--attention-backend", "0.15.0")
    # Removed flags.
    assert inv.has("--swap-space", "0.15.0") and not inv.has("--swap-space", "0.20.0")
    assert inv.has("--max-seq-len-to-capture", "0.10.0")
    assert not inv.has("--max-seq-len-to-capture", "0.11.0")
    logs = inv.flag("--disable-log-requests", "0.15.0")
    assert logs is not None and logs.deprecated("0.15.0") and not logs.deprecated("0.8.5")
    assert not inv.has("--disable-log-requests", inv.latest)
    kv = inv.flag("--kv-cache-dtype")
    assert kv is not None
    old_kv = kv.choices_at("0.8.5")
    assert old_kv is not None and "fp8" in old_kv and "fp8_inc" not in old_kv


def test_transformers_serve() -> None:
    inv = _inv("transformers")
    assert "5.24.0" in inv.versions and len(inv.versions) >= 2
    for name in ("--host", "--port", "--device", "--dtype", "--trust-remote-code"):
        assert inv.has(name, "5.24.0"), name
    assert inv.has("--no-trust-remote-code", "5.24.0")  # typer bool options are --x/--no-x
    port = inv.flag("--port")
    assert port is not None and port.type == "int" and port.default == "8000"
    assert inv.has("--cb-block-size", "5.24.0") and not inv.has("--cb-block-size", "5.0.0")


def test_llamacpp_server_options_across_builds() -> None:
    """llama-server's options read from the llama.cpp trees the llama-cpp-python sdists carry."""
    inv = _inv("llamacpp")
    assert inv.unknown_version == "any" and len(inv.versions) >= 5
    assert all(
        v.read_from and v.read_from.startswith("llama-cpp-python ") for v in inv.versions_read
    )
    for ver in inv.versions:
        for name in ("--ctx-size", "-c", "--port", "-ngl", "--parallel", "--ubatch-size"):
            assert inv.has(name, ver), (name, ver)
    # -fa was a switch before it took on|off|auto
    fa = inv.flag("-fa")
    assert fa is not None and fa.name == "--flash-attn"
    first, latest = inv.versions[0], inv.latest
    assert fa.type_at(first) == "bool" and fa.choices_at(latest) == ["on", "off", "auto"]
    # the draft flags were removed, the parser naming their replacement
    assert inv.has("--draft-max", "2025.8.15") and not inv.has("--draft-max", latest)
    assert inv.replacement("--draft-max") == "--spec-draft-n-max"
    assert inv.replacement("--draft-max", "2025.8.15") is None  # that build still has it
    # --no-mmap went with --load-mode: unknown for the latest build, known for an unstated one
    assert not inv.has("--no-mmap", latest) and inv.has("--no-mmap", "2025.8.15")
    assert inv.accepts_spelling("--no-mmap", None) is not None
    assert inv.accepts_spelling("--no-mmap", latest) is None
    assert inv.accepts_spelling("--no-mmap", "b6123") is not None  # a build number says nothing
    assert inv.accepts_spelling("--no-such-option", None) is None


def test_a_refused_spelling_of_a_flag_the_release_has_is_respelled() -> None:
    sglang = _inv("sglang")
    # SGLang's parser does not fold underscores into dashes as vLLM's does
    assert sglang.replacement("--reasoning_parser", "0.5.5") == "--reasoning-parser"
    assert sglang.replacement("--reasoning-parser", "0.5.5") is None
    assert sglang.replacement("--no-such-flag") is None
    # the same words in another order: the one flag that has them
    assert _inv("llamacpp").replacement("--draft-model") == "--model-draft"
    assert _inv("vllm").replacement("--model-max-len") == "--max-model-len"
    assert _inv("vllm").replacement("--port") is None
    # one dash more or less than the option has
    assert _inv("llamacpp").replacement("--ngl") == "-ngl"
    assert _inv("vllm").replacement("-port") == "--port"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_own_variable_a_knob_spells_is_read_by_the_releases_it_claims(engine: str) -> None:
    """The engine's own variables (VLLM_…, SGLANG_…) in its knob spellings exist in every
    inventoried release the spelling's range covers, as flags do in the flag inventories."""
    from servedoctor.engines.adapter import adapter
    from servedoctor.engines.inventory import env_names

    names = env_names(engine)
    assert names is not None
    releases = sorted({v for vs in names.values() for v in vs})
    own = adapter(engine)
    assert own is not None
    checked = 0
    for knob_id, spelled in own.knobs.items():
        for s in spelled:
            if s.env is None or not s.env.startswith(("VLLM_", "SGLANG_", "SGL_")):
                continue
            for release in releases:
                if s.holds_for(release):
                    assert release in names.get(s.env, []), (knob_id, s.env, release)
                    checked += 1
    assert checked  # the check reached some spelling


def test_a_variable_a_release_dropped_is_not_in_its_inventory() -> None:
    from servedoctor.engines.inventory import env_names

    vllm = env_names("vllm")
    assert vllm is not None
    assert vllm["VLLM_ATTENTION_BACKEND"] == ["0.11.1"]  # --attention-backend since
    assert "0.33.0" in vllm["VLLM_ROCM_USE_AITER_MOE"]


def test_the_first_release_that_accepts_a_refused_flag_or_choice() -> None:
    inv = inventory("vllm")
    assert inv is not None
    # --attention-backend came with 0.15: a 0.10 parser refuses it, 0.15 accepts it
    assert inv.first_accepting("--attention-backend", None, "0.10.0") == "0.15.0"
    # installed unknown: the first release read that has it (the latest has it too)
    assert inv.first_accepting("--attention-backend") == "0.15.0"
    # the installed release has it: the refusal is not about the release
    assert inv.first_accepting("--attention-backend", None, "0.20.0") is None
    assert inv.first_accepting("--no-such-flag-anywhere") is None
    sglang = inventory("sglang")
    assert sglang is not None
    # a flag the latest release dropped is not fixed by moving on
    assert sglang.first_accepting("--cuda-graph-max-bs") is None


def test_every_value_a_knob_gives_a_registry_variable_exists_in_the_releases_it_claims() -> None:
    """VLLM_ATTENTION_BACKEND takes a member of the release's backend enum; the members were
    renamed (TRITON_ATTN_VLLM_V1 until 0.10, TRITON_ATTN from 0.11): each spelling's value
    exists in every release read that its range covers."""
    from servedoctor.engines.adapter import adapter
    from servedoctor.engines.inventory import env_values

    values = env_values("vllm")
    assert values is not None
    releases = sorted({v for by in values.values() for vs in by.values() for v in vs})
    own = adapter("vllm")
    assert own is not None
    checked = 0
    for knob_id, spelled in own.knobs.items():
        for s in spelled:
            if s.env not in values:
                continue
            emitted = [s.value] if s.value else list((s.values or {}).values())
            for release in releases:
                if s.holds_for(release) and release in names_read_by(s.env, values):
                    for value in emitted:
                        assert release in values[s.env].get(value, []), (knob_id, value, release)
                        checked += 1
    assert checked
    assert values["VLLM_ATTENTION_BACKEND"]["TRITON_ATTN_VLLM_V1"] == ["0.8.5", "0.10.0", "0.10.2"]


def names_read_by(variable: str, values: dict[str, dict[str, list[str]]]) -> set[str]:
    """The releases whose registry for ``variable`` was read."""
    return {v for vs in values[variable].values() for v in vs}


def test_a_build_named_by_its_date_resolves_to_the_release_published_by_then() -> None:
    inv = inventory("sglang")
    assert inv is not None
    dated = [(v.released or "", v.version) for v in inv.versions_read if v.released]
    month = dated[-2][0][:7]  # the month the second newest release came out
    wanted = [version for released, version in dated if released[:7] <= month][-1]
    assert inv.resolve(f"sglang main 62c505a196 ({month})") == wanted
    assert inv.resolve("nightly 2001-01-01") == inv.versions[0]  # older than every release
    assert inv.resolve("a build from nobody knows when") == inv.versions[-1]
    # NVIDIA's containers: year and month in the tag
    month = dated[-2][0][2:7].replace("-", ".")  # "26.07"
    assert inv.resolve(f"nvcr.io/nvidia/sglang:{month}-py3") == wanted
