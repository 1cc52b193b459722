"""Which CUDA driver can JIT-compile a given PTX ISA version (table in ``data/ptx_isa.yaml``)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from servedoctor.datafile import load_yaml

DATA = Path(__file__).parent / "data" / "ptx_isa.yaml"

Version = tuple[int, int]
_VERSION = re.compile(r"^\s*(\d+)\.(\d+)")


class _BeyondTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    isa_major: int
    cuda_major: int


class _PtxTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    first_cuda: dict[str, str]
    beyond_table: _BeyondTable


def parse_version(text: str | None) -> Version | None:
    """``"12.8"`` → (12, 8); ``None`` or anything else → None."""
    match = _VERSION.match(text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def format_version(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


@lru_cache(maxsize=1)
def _table() -> tuple[dict[Version, Version], _BeyondTable]:
    raw = _PtxTable.model_validate(load_yaml(DATA))
    table: dict[Version, Version] = {}
    for isa, cuda in raw.first_cuda.items():
        isa_v, cuda_v = parse_version(isa), parse_version(cuda)
        if isa_v is None or cuda_v is None:
            raise ValueError(f"{DATA}: unreadable version pair {isa!r}: {cuda!r}")
        table[isa_v] = cuda_v
    return table, raw.beyond_table


def cuda_for_ptx(isa: Version) -> Version | None:
    """The first CUDA release whose driver loads PTX of ISA version ``isa``; None if unknown."""
    table, beyond = _table()
    if isa in table:
        return table[isa]
    if isa[0] == beyond.isa_major and isa > max(table):
        return (beyond.cuda_major, isa[1])
    return None


def driver_loads(isa: Version | None, driver_cuda: Version | None) -> bool:
    """Can a driver of CUDA version ``driver_cuda`` JIT PTX of ``isa``? Unknown → yes."""
    if isa is None or driver_cuda is None:
        return True
    needed = cuda_for_ptx(isa)
    if needed is not None:
        return driver_cuda >= needed
    table, _ = _table()
    if isa > max(table):  # newer than every known ISA: only a driver newer than all of them
        return driver_cuda > max(table.values())
    return True  # an old ISA the table does not start at
