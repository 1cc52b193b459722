from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from servedoctor.errors import UserError
from servedoctor.plan import PlanInputs, kv_layout, make_plan, parse_model_config, weights_for
from servedoctor.plan.safetensors import read_checkpoint, read_header
from servedoctor.plan.weights import classify

BASE = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 2048,
}


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    sizes = {"BF16": 2, "F32": 4, "F8_E4M3": 1, "U8": 1}
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_gqa_kv_heads_split_then_replicated_below_one_per_rank() -> None:
    model = parse_model_config(BASE)
    assert kv_layout(model, kv_cache_dtype="auto", tp=1).bytes_per_token == 2 * 2 * 8 * 2 * 4
    assert kv_layout(model, kv_cache_dtype="auto", tp=2).bytes_per_token == 1 * 2 * 8 * 2 * 4
    four = kv_layout(model, kv_cache_dtype="auto", tp=4)
    assert four.kv_heads_per_rank == 1 and four.replicated
    assert kv_layout(model, kv_cache_dtype="fp8_e4m3", tp=1).bytes_per_token == 2 * 2 * 8 * 4


def test_mla_latent_is_replicated_and_not_split_by_tp() -> None:
    model = parse_model_config(
        {
            **BASE,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128,
            "v_head_dim": 128,
        }
    )
    assert model.attention == "mla"
    assert kv_layout(model, kv_cache_dtype="auto", tp=8).bytes_per_token == 576 * 2 * 4
    assert kv_layout(model, kv_cache_dtype="fp8_e4m3", tp=1).bytes_per_token == 576 * 4


def test_unknown_kv_dtype_is_a_user_error() -> None:
    with pytest.raises(UserError):
        kv_layout(parse_model_config(BASE), kv_cache_dtype="int3", tp=1)


def test_safetensors_header_and_index_give_exact_bytes(tmp_path: Path) -> None:
    _write_safetensors(
        tmp_path / "a.safetensors",
        {
            "model.embed_tokens.weight": ("BF16", [1000, 64]),
            "model.layers.0.self_attn.q_proj.weight": ("BF16", [64, 64]),
            "model.layers.0.input_layernorm.weight": ("BF16", [64]),
        },
    )
    _write_safetensors(
        tmp_path / "b.safetensors",
        {
            "model.layers.0.mlp.experts.3.down_proj.weight": ("F8_E4M3", [64, 128]),
            "model.layers.4.mlp.experts.0.down_proj.weight": ("F8_E4M3", [64, 128]),
            "lm_head.weight": ("BF16", [1000, 64]),
        },
    )
    index = {
        "weight_map": {
            "model.embed_tokens.weight": "a.safetensors",
            "lm_head.weight": "b.safetensors",
        }
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    assert sum(t.nbytes for t in read_header(tmp_path / "a.safetensors")) == (64000 + 4096 + 64) * 2
    tensors = read_checkpoint(tmp_path)
    assert tensors is not None and len(tensors) == 6
    split = weights_for(tmp_path, parse_model_config(BASE))  # layer 4 = MTP layer, skipped
    assert split.exact
    assert split.vocab == 2 * 64000 * 2 and split.expert == 64 * 128
    assert split.replicated == 64 * 2 and split.tp == 64 * 64 * 2
    per_gpu = split.per_gpu_bytes(tp=2)
    assert per_gpu == (2 * 64000 * 2 + 64 * 128 + 64 * 64 * 2) / 2 + 64 * 2


def test_missing_shard_is_a_user_error(tmp_path: Path) -> None:
    index = {"weight_map": {"x": "model-00001-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(UserError, match="not in"):
        read_checkpoint(tmp_path)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("model.embed_tokens.weight", "vocab"),
        ("lm_head.weight", "vocab"),
        ("model.layers.3.mlp.experts.17.gate_proj.weight", "expert"),
        ("model.layers.3.mlp.gate.weight", "replicated"),
        ("model.layers.3.self_attn.kv_a_proj_with_mqa.weight", "replicated"),
        ("model.layers.3.self_attn.indexer.wk.weight", "replicated"),
        ("model.layers.3.post_attention_layernorm.weight", "replicated"),
        ("model.layers.3.self_attn.o_proj.weight", "tp"),
        ("model.layers.3.mlp.shared_experts.up_proj.weight", "tp"),
    ],
)
def test_sharding_rules(name: str, kind: str) -> None:
    assert classify(name) == kind


def test_more_fraction_more_tokens_and_zero_when_weights_do_not_fit() -> None:
    model = parse_model_config(BASE)
    small = make_plan(
        model, PlanInputs(engine="sglang", gpu_memory_gib=10, fraction=0.5, weights_gib_per_gpu=2)
    )
    big = make_plan(
        model, PlanInputs(engine="sglang", gpu_memory_gib=10, fraction=0.8, weights_gib_per_gpu=2)
    )
    assert big.kv_tokens > small.kv_tokens > 0
    none = make_plan(
        model, PlanInputs(engine="vllm", gpu_memory_gib=10, fraction=0.5, weights_gib_per_gpu=6)
    )
    assert none.kv_tokens == 0 and not none.graph_capture_fits
    assert set(big.to_dict()) == {
        "weights_gib_per_gpu",
        "kv_bytes_per_token",
        "kv_tokens",
        "kv_gib_per_gpu",
        "graph_capture_fits",
        "recommended_fraction",
    }


def test_sglang_default_fraction_follows_gpu_size() -> None:
    model = parse_model_config(BASE)
    h100 = make_plan(model, PlanInputs(engine="sglang", gpu_memory_gib=79.19, tp=1))
    h200 = make_plan(model, PlanInputs(engine="sglang", gpu_memory_gib=139.8, tp=1))
    assert 0.8 < h100.fraction < h200.fraction < 0.95


def test_bad_inputs_are_user_errors() -> None:
    model = parse_model_config(BASE)
    with pytest.raises(UserError):
        make_plan(model, PlanInputs(engine="sglang", gpu_memory_gib=10, fraction=1.5))
    with pytest.raises(UserError):
        parse_model_config({"model_type": "x"})
