"""Check the PTX ISA versions archscan reads from fatbin headers against the PTX text itself.

    python3 scripts/device/ptx_isa_vs_cuobjdump.py DIR_OR_FILE... [--jobs N] [--timeout S]

For every library with PTX entries, ``cuobjdump -ptx`` prints the (decompressed) PTX; its
``.version X.Y`` directives must be exactly the ISA versions archscan lists. One line per
library and a total; exit 1 on any disagreement.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from servedoctor.env.cuobjdump import cuobjdump_path
from servedoctor.env.fatbin import library_files, scan_file

_VERSION = re.compile(rb"^\s*\.version (\d+)\.(\d+)", re.MULTILINE)


def _versions_in_ptx(path: Path, timeout: float) -> set[str] | str:
    exe = cuobjdump_path()
    if exe is None:
        return "cuobjdump missing"
    try:
        done = subprocess.run([exe, "-ptx", str(path)], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"cuobjdump took over {timeout:.0f} s"
    return {f"{int(a)}.{int(b)}" for a, b in _VERSION.findall(done.stdout)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args()
    ours_by_lib = {
        p: set(scan.ptx_isa) for p in library_files(args.paths) if (scan := scan_file(p)).ptx
    }
    libs = list(ours_by_lib)
    agree = disagree = skipped = 0
    with ThreadPoolExecutor(args.jobs) as pool:
        found = pool.map(lambda p: (p, _versions_in_ptx(p, args.timeout)), libs)
        for path, versions in found:
            ours = ours_by_lib[path]
            if isinstance(versions, str):
                skipped += 1
                print(f"skipped  {path.name}: {versions}")
            elif versions == ours:
                agree += 1
                print(f"agree    {path.name}: PTX ISA {' '.join(sorted(ours))}")
            else:
                disagree += 1
                theirs = sorted(versions)
                print(f"DISAGREE {path.name}: archscan {sorted(ours)} vs PTX text {theirs}")
    print(
        f"PTX ISA: {agree} of {len(libs)} libraries with PTX agree with cuobjdump -ptx "
        f"({disagree} disagree, {skipped} skipped)"
    )
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
