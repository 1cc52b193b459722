from __future__ import annotations

import io

from servedoctor.diagnose import diagnose_text
from servedoctor.diagnose.api import diagnose_stream
from servedoctor.logs.scan import ScanLimits, Scanner

DECODE = "[2025-10-16 09:06:22 TP0] Decode batch. #running-req: 12, #token: 9000, token usage: 0.05, gen throughput (token/s): 1234.5, #queue-req: 0, \n"


def test_scanner_reads_head_and_tail_fully_and_screens_the_middle() -> None:
    limits = ScanLimits(
        block_bytes=4096, head_bytes=8192, tail_bytes=8192, after_hit=1024, block_tail=512
    )
    body = DECODE * 2000
    crash = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    data = (body + crash + body + "tail line\n").encode()
    scanner = Scanner(io.BytesIO(data), limits)
    lines = list(scanner)
    numbers = [line.number for line in lines]
    assert numbers == sorted(set(numbers)), "each line at most once, in order"
    crash_line = 2001
    assert any(line.number == crash_line and "illegal memory" in line.text for line in lines)
    assert lines[-1].text == "tail line" and lines[-1].number == 4002
    assert scanner.stats.lines == 4002
    assert scanner.stats.lines_cleaned < 1500, "the middle is screened, not read line by line"


def test_crash_in_the_middle_of_a_large_log_is_diagnosed_with_its_line_number() -> None:
    body = DECODE * 60_000
    crash = (
        "[2025-10-16 09:07:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '[2025-10-16 09:07:00 TP0]   File "/x/sglang/srt/managers/scheduler.py", line 9, in forward_decode\n'
        "[2025-10-16 09:07:00 TP0]     out = kernel(x)\n"
        "[2025-10-16 09:07:00 TP0] RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    text = body + crash + body
    d = diagnose_stream(io.BytesIO(text.encode()), name="big")
    assert (d.error_class, d.phase) == ("illegal_memory_access", "decode")
    assert any(e.line == 60_004 for e in d.evidence)


def test_healthy_log_has_no_failure() -> None:
    text = (
        "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=1)\n"
        "[2025-01-01 00:00:09] The server is fired up and ready to roll!\n" + DECODE * 10
    )
    d = diagnose_text(text)
    assert d.error_class is None and not d.failed
    assert d.engine == "sglang"


def test_kernel_assertion_in_the_middle_is_found_by_the_screen() -> None:
    limits = ScanLimits(
        block_bytes=4096, head_bytes=8192, tail_bytes=8192, after_hit=1024, block_tail=512
    )
    line = "../aten/src/ATen/native/cuda/Indexing.cu:1093: indexSelectSmallIndex: block: [0,0,0], thread: [1,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
    data = (DECODE * 2000 + line + DECODE * 2000).encode()
    lines = list(Scanner(io.BytesIO(data), limits))
    assert any("Assertion" in x.text and x.number == 2001 for x in lines)
