from __future__ import annotations

from servedoctor.engines.effective import parse_effective_config


def test_sglang_serverargs_repr_with_non_literals() -> None:
    line = (
        "[2025-10-16 09:06:00] server_args=ServerArgs(model_path='zai-org/GLM-5', tp_size=8,"
        " attention_backend=None, cuda_graph_bs=[1, 2, 4], mem_fraction_static=0.92,"
        " quant=<Foo object at 0x7f3a>, mode=Mode.X, dtype='auto')"
    )
    cfg = parse_effective_config(line)
    assert cfg is not None
    assert cfg["tp_size"] == 8 and cfg["attention_backend"] is None
    assert cfg["cuda_graph_bs"] == [1, 2, 4] and cfg["mem_fraction_static"] == 0.92
    assert cfg["quant"] == "<Foo object at 0x7f3a>" and cfg["mode"] == "Mode.X"
    assert cfg["dtype"] == "auto"


def test_sglang_repr_truncated_line_keeps_what_is_there() -> None:
    cfg = parse_effective_config("server_args=ServerArgs(model_path='m', tp_size=2, attention_ba")
    assert cfg == {"model_path": "m", "tp_size": 2}


def test_sglang_dict_form_and_json() -> None:
    cfg = parse_effective_config('server_args={"tp_size": 4, "disable_cuda_graph": false}')
    assert cfg == {"tp_size": 4, "disable_cuda_graph": False}


def test_vllm_non_default_args() -> None:
    line = (
        "(APIServer pid=1) INFO 08-06 10:08:29 [utils.py:233] non-default args: {'model_tag':"
        " 'm', 'max_model_len': 16384, 'gpu_memory_utilization': 0.79,"
        " 'served_model_name': ['Qwen/Qwen3-8B']}"
    )
    cfg = parse_effective_config(line)
    assert cfg is not None
    assert cfg["max_model_len"] == 16384 and cfg["served_model_name"] == ["Qwen/Qwen3-8B"]


def test_vllm_engine_config_line() -> None:
    line = (
        "INFO 10-01 12:00:00 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config:"
        " model='Qwen/Qwen3-8B', speculative_config=None, dtype=torch.bfloat16,"
        " max_seq_len=40960, enforce_eager=False, kv_cache_dtype=auto,"
        " compilation_config={'level': 3, 'cudagraph_mode': [2, 1]}, seed=0"
    )
    cfg = parse_effective_config(line)
    assert cfg is not None
    assert cfg["dtype"] == "torch.bfloat16" and cfg["max_seq_len"] == 40960
    assert cfg["enforce_eager"] is False and cfg["kv_cache_dtype"] == "auto"
    assert cfg["compilation_config"] == {"level": 3, "cudagraph_mode": [2, 1]}


def test_other_lines_are_none() -> None:
    assert parse_effective_config("INFO Load weight begin. avail mem=137.29 GB") is None
