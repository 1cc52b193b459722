"""Crash-to-diagnosis latency of `launch` over SSH against the same launch run locally.

A stand-in server prints a few startup lines, then a CUDA error and dies (exit 3), writing
the wall-clock instant of its death just before. The latency is from that instant to the
moment `launch()` returns with the diagnosis (teardown included: over SSH that is the
agent's report coming back). The "remote host" is a real sshd on loopback (tests/remote/
sshd.py), so the figure is the cost of the transport itself, not of a network.

Run: .venv/bin/python bench/remote_latency.py [--runs N]   (needs /usr/sbin/sshd; ~30 s)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "remote"))

from sshd import missing, start_sshd, stop_sshd  # noqa: E402

from servedoctor.launch import LaunchOptions, launch  # noqa: E402
from servedoctor.remote.url import SshTarget  # noqa: E402

CRASH = """
import os, sys, time
print("INFO: starting stand-in server", flush=True)
print("INFO: loading weights", flush=True)
time.sleep(1.0)
print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
with open(sys.argv[1], "w") as f:
    f.write(repr(time.time()))
os._exit(3)
"""


def one(tmp: Path, target: SshTarget | None, n: int) -> float:
    stamp = tmp / f"died-{n}-{'ssh' if target else 'local'}"
    options = LaunchOptions(
        runs_dir=tmp / "runs", quiet=True, grace_s=2.0, on=target, request_timeout=5.0
    )
    result = launch([sys.executable, "-c", CRASH, str(stamp)], options)
    done = time.time()
    assert result.outcome == "failed" and result.diagnosis is not None, result.to_dict()
    assert result.leftover_processes == 0
    return done - float(stamp.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    reason = missing()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        sshd, target = start_sshd(tmp)
        try:
            one(tmp, target, -1)  # warm-up: imports, rules, the first connection
            local = [one(tmp, None, n) for n in range(args.runs)]
            remote = [one(tmp, target, n) for n in range(args.runs)]
        finally:
            stop_sshd(sshd)
    print(f"crash-to-diagnosis latency, {args.runs} runs each (median, min-max):")
    for label, xs in (("local", local), ("ssh (loopback sshd)", remote)):
        print(f"  {label:<20} {statistics.median(xs):6.3f} s  ({min(xs):.3f}-{max(xs):.3f})")
    print(f"  ssh overhead         {statistics.median(remote) - statistics.median(local):+6.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
