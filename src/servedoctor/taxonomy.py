"""The label vocabulary of ``corpus/TAXONOMY.md``: every diagnosis uses these values."""

from __future__ import annotations

from typing import Literal, get_args

ErrorClass = Literal[
    "cuda_oom",
    "kv_cache_capacity",
    "device_assert",
    "illegal_memory_access",
    "arch_unsupported",
    "abi_mismatch",
    "driver_mismatch",
    "missing_dependency",
    "nccl_error",
    "triton_error",
    "cublas_error",
    "numerical",
    "model_unsupported",
    "hang",
    "build_failure",
    "port_conflict",
    "other",
]

Phase = Literal[
    "install",
    "startup",
    "load",
    "memory_setup",
    "graph_capture",
    "warmup",
    "prefill",
    "decode",
    "serving",
    "shutdown",
]

Component = Literal[
    "attention",
    "moe",
    "gemm_quant",
    "sampling",
    "communication",
    "memory",
    "model",
    "environment",
    "scheduler",
    "unknown",
]

ERROR_CLASSES: tuple[str, ...] = get_args(ErrorClass)
PHASES: tuple[str, ...] = get_args(Phase)
COMPONENTS: tuple[str, ...] = get_args(Component)

#: Phases in the order a server passes through them; serving phases share one rank.
PHASE_ORDER: dict[str, int] = {
    "install": 0,
    "startup": 1,
    "load": 2,
    "memory_setup": 3,
    "graph_capture": 4,
    "warmup": 5,
    "prefill": 6,
    "decode": 6,
    "serving": 6,
    "shutdown": 7,
}

#: Phases in which requests are being served.
SERVING_PHASES = frozenset({"prefill", "decode", "serving"})
