"""The messages mined from real SGLang and vLLM wheels (scripts/inventory/mine_messages.py)."""

from __future__ import annotations

import hashlib
import re
import string
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from servedoctor.diagnose.api import diagnose_text
from servedoctor.knowledge.signatures import engine_of_text

MINED = Path(__file__).resolve().parents[2] / "src" / "servedoctor" / "knowledge" / "mined"
ENGINES = ("sglang", "vllm")
DIRECTIONS = {"increase", "decrease", "set", "enable", "disable", "unset"}


@cache
def load(engine: str) -> dict[str, Any]:
    with (MINED / f"{engine}.yaml").open(encoding="utf-8") as fh:
        data: dict[str, Any] = yaml.safe_load(fh)
    return data


def messages(engine: str) -> list[dict[str, Any]]:
    return list(load(engine)["messages"])


def by_key(engine: str, key: str) -> dict[str, Any]:
    found = [m for m in messages(engine) if m["key"] == key]
    assert len(found) == 1, key
    return found[0]


def is_numeric_group(pattern: str, group: str) -> bool:
    return f"(?P<{group}>[-+]?\\d" in pattern


def sample_values(msg: dict[str, Any]) -> dict[str, str]:
    """Plausible values: numbers for numeric groups, distinct words otherwise."""
    groups = re.compile(msg["pattern"]).groupindex
    values: dict[str, str] = {}
    for i, group in enumerate(sorted(groups, key=groups.__getitem__)):
        if is_numeric_group(msg["pattern"], group):
            values[group] = str(4096 + 17 * i)
        else:
            values[group] = "zq" + "".join(chr(ord("a") + int(d)) for d in str(i)) + "word"
    return values


@pytest.mark.parametrize("engine", ENGINES)
def test_file_shape(engine: str) -> None:
    data = load(engine)
    assert data["engine"] == engine
    assert data["generated_by"] == "scripts/inventory/mine_messages.py"
    assert len(data["versions"]) == 2
    msgs = messages(engine)
    assert len(msgs) > 100
    keys = [m["key"] for m in msgs]
    assert keys == sorted(keys), "messages are sorted by key"
    assert len(set(keys)) == len(keys)
    for m in msgs:
        digest = hashlib.sha1(m["template"].encode()).hexdigest()[:8]
        assert m["key"] == f"{engine}:{digest}"
        assert m["versions"] and set(m["versions"]) <= set(data["versions"])
        assert m["fields"] or m["flags"], m["key"]
        assert m["source"].startswith(f"{engine}/") and m["source"].endswith(".py")
    # each released version contributed messages, and some survive across the year
    for version in data["versions"]:
        assert sum(version in m["versions"] for m in msgs) > 50
    assert sum(len(m["versions"]) == 2 for m in msgs) > 20


@pytest.mark.parametrize("engine", ENGINES)
def test_every_pattern_compiles_and_matches_its_own_template(engine: str) -> None:
    failures: list[str] = []
    for m in messages(engine):
        compiled = re.compile(m["pattern"])
        values = sample_values(m)
        fields = {f for _lit, f, _spec, _conv in string.Formatter().parse(m["template"]) if f}
        assert set(values) == fields, m["key"]
        text = m["template"].format(**values)
        match = compiled.search(text)
        if match is None:
            failures.append(f"{m['key']}: no match for {text!r}")
            continue
        for group, value in values.items():
            if match.group(group) != value:
                failures.append(f"{m['key']}: {group}={match.group(group)!r}, want {value!r}")
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("engine", ENGINES)
def test_advice_names_the_message_flags_and_real_groups(engine: str) -> None:
    with_advice = 0
    for m in messages(engine):
        groups = set(re.compile(m["pattern"]).groupindex)
        assert set(m["value_groups"]) <= groups, m["key"]
        assert set(m["value_groups"].values()) <= set(m["flags"]), m["key"]
        for advice in m["advice"]:
            with_advice += 1
            assert advice["flag"] in m["flags"], (m["key"], advice)
            assert advice["field"] in m["fields"], (m["key"], advice)
            assert advice["direction"] in DIRECTIONS, (m["key"], advice)
            if "value_from" in advice:
                assert advice["value_from"] in groups, (m["key"], advice)
                assert is_numeric_group(m["pattern"], advice["value_from"]), (m["key"], advice)
    assert with_advice > 20


