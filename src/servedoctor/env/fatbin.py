"""CUDA fatbinary reader: which SASS and PTX a compiled library carries, without cuobjdump.

A host ELF built by nvcc keeps its device code in the ``.nv_fatbin`` section (``__nv_relfatbin``
in relocatable objects). The section holds one fatbinary per translation unit, back to back::

    fatbin header (16 bytes)   magic 0xBA55ED50, u16 version, u16 header size, u64 body size
    entry header (>= 64 bytes) u16 kind (1 PTX, 2 ELF/SASS, 8 LTO IR), u16 version,
                               u32 header size, u64 payload size, u32 compressed size,
                               u32 -, u16 minor, u16 major, u32 arch (90, 100, 120...),
                               u32 name offset, u32 name size, u64 flags, u64 -, u64 size
                               before compression
    payload

The arch variant and compression sit in the entry flags, so a compressed entry never needs
to be decompressed to learn what it is for. The layout was read off nvcc 13.0 output and
checked against cuobjdump; an entry we cannot place is skipped, never guessed.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from servedoctor.env.arch import Arch, Variant
from servedoctor.env.elf import Buffer, ElfError, is_elf, read_elf

FATBIN_MAGIC = 0xBA55ED50
_MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")

_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, body size
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # see module docstring
_MIN_ENTRY_HEADER = _ENTRY.size  # 64

KIND_PTX = 1
KIND_ELF = 2
KIND_LTO = 8

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_COMPRESS_LZ4 = 0x2000  # older toolkits
FLAG_COMPRESS_ZSTD = 0x8000  # CUDA 12.8+ default (payload starts with the zstd magic)
FLAG_ARCH_SPECIFIC = 0x100000  # sm_XYa / compute_XYa
FLAG_FAMILY_SPECIFIC = 0x200000  # sm_XYf / compute_XYf

EntryKind = Literal["sass", "ptx", "lto", "other"]
_KINDS: dict[int, EntryKind] = {KIND_ELF: "sass", KIND_PTX: "ptx", KIND_LTO: "lto"}


@dataclass(frozen=True, slots=True)
class FatbinEntry:
    kind: EntryKind
    arch: Arch
    compressed: bool
    offset: int
    size: int
    ptx_isa: tuple[int, int] | None = None  # PTX ISA version of a PTX entry, e.g. (9, 0)

    @property
    def name(self) -> str:
        if self.kind == "sass":
            return self.arch.sm
        if self.kind == "ptx":
            return self.arch.compute
        return f"{self.kind}_{self.arch.number}{self.arch.variant}"


@dataclass(frozen=True, slots=True)
class Fatbin:
    """One fatbinary: usually the device code of one translation unit (a 'module')."""

    offset: int
    entries: tuple[FatbinEntry, ...]

    @property
    def sass(self) -> tuple[Arch, ...]:
        return tuple(e.arch for e in self.entries if e.kind == "sass")

    @property
    def ptx(self) -> tuple[Arch, ...]:
        return tuple(e.arch for e in self.entries if e.kind == "ptx")


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What one file carries. ``error`` is set when the file could not be read."""

    file: str
    fatbins: tuple[Fatbin, ...] = ()
    error: str | None = None
    bytes_scanned: int = 0
    extras: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def entries(self) -> Iterator[FatbinEntry]:
        for fb in self.fatbins:
            yield from fb.entries

    @property
    def sass(self) -> list[str]:
        return _sorted_names(e for e in self.entries if e.kind == "sass")

    @property
    def ptx(self) -> list[str]:
        return _sorted_names(e for e in self.entries if e.kind == "ptx")

    @property
    def ptx_isa(self) -> list[str]:
        """The PTX ISA versions of the PTX entries, e.g. ``["8.7"]``."""
        found = {e.ptx_isa for e in self.entries if e.kind == "ptx" and e.ptx_isa is not None}
        return [f"{major}.{minor}" for major, minor in sorted(found)]

    @property
    def compressed(self) -> int:
        return sum(1 for e in self.entries if e.compressed)

    @property
    def has_device_code(self) -> bool:
        return any(e.kind in ("sass", "ptx") for e in self.entries)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "sass": self.sass, "ptx": self.ptx}
        if self.ptx_isa:
            out["ptx_isa"] = self.ptx_isa
        if self.error:
            out["error"] = self.error
        return out


def _sorted_names(entries: Iterator[FatbinEntry]) -> list[str]:
    archs = {(e.arch, e.name) for e in entries}
    return [name for _, name in sorted(archs)]


def _variant(flags: int) -> Variant:
    if flags & FLAG_ARCH_SPECIFIC:
        return "a"
    if flags & FLAG_FAMILY_SPECIFIC:
        return "f"
    return ""


