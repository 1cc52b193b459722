"""TensorRT-LLM's logs name it, and its failures get trtllm-serve's own flags."""

from __future__ import annotations

from servedoctor.diagnose import diagnose_text
from servedoctor.model import Change

KV_OOM = """\
[TRT-LLM] [I] Memory used outside torch (e.g., NCCL and CUDA graphs): 0.35 GiB
_no_capture_init_kv_cache: 3.50 / 0.35
torch.AcceleratorError: CUDA error: out of memory
RuntimeError: Executor worker returned error
"""


def test_its_logger_prefix_names_it_and_memory_is_spelled_as_its_flag() -> None:
    d = diagnose_text(KV_OOM)
    assert d.engine == "trtllm"
    assert d.error_class == "cuda_oom"
    changes = [c for h in d.hypotheses for c in h.changes]
    # the KV cache's share of free memory, one step below its default of 0.9
    assert changes[0] == Change("flag", "--kv_cache_free_gpu_memory_fraction", "0.85")
    assert not any(c.name.startswith("--gpu-memory") for c in changes)


def test_its_module_paths_name_it_and_another_engines_do_not() -> None:
    frame = (
        '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/x.py", line 3, in f\n'
    )
    assert diagnose_text(frame + "RuntimeError: boom\n").engine == "trtllm"
    other = frame.replace("tensorrt_llm/_torch", "vllm/v1")
    assert diagnose_text(other + "RuntimeError: boom\n").engine == "vllm"
