"""Diagnosis throughput and memory on a large generated SGLang log (not a test).

Writes a log of realistic SGLang serving lines (per-rank prefill/decode batches, HTTP access
lines, a periodic warning) with a crash near the end, then times
``servedoctor diagnose --json`` on it in a child process, reads the child's peak RSS, and
compares with ``grep -c`` over the same file in the same run.

    python bench/log_throughput.py [--size-mb 1024] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = (
    "[2026-03-02 14:20:01] server_args=ServerArgs(model_path='/models/GLM-5-NVFP4', "
    "kv_cache_dtype='fp8_e4m3', mem_fraction_static=0.88, tp_size=8, attention_backend='flashinfer')\n"
    + "".join(f"[2026-03-02 14:20:12 TP{r}] Load weight begin. avail mem=94.17 GB\n" for r in range(8))
    + "".join(
        f"[2026-03-02 14:20:46 TP{r}] KV Cache is allocated. #tokens: 425664, KV size: 24.37 GB\n"
        for r in range(8)
    )
    + "[2026-03-02 14:21:34] The server is fired up and ready to roll!\n"
)
CRASH = (
    "[2026-03-02 18:22:10 TP3] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/sglang/srt/managers/scheduler.py", line 1041, in event_loop_overlap\n'
    "    self.process_batch_result(tmp_batch, tmp_result)\n"
    '  File "/usr/lib/python3/sglang/srt/managers/scheduler_output_processor_mixin.py", line 318, '
    "in process_batch_result_decode\n"
    "    copy_done.synchronize()\n"
    "torch.AcceleratorError: CUDA error: device-side assert triggered\n"
    "[2026-03-02 18:22:10] Received sigquit from a child process. It usually means the child failed.\n"
)


def block(i: int) -> str:
    s = i % 60
    lines = []
    for r in range(8):
        lines.append(
            f"[2026-03-02 15:{(i // 60) % 60:02d}:{s:02d} TP{r}] Decode batch. #running-req: {i % 97}, "
            f"#token: {i * 13 % 400000}, token usage: 0.{i % 99:02d}, cuda graph: True, "
            f"gen throughput (token/s): {1000 + i % 777}.{i % 10}, #queue-req: 0, \n"
        )
    if i % 5 == 0:
        lines.append(
            f"[2026-03-02 15:00:{s:02d} TP0] Prefill batch. #new-seq: 1, #new-token: {i % 900}, "
            f"#cached-token: {i % 300}, token usage: 0.01, #running-req: {i % 97}, #queue-req: 0, \n"
        )
        lines.append(
            f'[2026-03-02 15:00:{s:02d}] INFO:     127.0.0.1:{40000 + i % 20000} - '
            '"POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        )
    if i % 5000 == 0:
        lines.append(f"[2026-03-02 15:00:{s:02d}] WARNING: request {i} exceeded soft deadline\n")
    return "".join(lines)


def write_log(path: Path, size: int) -> int:
    written = 0
    with path.open("w") as f:
        f.write(HEADER)
        chunk: list[str] = []
        i = 0
        while written < size - 8192:
            chunk.append(block(i))
            i += 1
            if len(chunk) == 2000:
                data = "".join(chunk)
                f.write(data)
                written += len(data)
                chunk = []
        f.write("".join(chunk))
        f.write(CRASH)
        f.write(block(i))
    return path.stat().st_size


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sd-bench-"))
    log = tmp / "big-sglang.log"
    t0 = time.perf_counter()
    size = write_log(log, args.size_mb << 20)
    print(f"generated {size / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s: {log}")

    # warm the page cache for both readers alike
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)
    grep_s, grep = timed(["grep", "-c", "Traceback", str(log)])
    sd_s, sd = timed([sys.executable, "-m", "servedoctor", "diagnose", "--json", str(log)])
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if sd.returncode not in (0, 1):
        print(sd.stderr)
        raise SystemExit("servedoctor failed")
    diagnosis = json.loads(sd.stdout)
    print(f"diagnosis: {diagnosis['error_class']} / {diagnosis['phase']} / {diagnosis['component']}")
    print(f"grep -c:      {grep_s:7.2f} s  {size / grep_s / 1e6:8.0f} MB/s  (count {grep.stdout.strip()})")
    print(f"servedoctor:  {sd_s:7.2f} s  {size / sd_s / 1e6:8.0f} MB/s  (goal >= 100 MB/s)")
    print(f"ratio servedoctor/grep time: {sd_s / grep_s:.1f}x")
    print(f"peak RSS of children (max of grep, servedoctor): {peak_kib / 1024:.0f} MiB (goal < 200 MiB)")
    if not args.keep:
        log.unlink()
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
