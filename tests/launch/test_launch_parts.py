"""The launch building blocks on their own: log splitting, timeline, endpoint, failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from servedoctor.engines import get_engine
from servedoctor.errors import UserError
from servedoctor.launch.endpoint import endpoint_for
from servedoctor.launch.failure import complete
from servedoctor.launch.rundir import LineSplitter, make_run_dir, redact_bytes
from servedoctor.launch.timeline import Timeline
from servedoctor.launch.types import Failure
from servedoctor.model import Diagnosis


def _split(chunks: list[bytes]) -> list[bytes]:
    s = LineSplitter()
    out = [p for c in chunks for p in s.feed(c)]
    return out + list(s.flush())


def test_splitter_keeps_bytes_and_handles_progress_bars() -> None:
    chunks = [b"Loading weights:  50%|##   | 1/2\rLoading", b" weights: 100%| 2/2\r", b"\nok\n"]
    pieces = _split(chunks)
    assert b"".join(pieces) == b"".join(chunks)
    assert pieces[0] == b"Loading weights:  50%|##   | 1/2\r"


def test_splitter_does_not_split_crlf_across_reads() -> None:
    assert _split([b"a\r", b"\nb\n"]) == [b"a\r\n", b"b\n"]


def test_redact_bytes_masks_and_keeps_bad_utf8() -> None:
    assert redact_bytes(b"\xff key hf_abcdefghijklmnopqrstuvwxyz\n") == b"\xff key ***\n"
    assert redact_bytes(b"\xffplain\n") == b"\xffplain\n"


def test_run_dirs_never_collide(tmp_path: Path) -> None:
    a = make_run_dir(tmp_path, "vllm")
    b = make_run_dir(tmp_path, "vllm")
    assert a != b and a.is_dir() and b.is_dir() and a.name.endswith("-vllm")


def test_timeline_from_sglang_lines() -> None:
    tl = Timeline(get_engine("sglang"), t0=100.0)
    tl.feed(1, "[2025] Load weight begin. avail mem=78.50 GB", 101.0)
    f = tl.feed(2, "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01]", 102)
    assert f.progress is not None and f.progress.fraction == 0.5
    tl.feed(
        3,
        "\x1b[32mLoad weight end. type=X, dtype=bf16, avail mem=60.1 GB, mem usage=18.4 GB",
        103.0,
    )
    f = tl.feed(4, "Scheduler hit an exception: Traceback", 104.0)
    assert f.fatal and tl.fatal_line == (4, "Scheduler hit an exception: Traceback")
    assert [s.name for s in tl.spans()] == ["startup", "load", "memory_setup"]
    assert tl.spans()[1].start == pytest.approx(1.0) and tl.spans()[1].end == pytest.approx(3.0)
    assert tl.memory_gib["mem usage"] == pytest.approx(18.4e9 / 2**30)


def test_endpoint_from_flags() -> None:
    spec = get_engine("vllm")
    ep = endpoint_for(spec, ["vllm", "serve", "m", "--host", "0.0.0.0", "--port=9001"])
    assert ep.base_url == "http://127.0.0.1:9001"
    assert endpoint_for(spec, ["vllm", "serve", "m"]).port == 8000
    with pytest.raises(UserError):
        endpoint_for(spec, ["vllm", "serve", "m", "--port", "x"])


def _guessed(log: Path, text: str, error_class: str, phase: str, source: str) -> Diagnosis:
    """A diagnosis whose class the log only suggested (``extras.class_source``)."""
    log.write_text(text)
    return Diagnosis(
        file=str(log),
        error_class=error_class,
        phase=phase,
        component="unknown",
        culprit=None,
        summary=f"{error_class} during {phase}",
        extras={"class_source": source},
    )


def test_a_hang_the_supervisor_saw_beats_a_class_the_precedents_guessed(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    guessed = _guessed(log, "starting\nsomething could not be done\n", "other", "startup",
                       "precedents")  # fmt: skip
    stuck = Failure("request_timeout", "serving", "no answer in 30 s", 40.0)
    assert complete(guessed, stuck, log=log, engine="transformers").error_class == "hang"
    exited = Failure("process_exit", "load", "exit 1", 3.0)
    assert complete(guessed, exited, log=log, engine="transformers").error_class == "other"


def test_failure_fills_an_empty_diagnosis(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a\nb\n\nlast line\n")
    empty = Diagnosis(
        file=str(log), error_class=None, phase=None, component=None, culprit=None, summary=""
    )
    hang = complete(
        empty,
        Failure("request_timeout", "serving", "no answer", 3.0),
        log=log,
        engine="transformers",
    )
    assert hang.error_class == "hang" and hang.phase == "serving"
    assert hang.evidence[-1].line == 4 and hang.evidence[-1].text == "last line"
    found = Diagnosis(
        file=str(log),
        error_class="cuda_oom",
        phase=None,
        component="memory",
        culprit=None,
        summary="OOM",
    )
    kept = complete(found, Failure("process_exit", "load", "exit 1", 3.0), log=log, engine="x")
    assert kept.error_class == "cuda_oom" and kept.phase == "load"
