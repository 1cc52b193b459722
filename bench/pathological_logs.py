"""Diagnosis time and memory on pathological logs, against a normal log (not a test).

Generates into a temp dir, then diagnoses each log with
``servedoctor.diagnose.diagnose_path`` in its own child process and reports seconds, MB/s
and the child's peak RSS (``getrusage(RUSAGE_CHILDREN)``, read after each child, so each
case is run in a fresh helper process). Cases:

* ``normal``: an SGLang serving log with a crash near the end (``log_throughput.py``'s);
* ``one-line``: the same bytes on a single line, then the crash;
* ``tracebacks``: many separate tracebacks, one per failed request;
* ``frames``: one traceback with a million frames;
* ``long-line``: a 64 MB line right before the evidence.

Each case's time per MB is compared with the normal log's (goal ≤ 2×), and its peak RSS
with 200 MB.

    python bench/pathological_logs.py [--size-mb 200] [--tracebacks 100000]
        [--frames 1000000] [--line-mb 64] [--only CASE,...] [--keep]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent


def _throughput_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("log_throughput", HERE / "log_throughput.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LT = _throughput_module()

REQUEST_TB = (
    "[2026-03-02 15:{m:02d}:{s:02d}] ERROR:    Exception in ASGI application\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/uvicorn/protocols/http/httptools_impl.py", line 409, '
    "in run_asgi\n"
    "    result = await app(self.scope, self.receive, self.send)\n"
    '  File "/usr/lib/python3/sglang/srt/entrypoints/http_server.py", line 512, '
    "in openai_v1_chat_completions\n"
    "    return await raw_request.app.state.openai_serving_chat.handle_request(req, raw)\n"
    '  File "/usr/lib/python3/sglang/srt/entrypoints/openai/serving_chat.py", line 88, '
    "in handle_request\n"
    "    adapted = self._validate_request(request)\n"
    "ValueError: Request {i} has {n} input tokens, more than the context length 32768\n"
)


def gen_normal(path: Path, size: int) -> None:
    LT.write_log(path, size)


def gen_one_line(path: Path, size: int) -> None:
    with path.open("w") as f:
        f.write(LT.HEADER)
        written, i = 0, 0
        while written < size - 8192:
            data = "".join(LT.block(j) for j in range(i, i + 2000)).replace("\n", " | ")
            i += 2000
            f.write(data)
            written += len(data)
        f.write("\n")
        f.write(LT.CRASH)


def gen_tracebacks(path: Path, count: int) -> None:
    with path.open("w") as f:
        f.write(LT.HEADER)
        for i in range(count):
            f.write(LT.block(i))
            f.write(REQUEST_TB.format(m=(i // 60) % 60, s=i % 60, i=i, n=32768 + i % 5000))
        f.write(LT.CRASH)


def gen_frames(path: Path, count: int) -> None:
    with path.open("w") as f:
        f.write(LT.HEADER)
        f.write("[2026-03-02 18:22:10 TP3] Scheduler hit an exception: ")
        f.write("Traceback (most recent call last):\n")
        frame = (
            '  File "/usr/lib/python3/sglang/srt/layers/recurse.py", line {n}, in step\n'
            "    return self.step(depth - 1)\n"
        )
        for start in range(0, count, 10_000):
            f.write("".join(frame.format(n=100 + k % 50) for k in range(start, start + 10_000)))
        f.write("RecursionError: maximum recursion depth exceeded\n")
        f.write(LT.CRASH)


def gen_long_line(path: Path, size: int) -> None:
    with path.open("w") as f:
        f.write(LT.HEADER)
        f.write("".join(LT.block(i) for i in range(2000)))
        f.write("[2026-03-02 18:22:09 TP3] batch dump: ")
        piece = "tensor([0.1234, 0.5678, nan, 0.9012], device='cuda:3') " * 1000
        written = 0
        while written < size:
            f.write(piece)
            written += len(piece)
        f.write("\n")
        f.write(LT.CRASH)
        f.write(LT.block(2001))


CHILD = """
import json, resource, sys, time
from servedoctor.diagnose import diagnose_path
t = time.perf_counter()
d = diagnose_path(sys.argv[1])
s = time.perf_counter() - t
print(json.dumps({"s": s, "class": d.error_class, "phase": d.phase,
    "component": d.component, "events": d.extras.get("events")}))
"""


def run_case(path: Path) -> dict[str, object]:
    """Diagnose in a helper that runs the child, so RUSAGE_CHILDREN is this case's alone."""
    helper = (
        "import resource, subprocess, sys\n"
        f"p = subprocess.run([sys.executable, '-c', {CHILD!r}, sys.argv[1]], "
        "capture_output=True, text=True)\n"
        "sys.stderr.write(p.stderr)\n"
        "print(p.stdout.strip())\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", helper, str(path)], capture_output=True, text=True, check=False
    )
    out = proc.stdout.strip().splitlines()
    if len(out) < 2 or not out[0].startswith("{"):
        raise SystemExit(f"{path.name}: diagnosis failed\n{proc.stderr[-3000:]}")
    result: dict[str, object] = json.loads(out[0])
    result["rss_mb"] = int(out[1]) / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200, help="normal and one-line logs")
    parser.add_argument("--tracebacks", type=int, default=100_000)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--line-mb", type=int, default=64)
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--keep", action="store_true", help="keep the generated logs")
    args = parser.parse_args()
    size = args.size_mb << 20
    cases: dict[str, Callable[[Path], None]] = {
        "normal": lambda p: gen_normal(p, size),
        "one-line": lambda p: gen_one_line(p, size),
        "tracebacks": lambda p: gen_tracebacks(p, args.tracebacks),
        "frames": lambda p: gen_frames(p, args.frames),
        "long-line": lambda p: gen_long_line(p, args.line_mb << 20),
    }
    wanted = [c for c in args.only.split(",") if c] or list(cases)
    if "normal" not in wanted:
        wanted.insert(0, "normal")
    tmp = Path(tempfile.mkdtemp(prefix="sd-patho-"))
    base_s_per_mb = 0.0
    print(f"{'case':<11} {'MB':>7} {'s':>8} {'MB/s':>7} {'×normal':>8} {'RSS MB':>7}  diagnosis")
    try:
        for name in wanted:
            path = tmp / f"{name}.log"
            cases[name](path)
            mb = path.stat().st_size / 1e6
            r = run_case(path)
            seconds = float(r["s"])  # type: ignore[arg-type]
            per_mb = seconds / mb
            if name == "normal":
                base_s_per_mb = per_mb
            ratio = per_mb / base_s_per_mb if base_s_per_mb else float("nan")
            rss = float(r["rss_mb"])  # type: ignore[arg-type]
            flags = ("" if ratio <= 2 else " time>2×") + ("" if rss < 200 else " RSS>200MB")
            print(
                f"{name:<11} {mb:7.1f} {seconds:8.2f} {mb / seconds:7.1f} {ratio:8.2f} "
                f"{rss:7.0f}  {r['class']}/{r['phase']}/{r['component']} "
                f"events={r['events']}{flags}",
                flush=True,
            )
            if not args.keep:
                path.unlink()
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"logs kept in {tmp}")


if __name__ == "__main__":
    main()
