from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

CONTRACT = [
    "file",
    "error_class",
    "phase",
    "component",
    "culprit",
    "summary",
    "evidence",
    "hypotheses",
]


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servedoctor", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_json_lines_follow_the_contract(examples: Path) -> None:
    proc = run(
        "diagnose",
        "--json",
        str(examples / "glm5-graph-capture-oom.log"),
        str(examples / "vllm-kv-cache-too-small.log"),
    )
    assert proc.returncode == 1
    objects = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(objects) == 2
    for obj in objects:
        assert list(obj) == CONTRACT
        for h in obj["hypotheses"]:
            assert list(h) == ["id", "cause", "confidence", "changes", "references"]
            assert len(h["changes"]) <= 1
            for c in h["changes"]:
                assert set(c) == {"kind", "name", "value"}
        for e in obj["evidence"]:
            assert set(e) == {"line", "text"}
    assert objects[1]["error_class"] == "kv_cache_capacity"


def test_healthy_log_exits_zero(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    log.write_text("[2025-01-01 00:00:09] The server is fired up and ready to roll!\n")
    proc = run("diagnose", "--json", str(log))
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["error_class"] is None


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "no such file"), (b"", "empty file"), (b"\x00\x01\x02ELF\x00\x00" * 50, "binary file")],
)
def test_bad_input_gets_one_line_and_exit_2_while_others_are_diagnosed(
    tmp_path: Path, examples: Path, content: bytes | None, message: str
) -> None:
    bad = tmp_path / "bad.log"
    if content is not None:
        bad.write_bytes(content)
    proc = run("diagnose", "--json", str(bad), str(examples / "glm5-graph-capture-oom.log"))
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["error_class"] == "cuda_oom"


def test_directory_is_bad_input(tmp_path: Path) -> None:
    proc = run("diagnose", str(tmp_path))
    assert proc.returncode == 2 and "directory" in proc.stderr


def test_stdin_is_read_with_dash(examples: Path) -> None:
    data = (examples / "glm5-decode-device-assert.log").read_bytes()
    proc = run("diagnose", "--json", "-", stdin=data)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["phase"] == "decode"


def test_a_pipe_named_as_a_path_is_read_like_a_file(examples: Path, tmp_path: Path) -> None:
    # `servedoctor diagnose <(zcat server.log.gz)`: a FIFO cannot seek back after the check
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    data = (examples / "glm5-decode-device-assert.log").read_bytes()
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    proc = run("diagnose", "--json", str(fifo))
    writer.join(timeout=10)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["phase"] == "decode"


def test_human_output_marks_the_failing_line(examples: Path) -> None:
    proc = run("diagnose", str(examples / "glm5-decode-device-assert.log"))
    assert proc.returncode == 1
    assert "E 109 |" in proc.stdout
    assert "CUDA_LAUNCH_BLOCKING=1" in proc.stdout


def test_unknown_engine_is_a_usage_error(examples: Path) -> None:
    proc = run("diagnose", "--engine", "nope", str(examples / "glm5-graph-capture-oom.log"))
    assert proc.returncode == 2


def test_rules_list_show_and_unknown() -> None:
    listing = run("rules")
    assert listing.returncode == 0 and "OOM001" in listing.stdout
    shown = run("rules", "show", "OOM001")
    assert shown.returncode == 0
    for section in ("What it does", "Why it fails", "How to fix it", "References"):
        assert section in shown.stdout
    record = json.loads(run("rules", "show", "OOM001", "--json").stdout)
    assert record["id"] == "OOM001" and record["references"]
    missing = run("rules", "show", "NOPE999")
    assert missing.returncode == 2 and "no rule" in missing.stderr


def test_rules_test_passes() -> None:
    proc = run("rules", "test")
    assert proc.returncode == 0 and " 0 failed" in proc.stdout


def test_eval_json(corpus: Path) -> None:
    proc = run("eval", "--json", str(corpus))
    assert proc.returncode == 0
    report = json.loads(proc.stdout)
    assert report["cases"] >= 40 and report["accuracy"]["error_class"] >= 0.9


@pytest.mark.parametrize("args", [("diagnose", "--bogus", "x"), ("nosuchverb",), ("rules", "show")])
def test_usage_errors_are_one_line_and_exit_2(args: tuple[str, ...]) -> None:
    proc = run(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("servedoctor: ")
    assert "Traceback" not in proc.stderr


def test_version_and_the_hint_for_a_server_option_given_before_the_separator() -> None:
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("servedoctor ")
    misplaced = run("launch", "--port", "8000")
    assert misplaced.returncode == 2
    assert "put the server command after --" in misplaced.stderr
    assert len(misplaced.stderr.strip().splitlines()) == 1
