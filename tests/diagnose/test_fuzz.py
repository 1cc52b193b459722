"""The parsers never raise, whatever bytes they are fed."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servedoctor.diagnose.api import diagnose_stream

FRAGMENTS = [
    b"Traceback (most recent call last):\n",
    b'  File "/x/sglang/srt/model_executor/model_runner.py", line 9, in forward_decode\n',
    b"    out = kernel(x)\n",
    b"RuntimeError: CUDA error: device-side assert triggered\n",
    b"During handling of the above exception, another exception occurred:\n",
    b"Indexing.cu:1093: indexSelectSmallIndex: block: [0,0,0], thread: [1,0,0] Assertion `a` failed.\n",
    b"[2025-10-16 09:06:22 TP3] Decode batch. #running-req: 1\n",
    b"server_args=ServerArgs(model_path='m', kv_cache_dtype='fp8_e4m3'\n",
    b"\xe2\x94\x82 /x/a.py:1 in f \xe2\x94\x82\n",
    b"\x1b[31m\r\r\n",
    b"Thread 0x00007f (most recent call first):\n",
    b"frame #0: c10::Error::Error() + 0x96 (0x7f in /x/libc10.so)\n",
    b"\xff\xfe\x00",
]


def run(data: bytes) -> None:
    d = diagnose_stream(io.BytesIO(data), name="fuzz")
    assert d.error_class is None or isinstance(d.error_class, str)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_random_bytes(data: bytes) -> None:
    run(data)


@settings(deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60), st.integers(min_value=0, max_value=200))
def test_shuffled_and_truncated_log_fragments(parts: list[bytes], cut: int) -> None:
    data = b"".join(parts)
    run(data[: len(data) - cut] if cut < len(data) else data)


def test_ten_megabyte_single_line() -> None:
    run(b"x" * (10 << 20) + b" RuntimeError: CUDA error: an illegal memory access was encountered")


def test_hundred_thousand_line_assertion_flood_and_unterminated_traceback() -> None:
    flood = (
        b"Indexing.cu:1093: k: block: [0,0,0], thread: [1,0,0] Assertion `i < n` failed.\n"
        * 100_000
    )
    run(flood + b'Traceback (most recent call last):\n  File "/x.py", line 1, in f\n')
