"""Arch-scan speed over every compiled library of an installed torch.

Prints files, MB, seconds and MB/s for the scan, and the same for a baseline measured in the
same run: reading every byte of the same files (what a scan that reads whole files, as
cuobjdump does, cannot beat). Runs where torch is missing too: it says so and exits 0.

    python bench/archscan_speed.py             # the installed torch
    python bench/archscan_speed.py --path DIR  # any folder of libraries
    python bench/archscan_speed.py --cuobjdump # also time cuobjdump --list-elf --list-ptx
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from servedoctor.env.cuobjdump import cuobjdump_path
from servedoctor.env.fatbin import ScanResult, is_library_name, scan_file

CHUNK = 16 * 1024 * 1024


def torch_dir() -> Path | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def read_all(files: list[Path]) -> int:
    total = 0
    for path in files:
        with open(path, "rb") as fh:
            while block := fh.read(CHUNK):
                total += len(block)
    return total


def timed(label: str, files: list[Path], megabytes: float, fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    rate = megabytes / seconds if seconds > 0 else float("inf")
    print(
        f"{label:<28} {len(files):>5} files {megabytes:>10.1f} MB {seconds:>8.3f} s "
        f"{rate:>10.0f} MB/s"
    )
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, help="scan this folder instead of torch")
    parser.add_argument("--cuobjdump", action="store_true", help="also time cuobjdump")
    args = parser.parse_args()
    root = args.path or torch_dir()
    if root is None:
        print(
            f"torch is not installed in this Python ({sys.executable}): nothing to scan; "
            "give --path DIR to scan another folder"
        )
        return 0
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and is_library_name(p)
    )
    if not files:
        print(f"no compiled libraries under {root}")
        return 0
    megabytes = sum(p.stat().st_size for p in files) / 1e6
    print(f"root: {root}")
    read_all(files)  # warm the page cache so both timings read from memory
    base = timed("baseline: read every byte", files, megabytes, lambda: read_all(files))
    results: list[ScanResult] = []
    scan = timed(
        "archscan (mmap, headers)",
        files,
        megabytes,
        lambda: results.extend(scan_file(p) for p in files),
    )
    with_code = sum(1 for r in results if r.has_device_code)
    entries = sum(len(list(r.entries)) for r in results)
    print(f"libraries with device code: {with_code}; fatbin entries read: {entries}")
    print(
        f"ratio: archscan is {base / scan:.1f}x the speed of reading the bytes "
        f"(scan {scan:.3f} s vs read {base:.3f} s); goal: every torch .so in < 5 s"
    )
    if args.cuobjdump and cuobjdump_path():
        exe = cuobjdump_path() or "cuobjdump"
        cmd = [exe, "--list-elf", "--list-ptx"]
        dump = timed(
            "cuobjdump --list-elf/ptx",
            files,
            megabytes,
            lambda: [
                subprocess.run([*cmd, str(p)], capture_output=True, check=False) for p in files
            ],
        )
        print(f"ratio: archscan is {dump / scan:.1f}x the speed of cuobjdump")
    return 0


if __name__ == "__main__":
    sys.exit(main())
