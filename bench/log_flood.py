"""Server log throughput alone vs under supervision (goal: ratio >= 0.8).

A small Python server writes N MB of 100-byte log lines as fast as it can, records its own
throughput, prints the ready line and waits. Run once with its output on a plain file
("alone"), once under ``servedoctor.launch`` (same machine, same run). Also prints how long
after the ready line was written the supervisor parsed it.

    python bench/log_flood.py [--mb 256]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servedoctor.launch import LaunchEvent, LaunchOptions, launch

WRITER = """
import json, sys, time
mb, out_path = int(sys.argv[1]), sys.argv[2]
line = b"INFO 12-01 12:00:00 [engine.py:123] Avg prompt throughput: 0.0 tokens/s, running: 0 \\n"
block = line * (1024 * 1024 // len(line))
n = mb * 1024 * 1024 // len(block)
out = sys.stdout.buffer
t = time.monotonic()
for _ in range(n):
    out.write(block)
out.flush()
dt = time.monotonic() - t
print("INFO:     Uvicorn running on http://127.0.0.1:1", flush=True)
ready_at = time.time()
with open(out_path, "w") as f:
    json.dump({"mb": n * len(block) / 1e6, "s": dt, "ready_at": ready_at}, f)
time.sleep(600)
"""


def _result(path: Path) -> dict[str, float]:
    deadline = time.monotonic() + 600
    while not path.exists() or not path.read_text():
        if time.monotonic() > deadline:
            raise SystemExit("the writer did not finish")
        time.sleep(0.05)
    return dict(json.loads(path.read_text()))


def alone(mb: int, tmp: Path) -> dict[str, float]:
    out = tmp / "alone.json"
    with open(tmp / "alone.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(mb), str(out)], stdout=log)
        try:
            return _result(out)
        finally:
            proc.kill()
            proc.wait()


def supervised(mb: int, tmp: Path) -> tuple[dict[str, float], float | None]:
    out = tmp / "supervised.json"
    seen: list[float] = []

    def on_event(event: LaunchEvent) -> None:
        if event.kind == "line" and "Uvicorn running on" in event.message and not seen:
            seen.append(time.time())
            raise KeyboardInterrupt  # measured: end the run

    cmd = [sys.executable, "-c", WRITER, str(mb), str(out), "--port", "1"]
    launch(cmd, LaunchOptions(runs_dir=tmp / "runs", grace_s=1.0), on_event=on_event)
    got = _result(out)
    return got, (seen[0] - got["ready_at"]) if seen else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="log_flood-") as name:
        tmp = Path(name)
        a = alone(args.mb, tmp)
        os.unlink(tmp / "alone.log")
        s, lag = supervised(args.mb, tmp)
    rate_a, rate_s = a["mb"] / a["s"], s["mb"] / s["s"]
    print(f"log flood, {a['mb']:.0f} MB in 100-byte lines")
    print(f"  alone      {rate_a:8.1f} MB/s")
    print(f"  supervised {rate_s:8.1f} MB/s")
    print(f"  ratio      {rate_s / rate_a:8.2f}  (goal >= 0.8)")
    if lag is not None:
        print(f"  ready line parsed {lag:.1f} s after it was written (the tailer's backlog)")


if __name__ == "__main__":
    main()
