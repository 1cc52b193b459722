from __future__ import annotations

import pytest

from servedoctor.diagnose.observe import untypeset
from servedoctor.logs.lines import clean, decode


def test_ansi_codes_are_removed() -> None:
    assert decode(b"\x1b[31;1mERROR\x1b[0m boom") == "ERROR boom"


def test_carriage_return_progress_bar_keeps_last_state() -> None:
    raw = b"Loading  10% 1/10\rLoading  50% 5/10\rLoading 100% 10/10"
    assert decode(raw) == "Loading 100% 10/10"


def test_crlf_line_end_is_not_a_redraw() -> None:
    assert (
        decode(b"Uvicorn running on http://0.0.0.0:8000\r")
        == "Uvicorn running on http://0.0.0.0:8000"
    )


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert decode(b"bad \xff\xfe bytes") == "bad \ufffd\ufffd bytes"


@pytest.mark.parametrize(
    ("raw", "text", "rank"),
    [
        (
            b"[2025-10-16 09:06:22 TP3] Load weight begin. avail mem=76.1 GB",
            "Load weight begin. avail mem=76.1 GB",
            "TP3",
        ),
        (
            b"[2025-10-16 09:06:22 DP0 TP5 EP5] Decode batch. #running-req: 1",
            "Decode batch. #running-req: 1",
            "DP0 TP5 EP5",
        ),
        (
            b"(EngineCore_DP0 pid=812) ERROR 10-25 13:12:42 [core.py:710] EngineCore failed",
            "EngineCore failed",
            "DP0",
        ),
        (
            b"(Worker_TP0 pid=813) INFO 10-25 13:12:42 [gpu_model_runner.py:1] Loading",
            "Loading",
            "TP0",
        ),
        (b"(VllmWorker rank=0 pid=5) INFO 01-01 00:00:00 [a.py:1] hi", "hi", "rank=0"),
        (b"ERROR 11-18 18:07:28 engine.py:366] ValueError: x", "ValueError: x", None),
        (
            b"[rank3]:[E830 17:28:57.1 ProcessGroupNCCL.cpp:1515] timeout",
            "[E830 17:28:57.1 ProcessGroupNCCL.cpp:1515] timeout",
            "rank3",
        ),
        (
            b"[2026-02-26 05:19:58] WARNING server_args.py:1177: Set NSA backends",
            "Set NSA backends",
            None,
        ),
        (b"sglang-1  | [2025-10-29 11:25:58 TP3] Watchdog timeout", "Watchdog timeout", "TP3"),
        (
            b"INFO 2025-11-19T20:16:36.096638074Z [resource.labels.containerName: vllm] "
            b"(EngineCore_DP0 pid=270) ERROR 11-19 12:16:36 [v1/engine/core.py:842] "
            b"torch.OutOfMemoryError: CUDA out of memory.",
            "torch.OutOfMemoryError: CUDA out of memory.",
            "DP0",
        ),
        (
            b"ERROR:    (Worker_TP1 pid=3534) ERROR 10-11 22:28:17 [multiproc_executor.py:694] "
            b"RuntimeError: Could not find nvcc",
            "RuntimeError: Could not find nvcc",
            "TP1",
        ),
        (b"38.24.611.612 E CUDA error: x", "CUDA error: x", None),
        (b"[4711] 38.24.611.612 E msg", "msg", None),
        # a desktop app relaying llama-server's own prefixed stream
        (
            b"INFO [llamacpp-router stdout] [45979] 0.01.047.215 E alloc failed",
            "alloc failed",
            None,
        ),
        # FastChat's and loguru's pipe columns; indentation of a traceback frame is kept
        (
            b'2025-03-24 22:04:27 | ERROR | stderr |   File "/x/w.py", line 5, in f',
            '  File "/x/w.py", line 5, in f',
            None,
        ),
        (b"2024-05-01 10:00:00.123 | ERROR    | app.main:run:42 - boom", "boom", None),
        # journald (any locale's month) and dmesg's ISO time
        (b"Jun 27 22:57:41 stealth16 systemd-ollama[44353]: msg", "msg", None),
        ("7\u6708 08 11:11:34 dar ollama[5991]: #4 f".encode(), "#4 f", None),
        (b"2026-04-07T10:11:08,080132-04:00 NVRM: Xid 43", "NVRM: Xid 43", None),
        (
            b"[2024-04-17 20:07:13,727] [ERROR] [MainThread] [asyncio] >>>     assert x",
            "    assert x",
            None,
        ),
    ],
)
def test_prefixes_are_peeled(raw: bytes, text: str, rank: str | None) -> None:
    line = clean(1, raw)
    assert line.text == text
    assert line.rank == rank


def test_tgi_json_line_gives_message_and_level() -> None:
    raw = b'{"timestamp":"2024-01-01T00:00:00Z","level":"ERROR","fields":{"message":"Shard 0 failed to start"},"target":"text_generation_launcher"}'
    line = clean(7, raw)
    assert (line.text, line.level, line.number) == ("Shard 0 failed to start", "ERROR", 7)


def test_traceback_indentation_survives_prefix_removal() -> None:
    line = clean(
        1, b'ERROR 11-18 18:07:28 engine.py:366]   File "/x/vllm/worker.py", line 493, in f'
    )
    assert line.text.startswith('  File "/x/vllm/worker.py"')


@pytest.mark.parametrize(
    ("pasted", "printed"),
    [
        (
            "error: unexpected argument \u2018\u2013max-input-tokens\u2019 found",
            "error: unexpected argument '--max-input-tokens' found",
        ),
        ("unrecognized arguments: \u2014tp 2", "unrecognized arguments: --tp 2"),
        (
            "releases 0.8\u20130.10 and sm_80\u2013sm_90",
            "releases 0.8\u20130.10 and sm_80\u2013sm_90",
        ),
        ("a pause \u2013 then a crash", "a pause \u2013 then a crash"),
    ],
)
def test_typeset_dashes_and_quotes_read_as_the_program_printed_them(
    pasted: str, printed: str
) -> None:
    assert untypeset(pasted) == printed


@pytest.mark.parametrize(
    ("printed", "read"),
    [
        ("Erreur de segmentation", "Segmentation fault"),
        ("Erreur de segmentation (image mémoire écrite)", "Segmentation fault (core dumped)"),
        ("段错误 (核心已转储)", "Segmentation fault (core dumped)"),
        (
            "bash: line 1:  123 Speicherzugriffsfehler  ./llama-server -m m.gguf",
            "bash: line 1:  123 Segmentation fault  ./llama-server -m m.gguf",
        ),
        ("Instruction illégale (core dumped)", "Illegal instruction (core dumped)"),
        ("Il faut Abandon le projet", "Il faut Abandon le projet"),
    ],
)
def test_a_signal_named_in_another_locale_reads_in_english(printed: str, read: str) -> None:
    assert clean(1, printed.encode()).text == read