def test_known_advice_is_extracted() -> None:
    oom = by_key("vllm", "vllm:bc6c9c67")  # "To serve at least one request ... max seq len"
    assert {(a["flag"], a["direction"]) for a in oom["advice"]} == {
        ("--gpu-memory-utilization", "increase"),
        ("--max-model-len", "decrease"),
    }
    assert oom["value_groups"] == {"max_model_len": "--max-model-len"}
    batched = by_key("vllm", "vllm:4e466315")  # max_num_batched_tokens < max_model_len
    assert {(a["flag"], a["direction"], a.get("value_from")) for a in batched["advice"]} == {
        ("--max-num-batched-tokens", "increase", "max_model_len"),
        ("--max-model-len", "decrease", "max_num_batched_tokens"),
    }
    pool = by_key(
        "sglang", "sglang:0877dafb"
    )  # KV pool holds N tokens, fewer than --context-length
    assert {"field": "context_length", "flag": "--context-length", "direction": "decrease",
            "value_from": "kv_capacity"} in pool["advice"]  # fmt: skip
    # a message that only narrates what the engine does carries no advice
    narrated = [m for m in messages("sglang") if m["template"].startswith("Setting max_running")]
    assert narrated and all(not m["advice"] for m in narrated)


# Real log lines from public GitHub issues, and the mined message each must be matched by.
REAL_LINES: list[tuple[str, str, str, dict[str, str]]] = [
    # https://github.com/vllm-project/tpu-inference/pull/223
    (
        "vllm",
        "vllm:bc6c9c67",
        "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (0.71 GiB). Based on the available memory, the estimated maximum model length is 5632. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        {"max_model_len": "131072", "needed_memory": "16.00", "available_memory": "0.71"},
    ),
    # https://github.com/vllm-project/vllm/issues/10439
    (
        "vllm",
        "vllm:4c7099bc",
        "vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        {},
    ),
    # https://github.com/vllm-project/vllm/issues/4770
    (
        "vllm",
        "vllm:8f61814e",
        "(eager_allreduce pid=3040) WARNING 05-13 08:48:35 custom_all_reduce.py:166] Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed. To silence this warning, specify disable_custom_all_reduce=True explicitly.",
        {},
    ),
    # https://github.com/sgl-project/sglang/issues/7691
    (
        "sglang",
        "sglang:ce9cfe3e",
        "[2025-07-02 07:41:59 DP0 TP0] max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.",
        {"max_total_tokens": "131072", "max_total_num_tokens": "-561981"},
    ),
]


@pytest.mark.parametrize(("engine", "key", "line", "groups"), REAL_LINES)
def test_real_log_lines_are_matched_by_the_right_message(
    engine: str, key: str, line: str, groups: dict[str, str]
) -> None:
    msg = by_key(engine, key)
    match = re.search(msg["pattern"], line)
    assert match is not None, f"{key} does not match {line!r}"
    for group, value in groups.items():
        assert match.group(group) == value
    others = [m["key"] for m in messages(engine) if re.search(m["pattern"], line)]
    assert key in others


def test_an_older_wording_is_not_matched_by_the_new_message() -> None:
    # https://github.com/vllm-project/vllm/issues/10517 (vLLM 0.6-era wording, not mined here)
    line = "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    assert re.search(by_key("vllm", "vllm:bc6c9c67")["pattern"], line) is None


def test_a_setting_written_out_as_advice_is_taken_with_its_value() -> None:
    bf16 = [m for m in messages("vllm") if m["template"].startswith("Bfloat16 is only supported")]
    assert bf16 and {"field": "dtype", "flag": "--dtype", "direction": "set",
                     "value": "half"} in bf16[0]["advice"]  # fmt: skip
    # a written-out setting that names what failed ("--x=y is only available on ROCm", "not
    # supported with --x=y") is not advice
    for engine in ENGINES:
        for m in messages(engine):
            for advice in m["advice"]:
                if "value" not in advice:
                    continue
                assert f"{advice['flag']}={advice['value']} is only" not in m["template"], m["key"]
                assert f"without {advice['flag']}={advice['value']}" not in m["template"]


def test_a_line_of_an_engines_own_message_names_that_engine() -> None:
    line = (
        "Free memory on device (70.1/79.2 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 71.3 GiB). Decrease GPU memory utilization or reduce GPU memory "
        "used by other processes."
    )
    assert engine_of_text([line]) == "vllm"
    assert engine_of_text(["RuntimeError: something is not supported on this device"]) is None
    d = diagnose_text(f"ValueError: {line}\n")
    assert d.engine == "vllm"
    assert any(c.name == "--gpu-memory-utilization" for h in d.hypotheses for c in h.changes)
