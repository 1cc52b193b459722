"""Exact weight bytes from safetensors headers, without loading a tensor.

A ``.safetensors`` file starts with an 8-byte little-endian header length and a JSON header
mapping each tensor name to its dtype, shape and byte range; ``model.safetensors.index.json``
names the shard holding each tensor.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from servedoctor.errors import UserError

__all__ = ["TensorInfo", "read_checkpoint", "read_header"]

MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


def read_header(path: Path) -> list[TensorInfo]:
    try:
        with path.open("rb") as fh:
            raw_len = fh.read(8)
            if len(raw_len) != 8:
                raise UserError(f"{path}: not a safetensors file (too short)")
            (length,) = struct.unpack("<Q", raw_len)
            if length > MAX_HEADER:
                raise UserError(f"{path}: safetensors header of {length} bytes is implausible")
            header = json.loads(fh.read(length))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read safetensors header of {path}: {exc}") from None
    tensors = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        tensors.append(TensorInfo(name, info["dtype"], tuple(info["shape"]), end - start))
    return tensors


def read_checkpoint(model_dir: Path) -> list[TensorInfo] | None:
    """Every tensor of the checkpoint in ``model_dir``, or ``None`` when it has no
    safetensors files. Shards named by the index but absent are an error."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, KeyError, json.JSONDecodeError) as exc:
            raise UserError(f"cannot read {index}: {exc}") from None
        shards = sorted(set(weight_map.values()))
        missing = [s for s in shards if not (model_dir / s).is_file()]
        if missing:
            raise UserError(
                f"{index} names {len(missing)} shard(s) not in {model_dir} (first: {missing[0]});"
                " download them or pass --weights-gib-per-gpu"
            )
        files = [model_dir / s for s in shards]
    else:
        files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        return None
    return [t for f in files for t in read_header(f)]
