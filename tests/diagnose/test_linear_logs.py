"""Diagnosis is linear in the input: no step rescans what it has seen, memory is bounded.

Structural checks (counts, bounds, scaling ratios with generous margins), not timings.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator

import pytest

from servedoctor.diagnose import diagnose_text
from servedoctor.diagnose import match as match_module
from servedoctor.diagnose.api import diagnose_stream
from servedoctor.diagnose.observe import Text
from servedoctor.logs import events as events_module
from servedoctor.logs import scan as scan_module
from servedoctor.logs import traceback as traceback_module
from servedoctor.logs.events import MAX_EVENTS, extract
from servedoctor.logs.lines import CUT_MARK, MAX_LINE_BYTES, MAX_LINE_CHARS, Line, clean, decode
from servedoctor.logs.model import Event
from servedoctor.logs.scan import ScanLimits, Scanner

DECODE = "[2025-10-16 09:06:22 TP0] Decode batch. #running-req: 12, #token: 9000, \n"
CRASH = (
    "[2025-10-16 09:07:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/x/sglang/srt/managers/scheduler.py", line 9, in forward_decode\n'
    "    out = kernel(x)\n"
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
)


def request_traceback(i: int) -> str:
    return (
        "ERROR:    Exception in ASGI application\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/sglang/srt/entrypoints/http_server.py", line 512, in chat\n'
        "    return await handler.handle_request(req, raw)\n"
        '  File "/usr/lib/python3/sglang/srt/entrypoints/openai/serving_chat.py", line 88, in handle_request\n'
        "    adapted = self._validate_request(request)\n"
        f"ValueError: Request {i} has {32768 + i} input tokens, more than the context length 32768\n"
    )


# --- the line cleaner --------------------------------------------------------------------


def test_a_long_line_is_cut_at_the_bound_and_the_cut_marked() -> None:
    text = decode(b"x" * (3 * MAX_LINE_BYTES))
    assert text.endswith(CUT_MARK)
    assert len(text) == MAX_LINE_CHARS + len(CUT_MARK)
    # a line cut in bytes whose text stays short still says it was cut
    ansi = decode(b"\x1b[0m" * MAX_LINE_BYTES + b"the end")
    assert ansi.endswith(CUT_MARK) and "the end" not in ansi


def test_a_cut_never_splits_a_character() -> None:
    text = decode("é".encode() * MAX_LINE_BYTES)
    assert "\ufffd" not in text and text.endswith(CUT_MARK)


def test_the_last_state_of_a_long_redrawn_line_is_kept() -> None:
    raw = b"\r".join(b"Loading %6d%%" % i for i in range(30_000)) + b"\rLoading done 10/10\r  "
    assert len(raw) > 4 * MAX_LINE_BYTES
    assert decode(raw) == "Loading done 10/10"


def test_the_scanner_cuts_an_overlong_line_without_holding_it() -> None:
    long_line = b"[2025-10-16 09:06:22 TP0] dump: " + b"tensor(0.5) " * 800_000  # ~9.6 MB
    data = DECODE.encode() + long_line + b"\n" + CRASH.encode()
    limits = ScanLimits(block_bytes=1 << 16, head_bytes=1 << 16, tail_bytes=1 << 17)
    blocks = list(scan_module._blocks(io.BytesIO(data), limits.block_bytes, MAX_LINE_BYTES))
    assert max(len(b) for b, _ in blocks) <= limits.block_bytes + 2 * (MAX_LINE_BYTES + 1)
    assert sum(len(b) + skipped for b, skipped in blocks) == len(data)
    lines = list(Scanner(io.BytesIO(data), limits))
    numbers = [line.number for line in lines]
    assert numbers == sorted(set(numbers)), "each line once, in order"
    dump = next(line for line in lines if line.number == 2)
    assert dump.text.startswith("dump: tensor(0.5)") and dump.text.endswith(CUT_MARK)
    assert any(line.number == 6 and "illegal memory" in line.text for line in lines)


def test_screen_windows_snapped_to_one_long_line_clean_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # hits far apart on the same line used to snap to the whole line, once per hit
    line = (b"x" * 100_000 + b" error ") * 20 + b"\n"
    data = DECODE.encode() * 2000 + line + DECODE.encode() * 2000
    limits = ScanLimits(
        block_bytes=1 << 22, head_bytes=1 << 10, tail_bytes=1 << 10, before_hit=1024
    )
    cleaned: list[int] = []
    real = clean

    def counting(number: int, raw: bytes) -> Line:
        cleaned.append(number)
        return real(number, raw)

    monkeypatch.setattr("servedoctor.logs.scan.clean", counting)
    list(Scanner(io.BytesIO(data), limits))
    assert cleaned.count(2001) == 1
    assert len(cleaned) == len(set(cleaned))


# --- events ------------------------------------------------------------------------------


def _lines(text: str) -> Iterator[Line]:
    for number, raw in enumerate(text.encode().split(b"\n"), start=1):
        yield clean(number, raw)


def test_twenty_thousand_tracebacks_fold_in_one_pass() -> None:
    n = 20_000
    text = "".join(request_traceback(i) for i in range(n)) + CRASH
    events = extract(_lines(text))
    tracebacks = [e for e in events if e.kind == "traceback"]
    value_errors = [e for e in tracebacks if e.fields["exc_type"] == "ValueError"]
    # the first occurrence counts every occurrence; the latest is kept for rules about the
    # end (the very last differs: its message is not followed by the next request's error)
    assert len(value_errors) <= 3
    assert value_errors[0].count >= n - 1
    assert value_errors[0].line == 2 and "Request 0 " in value_errors[0].text
    assert f"Request {n - 1} " in value_errors[-1].text
    assert len(events) < 20


def test_extraction_scales_linearly_with_the_number_of_tracebacks() -> None:
    def seconds(n: int) -> float:
        text = "".join(request_traceback(i) for i in range(n))
        lines = list(_lines(text))
        start = time.perf_counter()
        extract(lines)
        return time.perf_counter() - start

    seconds(200)  # warm the caches of patterns
    small, large = min(seconds(1500) for _ in range(2)), seconds(6000)
    assert large / small < 8, f"time(4n)/time(n) = {large / small:.1f}"


def test_thinning_runs_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = events_module._thin

    def counting(events: list[Event]) -> list[Event]:
        nonlocal calls
        calls += 1
        return real(events)

    monkeypatch.setattr(events_module, "_thin", counting)
    # distinct exception lines never fold and are not low-value: the old thinning ran on
    # every event past MAX_EVENTS
    n = 3 * MAX_EVENTS

    def word(i: int) -> str:
        return "".join(chr(ord("a") + int(d)) for d in str(i))

    text = "\n".join(f"ValueError: bad request {word(i)}" for i in range(n))
    events = extract(_lines(text))
    assert calls <= n // (MAX_EVENTS // 4) + 1
    assert len(events) <= MAX_EVENTS + events_module.TAIL_LINES
    assert events[0].text == "ValueError: bad request a", "the first failure is kept"


def test_tail_lines_covered_by_a_dropped_repeat_stay_covered() -> None:
    text = "".join(request_traceback(i) for i in range(5))
    events = extract(_lines(text))
    assert not [e for e in events if e.kind == "tail"]


# --- rule matching -----------------------------------------------------------------------


def test_a_leading_lazy_any_is_guarded_without_changing_matches() -> None:
    regex = re.compile(r"(?P<name>.*?)\s+needs\s+(?P<n>\d+)-token kernel blocks")
    event = Event(kind="notable", line=1, text="")
    texts = [
        "FlashAttention needs 16-token kernel blocks",
        "nothing here",
        "a needs b",
        " needs 4-token kernel blocks",
        "tensor(0.5) " * 2000,
    ]
    for s in texts:
        got = match_module._search(regex, Text(1, s, event))
        want = regex.search(s)
        assert (got and got.groupdict()) == (want and want.groupdict())
    assert match_module._GUARDS[regex.pattern] is not None


def test_repeated_texts_are_matched_once_per_rule() -> None:
    event = Event(kind="notable", line=1, text="")
    texts = [Text(i, "same line", event) for i in range(1000)]
    texts.append(Text(1001, "same line", event, "frame"))
    lines, frames = match_module._split(texts)
    assert [t.line for t in lines] == [0] and [t.line for t in frames] == [1001]


# --- end to end ----------------------------------------------------------------------------


def test_a_long_line_right_before_the_evidence_does_not_hide_it() -> None:
    long_line = "[2025-10-16 09:07:00 TP0] batch dump: " + "tensor([0.1, nan]) " * 400_000
    text = DECODE * 3000 + long_line + "\n" + CRASH
    d = diagnose_stream(io.BytesIO(text.encode()), name="long")
    assert (d.error_class, d.phase) == ("illegal_memory_access", "decode")


def test_many_request_tracebacks_before_the_crash_are_diagnosed() -> None:
    text = "".join(DECODE + request_traceback(i) for i in range(3000)) + CRASH
    d = diagnose_text(text)
    assert d.error_class is not None


def _cleaned(text: str) -> list[Line]:
    return [clean(n, raw) for n, raw in enumerate(text.encode().splitlines(), start=1)]


def test_a_traceback_flood_reaches_the_full_regexes_once_per_new_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The frames and code lines of tracebacks printed again and again are looked at once:
    only texts not seen lately reach the combined signal and marker searches and the
    structural patterns, so a flood costs about what its new lines cost."""
    calls = {"frame": 0}
    real_frame = traceback_module.FRAME

    class CountingFrame:
        def match(self, text: str) -> re.Match[str] | None:
            calls["frame"] += 1
            return real_frame.match(text)

    monkeypatch.setattr(events_module, "FRAME", CountingFrame())
    events_module._shape.cached.cache_clear()
    flood = "".join(request_traceback(i) for i in range(500)) + CRASH
    lines = _cleaned(flood)
    extractor = events_module.EventExtractor()
    for line in lines:
        list(extractor.feed(line))
    assert len(lines) > 500 * 6
    # one new text per traceback (its exception message), a few more once
    assert extractor.screened <= 500 + 40
    # the new texts, and the line after each exception (it may continue the message)
    assert calls["frame"] <= 2 * 500 + 40
    # a normal log: its repeated per-batch lines take the fast path, never the full searches
    extractor = events_module.EventExtractor()
    for line in _cleaned(DECODE * 2000 + CRASH):
        list(extractor.feed(line))
    assert extractor.screened <= 10


def test_the_combined_prefix_peels_as_the_ordered_list_does() -> None:
    from servedoctor.logs import lines as lines_module

    samples = [
        "[2026-03-02 18:22:10 TP3] Scheduler hit an exception",
        "sglang-1  | [2026-03-02 18:22:10 DP1 TP3] INFO x",
        "(EngineCore_DP0 pid=12) ERROR 03-02 18:22:10 [core.py:12] boom",
        "(VllmWorker rank=2 pid=7) hello",
        "[rank3]: RuntimeError: x",
        "E0302 18:22:10.123 123 file.cc:12] bad",
        "plain text",
    ]
    for sample in samples:
        text, rank, source, level = sample, None, None, None
        for _ in range(3):
            for prefix in lines_module._prefixes():
                m = prefix.regex.match(text)
                if m is None:
                    continue
                groups = m.groupdict()
                text = groups["msg"]
                rank = (groups.get("rank") or "").strip() or rank
                source = groups.get("source") or source
                level = groups.get("level") or level
                break
            else:
                break
        got = lines_module._clean(1, sample.encode())
        assert (got.text, got.level) == (text, level), sample
        assert got.source == source
        if rank is not None:
            assert got.rank == rank
