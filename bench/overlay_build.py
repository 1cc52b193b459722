"""Overlay build time, cold and cached, and proof the server's venv is never written.

A server venv of its own (layered on this one's site-packages, as a --system-site-packages
venv is) holds a package at one version; the overlay installs another version of it with the
server's own pip, offline, from real wheels: ``packaging`` and ``tokenizers`` repacked from
this venv (pure Python, and 10 MB of compiled code). For each it prints the cold build time
(an empty cache: pip runs), the cached time (the overlay is reused, no pip), that the server
imports the overlay's copy, and the SHA-256 of the venv's site-packages tree before and after.

    python bench/overlay_build.py            # 3 cold builds per package (median)
    python bench/overlay_build.py --cold 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "env"))
from pyenvs import build_wheel, make_venv, pip_install, repack, site_packages, tree_hash

from servedoctor.experiments.overlay import Overlays
from servedoctor.model import Change

PACKAGES = ("packaging", "tokenizers")


def _version(name: str) -> str:
    from importlib import metadata

    return metadata.version(name)


def _seen(python: Path, env: dict[str, str], name: str) -> str:
    code = f"from importlib import metadata; print(metadata.version({name!r}))"
    out = subprocess.run([str(python), "-c", code], env=env, capture_output=True, text=True)
    return out.stdout.strip() or out.stderr.strip().splitlines()[-1]


def bench(name: str, root: Path, cold_runs: int) -> dict[str, object]:
    wheels = root / "wheels"
    repack(wheels, name)  # the real package, as a wheel
    good = _version(name)
    build_wheel(wheels, name, "0.0.1", {f"{name}_old_marker.py": ""})  # the venv's old version
    python = make_venv(root / "server-venv", layered_on_this=True)
    pip_install(python, wheels, f"{name}==0.0.1")
    site = site_packages(python)
    before = tree_hash(site)
    pip_args = ["--no-index", "--find-links", str(wheels)]
    change = Change("package", name, f"=={good}")
    cold: list[float] = []
    for i in range(cold_runs):
        cache = root / f"cache{i}"
        started = time.perf_counter()
        Overlays(str(python), cache=cache, pip_args=pip_args).environment([change], {}, {})
        cold.append(time.perf_counter() - started)
    cached: list[float] = []
    for _ in range(20):
        started = time.perf_counter()
        env = Overlays(str(python), cache=root / "cache0", pip_args=pip_args).environment(
            [change], {}, {}
        )
        cached.append(time.perf_counter() - started)
    seen_in_overlay = _seen(python, {**os.environ, **env}, name)
    seen_plain = _seen(python, dict(os.environ), name)
    after = tree_hash(site)
    return {
        "package": f"{name}=={good}",
        "wheel_mb": sum(w.stat().st_size for w in wheels.glob(f"{name}-{good}*.whl")) / 1e6,
        "cold_s": statistics.median(cold),
        "cached_ms": statistics.median(cached) * 1000,
        "overlay_sees": seen_in_overlay,
        "venv_sees": seen_plain,
        "unchanged": before == after,
        "hash": before[:16],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", type=int, default=3, help="cold builds per package")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="overlay-bench-"))
    ok = True
    try:
        print(f"{'package':28} {'wheel':>8} {'cold':>8} {'cached':>9}  overlay/venv sees  venv")
        for name in PACKAGES:
            r = bench(name, root / name, args.cold)
            ok = ok and bool(r["unchanged"]) and r["overlay_sees"] != r["venv_sees"]
            state = f"unchanged (sha256 {r['hash']}…)" if r["unchanged"] else "CHANGED"
            sees = f"{r['overlay_sees']} / {r['venv_sees']}"
            print(f"{r['package']:28} {r['wheel_mb']:6.2f}MB {r['cold_s']:7.2f}s "
                  f"{r['cached_ms']:7.2f}ms  {sees:17}  {state}")  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
