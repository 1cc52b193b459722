"""Compare servedoctor's pure-Python arch scan with ``cuobjdump --list-elf --list-ptx``.

    python3 scripts/device/archscan_vs_cuobjdump.py DIR_OR_FILE... [--jobs N] [--timeout S]

Prints one line per library (agree / DISAGREE / skipped) and a total; exit 1 on any
disagreement, 0 otherwise. Libraries neither tool finds device code in count as agreeing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from servedoctor.env.cuobjdump import Listing, as_listed, cuobjdump_path, list_with_cuobjdump
from servedoctor.env.elf import read_elf
from servedoctor.env.fatbin import FATBIN_SECTIONS, library_files, parse_fatbins, scan_file


def _by_section(path: Path) -> str:
    """Which ELF section each arch came from, to explain a disagreement."""
    data = path.read_bytes()
    parts = []
    for name in FATBIN_SECTIONS:
        for section in read_elf(data).named(name):
            fatbins = parse_fatbins(data, section.offset, section.offset + section.size)
            names = sorted({e.name for f in fatbins for e in f.entries})
            parts.append(f"{name}: {' '.join(names) or '-'}")
    return "; ".join(parts)


def _cuobjdump(path: Path, timeout: float) -> Listing | str:
    try:
        listing = list_with_cuobjdump(path, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"cuobjdump took over {timeout:.0f} s"
    return listing if listing is not None else "cuobjdump missing"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    if cuobjdump_path() is None:
        print("cuobjdump is not on PATH: nothing to compare")
        return 0
    files = [p for p in library_files(args.paths) if p.is_file() and not p.is_symlink()]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        listings = list(pool.map(lambda p: _cuobjdump(p, args.timeout), files))
    dump_seconds = time.perf_counter() - started
    started = time.perf_counter()
    scans = [scan_file(p) for p in files]
    scan_seconds = time.perf_counter() - started
    agree = disagree = skipped = 0
    for path, listing, scan in zip(files, listings, scans, strict=True):
        if isinstance(listing, str) or scan.error:
            skipped += 1
            print(f"skipped   {path}: {listing if isinstance(listing, str) else scan.error}")
            continue
        ours = (as_listed(scan.sass), as_listed(scan.ptx))
        theirs = (set(listing.sass), set(listing.ptx))
        if ours == theirs:
            agree += 1
            what = " ".join(sorted(scan.sass) + sorted(scan.ptx)) or "(no device code)"
            print(f"agree     {path.name}: {what}")
        else:
            disagree += 1
            print(
                f"DISAGREE  {path}: archscan sass={sorted(ours[0])} ptx={sorted(ours[1])}; "
                f"cuobjdump sass={sorted(theirs[0])} ptx={sorted(theirs[1])}"
            )
            print(f"          by section: {_by_section(path)}")
    total = len(files)
    print(
        f"total: {agree}/{total} agree, {disagree} disagree, {skipped} skipped; "
        f"archscan {scan_seconds:.2f} s, cuobjdump {dump_seconds:.2f} s with {args.jobs} jobs"
    )
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
