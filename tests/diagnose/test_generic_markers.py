"""A server we know nothing about still says what it is doing in plain words."""

from __future__ import annotations

import pytest

from servedoctor.diagnose import diagnose_text

ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered\n"


@pytest.mark.parametrize(
    ("line", "phase"),
    [
        ("Starting model warm up, please wait a moment...", "warmup"),
        ("Loading model weights from /models/x", "load"),
        ("Capturing CUDA graphs for 12 batch sizes", "graph_capture"),
        ("Allocating the KV cache: 2048 blocks", "memory_setup"),
    ],
)
def test_plain_words_mark_the_phase_of_an_unknown_server(line: str, phase: str) -> None:
    d = diagnose_text(f"myserver 1.0 starting\n{line}\n{ERROR}")
    assert d.engine in (None, "openai")
    assert d.phase == phase


def test_a_word_inside_a_message_is_not_a_phase() -> None:
    d = diagnose_text(f"myserver: the cache of loaded tokenizers is empty\n{ERROR}")
    assert d.phase == "serving"  # the class default for a kernel fault, no marker


def test_a_start_up_markers_words_inside_the_error_line_do_not_date_it() -> None:
    log = (
        "[2025-10-01 10:00:00] The server is fired up and ready to roll!\n"
        "[2025-10-01 10:05:00] ValueError: token_to_kv_pool_allocator memory leak detected! "
        "self.max_total_num_tokens=270331, available_size=644\n"
    )
    assert diagnose_text(log).phase == "serving"


def test_a_request_span_on_the_error_line_names_its_step() -> None:
    log = (
        "2025-05-26T10:46:34.691973Z ERROR batch{batch_size=1}:prefill:prefill{id=620 size=1}: "
        "text_generation_router_v3::client: Server error: CUDA error: an illegal memory access "
        "was encountered\n"
    )
    assert diagnose_text(log).phase == "prefill"


def test_uvicorn_start_up_lines_name_no_engine() -> None:
    # every FastAPI server prints these; a server of its own that does must not be read as
    # one of ours (transformers serve lists them among its phases too)
    log = (
        "INFO:     Started server process [5078]\n"
        "INFO:     Waiting for application startup.\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    assert diagnose_text(log).engine is None
