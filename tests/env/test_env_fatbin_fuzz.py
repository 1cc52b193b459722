"""The ELF/fatbin reader never raises on random, truncated or corrupted bytes."""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from servedoctor.env.arch import Arch
from servedoctor.env.cuobjdump import parse_listing
from servedoctor.env.fatbin import FATBIN_MAGIC, parse_fatbins, scan_bytes, scan_file

_ELF64 = b"\x7fELF\x02\x01\x01" + b"\0" * 9


def _fatbin(entries: list[tuple[int, int, int, int]]) -> bytes:
    body = b""
    for kind, arch, flags, payload in entries:
        header = struct.pack(
            "<HHIQIIHHIIIQQQ", kind, 0x101, 64, payload, 0, 0, 0, 1, arch, 0, 0, flags, 0, 0
        )
        body += header + b"\0" * payload
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def test_bare_fatbin_entries() -> None:
    blob = _fatbin([(2, 90, 0x100011, 8), (1, 120, 0x8011, 16), (2, 100, 0x200011, 0)])
    result = scan_bytes(blob)
    assert result.sass == ["sm_90a", "sm_100f"]
    assert result.ptx == ["compute_120"]
    assert result.compressed == 1


def test_two_fatbins_with_padding_between() -> None:
    blob = _fatbin([(2, 80, 0x11, 8)]) + b"\0" * 24 + _fatbin([(2, 86, 0x11, 8)])
    assert [fb.sass[0].sm for fb in parse_fatbins(blob)] == ["sm_80", "sm_86"]


@settings(deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes(data: bytes) -> None:
    scan_bytes(data)
    scan_bytes(_ELF64 + data)
    scan_bytes(struct.pack("<I", FATBIN_MAGIC) + data)


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 9), st.integers(0, 1200), st.integers(0, 2**40), st.integers(0, 64)
        ),
        max_size=6,
    ),
    st.integers(0, 400),
)
def test_truncated_fatbins(entries: list[tuple[int, int, int, int]], cut: int) -> None:
    blob = _fatbin(entries)
    present = {
        Arch.from_number(arch, "a" if flags & 0x100000 else "f" if flags & 0x200000 else "").sm
        for kind, arch, flags, _ in entries
        if kind == 2 and 10 <= arch <= 999
    }
    for data in (blob, blob[:cut], blob[cut:]):
        assert set(scan_bytes(data).sass) <= present  # never an arch that is not there


@settings(deadline=None)
@given(st.data())
def test_corrupted_real_library(cuda_libs: dict[str, Path], data: st.DataObject) -> None:
    raw = bytearray(cuda_libs["several"].read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    scan_bytes(bytes(raw))
    scan_bytes(bytes(raw[:cut]))


def test_section_table_offset_beyond_any_file() -> None:
    # Found by fuzzing: an e_shoff near 2**63 made struct raise OverflowError, not ElfError.
    header = bytearray(_ELF64 + b"\0" * 48)
    struct.pack_into("<Q", header, 0x28, 2**63 + 20504)
    struct.pack_into("<HHH", header, 0x3A, 64, 1, 0)
    result = scan_bytes(bytes(header))
    assert result.error is not None and result.error.startswith("unreadable ELF")
    assert result.sass == []


def test_unreadable_paths(tmp_path: Path) -> None:
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    assert scan_file(empty).error == "empty file"
    assert scan_file(tmp_path / "missing.so").error
    assert scan_file(tmp_path).error  # a directory


def test_cuobjdump_listing_parser() -> None:
    text = """
Fatbin elf code:
ELF file    1: libx.1.sm_90a.cubin
ELF file    2: libx.2.sm_100f.cubin
PTX file    1: libx.1.sm_90.ptx
ELF file    3: libx_dlink.sm_90a.cubin
"""
    listing = parse_listing(text)
    assert listing.sass == ("sm_100f", "sm_90a")
    assert listing.ptx == ("compute_90",)
