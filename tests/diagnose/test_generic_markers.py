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
