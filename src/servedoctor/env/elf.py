"""A small ELF reader: the section table of a file, read through a buffer (often an mmap).

Only what the arch scan needs: section names, file offsets and sizes. 32/64-bit and both
byte orders; the extended section numbering of very large files (``e_shnum == 0``).
Malformed input raises :class:`ElfError`, never anything else.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from typing import TypeAlias

#: What the readers take: bytes, or an mmap (sliced into bytes, never exported as a view,
#: so the map can always be closed).
Buffer: TypeAlias = bytes | bytearray | mmap.mmap

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
SHT_NOBITS = 8
_SHN_XINDEX = 0xFFFF
_MAX_SECTIONS = 1 << 20


class ElfError(ValueError):
    """The bytes are not an ELF file we can read."""


@dataclass(frozen=True, slots=True)
class Section:
    name: str
    type: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class ElfFile:
    machine: int
    sections: tuple[Section, ...]

    def named(self, *names: str) -> list[Section]:
        return [s for s in self.sections if s.name in names]


def is_elf(buf: Buffer) -> bool:
    return bytes(buf[:4]) == ELF_MAGIC


def read_elf(buf: Buffer) -> ElfFile:
    """Parse the ELF header and section table held in ``buf``."""
    view = buf
    if len(view) < 52 or bytes(view[:4]) != ELF_MAGIC:
        raise ElfError("not an ELF file")
    klass, data = view[4], view[5]
    if klass not in (1, 2) or data not in (1, 2):
        raise ElfError("unknown ELF class or byte order")
    wide = klass == 2
    end = "<" if data == 1 else ">"
    try:
        machine = struct.unpack_from(end + "H", view, 18)[0]
        if wide:
            shoff = struct.unpack_from(end + "Q", view, 0x28)[0]
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", view, 0x3A)
            fmt = end + "IIQQQQIIQQ"
        else:
            shoff = struct.unpack_from(end + "I", view, 0x20)[0]
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", view, 0x2E)
            fmt = end + "IIIIIIIIII"
        if shoff == 0:
            return ElfFile(machine=machine, sections=())
        if shentsize < struct.calcsize(fmt):
            raise ElfError(f"section header entry of {shentsize} bytes is too small")
        if shoff + shentsize > len(view):
            raise ElfError("section table starts past the end of the file")
        raw = [_header(view, fmt, shoff, shentsize, 0)]
        if shnum == 0:  # extended numbering: the count lives in section 0's sh_size
            shnum = raw[0][5]
        if shstrndx == _SHN_XINDEX:
            shstrndx = raw[0][6]
        if shnum > _MAX_SECTIONS or shoff + shnum * shentsize > len(view):
            raise ElfError("section table runs past the end of the file")
        raw += [_header(view, fmt, shoff, shentsize, i) for i in range(1, shnum)]
    except (struct.error, OverflowError) as exc:
        raise ElfError(f"truncated ELF header: {exc}") from exc
    if not 0 <= shstrndx < len(raw):
        raise ElfError("section name table index out of range")
    strtab_off, strtab_size = raw[shstrndx][4], raw[shstrndx][5]
    names = bytes(view[strtab_off : strtab_off + strtab_size])
    sections = tuple(
        Section(name=_cstr(names, h[0]), type=h[1], offset=h[4], size=h[5]) for h in raw
    )
    return ElfFile(machine=machine, sections=sections)


def _header(view: Buffer, fmt: str, shoff: int, entsize: int, i: int) -> tuple[int, ...]:
    # Normalised to the 64-bit field order: name, type, flags, addr, offset, size, link, ...
    return tuple(struct.unpack_from(fmt, view, shoff + i * entsize))


def _cstr(table: bytes, start: int) -> str:
    if start >= len(table):
        return ""
    chunk = bytes(table[start : start + 256])
    return chunk.split(b"\0", 1)[0].decode("ascii", "replace")