def parse_fatbins(buf: Buffer, start: int = 0, end: int | None = None) -> list[Fatbin]:
    """Every fatbinary found in ``buf[start:end]``; garbage and truncation end the walk."""
    stop = len(buf) if end is None else min(end, len(buf))
    found: list[Fatbin] = []
    pos = max(0, start)
    while pos + _HEADER.size <= stop:
        pos = buf.find(_MAGIC_BYTES, pos, stop)
        if pos < 0 or pos + _HEADER.size > stop:
            break
        _magic, _version, header_size, body_size = _HEADER.unpack_from(buf, pos)
        if header_size < _HEADER.size:
            pos += 4
            continue
        body_start = pos + header_size
        body_end = min(body_start + body_size, stop)
        entries = tuple(_entries(buf, body_start, body_end))
        found.append(Fatbin(offset=pos, entries=entries))
        pos = max(body_end, pos + 4)
    return found


def _entries(buf: Buffer, pos: int, end: int) -> Iterator[FatbinEntry]:
    while pos + _MIN_ENTRY_HEADER <= end:
        (
            kind,
            _version,
            header_size,
            payload_size,
            compressed_size,
            _unknown,
            minor,
            major,
            arch,
            _name_off,
            _name_len,
            flags,
            _reserved,
            _uncompressed_size,
        ) = _ENTRY.unpack_from(buf, pos)
        if header_size < _MIN_ENTRY_HEADER or kind == 0 or not 10 <= arch <= 999:
            return
        compressed = bool(flags & (FLAG_COMPRESS_LZ4 | FLAG_COMPRESS_ZSTD)) or compressed_size != 0
        entry_kind = _KINDS.get(kind, "other")
        yield FatbinEntry(
            kind=entry_kind,
            arch=Arch.from_number(arch, _variant(flags)),
            compressed=compressed,
            offset=pos,
            size=payload_size,
            ptx_isa=(major, minor) if entry_kind == "ptx" else None,
        )
        pos += header_size + payload_size


def scan_bytes(buf: Buffer, name: str = "<bytes>") -> ScanResult:
    """Scan an in-memory ELF file or bare fatbinary. Never raises on malformed input."""
    if buf[:4] == _MAGIC_BYTES:
        return ScanResult(file=name, fatbins=tuple(parse_fatbins(buf)), bytes_scanned=len(buf))
    if not is_elf(buf):
        return ScanResult(file=name, error="not an ELF file or fatbinary")
    try:
        elf = read_elf(buf)
    except ElfError as exc:
        return ScanResult(file=name, error=f"unreadable ELF: {exc}")
    by_section: dict[str, list[Fatbin]] = {}
    scanned = 0
    for section in elf.named(*FATBIN_SECTIONS):
        end = min(section.offset + section.size, len(buf))
        by_section.setdefault(section.name, []).extend(parse_fatbins(buf, section.offset, end))
        scanned += max(0, end - section.offset)
    loadable = by_section.get(".nv_fatbin", [])
    relocatable = by_section.get("__nv_relfatbin", [])
    if not loadable:
        # a relocatable object (.o): its device code lives in __nv_relfatbin only
        return ScanResult(file=name, fatbins=tuple(relocatable), bytes_scanned=scanned)
    # A linked library's __nv_relfatbin keeps device code for device-side linking by its
    # users (nvshmem does this); the driver never loads it, so it says nothing about
    # which GPUs the library's own kernels run on (cuobjdump --list-elf skips it too).
    extras = {"relocatable": _sorted_names(e for f in relocatable for e in f.entries)}
    return ScanResult(file=name, fatbins=tuple(loadable), bytes_scanned=scanned, extras=extras)


def scan_file(path: str | os.PathLike[str]) -> ScanResult:
    """Scan one file through an mmap: only the headers of the fatbin entries are touched."""
    name = str(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return ScanResult(file=name, error="empty file")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                result = scan_bytes(mm, name)
    except OSError as exc:
        return ScanResult(file=name, error=exc.strerror or str(exc))
    except ValueError as exc:  # mmap of something that is not a regular file
        return ScanResult(file=name, error=str(exc))
    return result


LIBRARY_SUFFIXES = (".so", ".fatbin", ".o")


def is_library_name(path: Path) -> bool:
    """Shared objects (also versioned ``libx.so.12``), relocatable objects and fatbins."""
    name = path.name
    return name.endswith(LIBRARY_SUFFIXES) or ".so." in name


def library_files(paths: list[Path]) -> list[Path]:
    """Expand directories into the library files below them (symlinks skipped: they would
    count a library twice); files given by name are kept as given."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out += sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and not p.is_symlink() and is_library_name(p)
            )
        else:
            out.append(path)
    return out
