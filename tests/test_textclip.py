from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from servedoctor.textclip import ELLIPSIS, clip


def test_cut_at_a_word_boundary() -> None:
    assert clip("CUDA out of memory. Tried to allocate", 20) == "CUDA out of memory." + ELLIPSIS
    assert clip("short enough", 20) == "short enough"
    assert clip("x" * 50, 10) == "x" * 9 + ELLIPSIS


@given(st.text(alphabet="ab cd\t\n", max_size=80), st.integers(min_value=2, max_value=60))
def test_never_longer_and_never_a_broken_word(text: str, limit: int) -> None:
    out = clip(text, limit)
    assert len(out) <= limit
    words = text.split()
    if out.endswith(ELLIPSIS) and " " in out:
        kept = out[: -len(ELLIPSIS)].split()
        assert kept == words[: len(kept)]
