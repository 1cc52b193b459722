"""The log excerpt reads by chunks and from the end: line numbers must be exact anyway."""

from __future__ import annotations

from pathlib import Path

import pytest

from servedoctor.model import Evidence
from servedoctor.report import logexcerpt
from servedoctor.report.evidence import infer_roles
from servedoctor.report.logexcerpt import excerpt, scan, tail_lines


@pytest.mark.parametrize("chunk", [3, 7, 64, 1 << 20])
@pytest.mark.parametrize("ending", ["", "\n"])
def test_lines_by_number_across_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, ending: str
) -> None:
    monkeypatch.setattr(logexcerpt, "_CHUNK", chunk)
    lines = [f"line {i} " + "x" * (1 + i % 11) for i in range(1, 201)]
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + ending, encoding="utf-8")
    found, total = scan(log, [1, 57, 58, 200, 500])
    assert total == 200
    assert found == {1: lines[0], 57: lines[56], 58: lines[57], 200: lines[199]}
    assert tail_lines(log, 3, total=total) == lines[-3:]


def test_excerpt_marks_and_gaps(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"l{i}\n" for i in range(1, 101)), encoding="utf-8")
    rows = excerpt(log, {20: "error", 5: "clue"}, radius=1, tail=2)
    numbers = [r.number for r in rows if r.role != "gap"]
    assert numbers == [5, 19, 20, 21, 99, 100]
    assert [r.role for r in rows if r.number in (5, 20)] == ["clue", "error"]
    assert [r.text for r in rows if r.role == "gap"] == ["4 lines", "13 lines", "77 lines"]


def test_progress_bar_line_shows_its_last_state(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"Loading 10%\rLoading 50%\rLoading 100%\nnext\n")
    assert scan(log, [1])[0] == {1: "Loading 100%"}


def test_roles_inferred_for_a_stored_diagnosis() -> None:
    stored = (
        Evidence(3, "[TP0] Capture cuda graph begin."),
        Evidence(9, '  File "model_runner.py", line 322, in __init__'),
        Evidence(12, "torch.OutOfMemoryError: CUDA out of memory."),
    )
    assert [e.role for e in infer_roles(stored)] == ["clue", "frame", "error"]
    kept = (Evidence(1, "x", "frame"), Evidence(2, "y", "error"))
    assert infer_roles(kept) == kept
