"""Bad input at the edges: stdin checked like a file, undecodable rule files, and terminal
control sequences from a server's log kept off the user's terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from servedoctor.errors import UserError
from servedoctor.knowledge.registry import load_rules
from servedoctor.launch.display import printable


def _diagnose_stdin(data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "servedoctor", "diagnose", "-"],
        input=data,
        capture_output=True,
        timeout=60,
    )


@pytest.mark.parametrize(("data", "says"), [(b"", b"empty"), (bytes(range(256)) * 8, b"binary")])
def test_stdin_gets_the_same_checks_as_a_file(data: bytes, says: bytes) -> None:
    proc = _diagnose_stdin(data)
    assert proc.returncode == 2
    assert says in proc.stderr and b"Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_stdin_text_is_diagnosed_whole_after_the_check() -> None:
    head = b"INFO starting\n" * 2000  # more than the bytes the check reads first
    proc = _diagnose_stdin(head + b"RuntimeError: CUDA error: out of memory\n")
    assert proc.returncode == 1, proc.stderr
    assert b"cuda_oom" in proc.stdout


def test_a_rule_file_that_is_not_utf8_is_one_line_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"- id: X001\n  name: caf\xe9\n")
    with pytest.raises(UserError, match=r"bad\.yaml: not UTF-8"):
        load_rules(tmp_path)


def test_terminal_control_from_the_server_is_removed() -> None:
    title = "\x1b]0;pwned\x07"
    colour = "\x1b[31mred\x1b[0m"
    line = f"{title}ready {colour}\x08\x07 done\r"
    shown = printable(line)
    assert shown == "ready red done"
    assert (
        "\x1b" not in printable("\x1b[2J\x1b[H\x1bc" + "x")
        and printable("tab\tkept") == "tab\tkept"
    )


def test_a_broken_rule_file_stops_launch_before_any_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from servedoctor.cli import app
    from servedoctor.knowledge import registry

    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "bad.yaml").write_text("- id: NOPE\n  what: [unclosed\n")
    monkeypatch.setattr(registry, "RULES_DIR", rules)
    registry.default_registry.cache_clear()
    marker = tmp_path / "started"
    server = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    try:
        r = CliRunner().invoke(
            app,
            ["launch", "--exit-after-smoke", "--runs-dir", str(tmp_path / "runs"), "--", *server],
        )
    finally:
        registry.default_registry.cache_clear()
    assert isinstance(r.exception, UserError) and "bad.yaml" in str(r.exception)
    assert not marker.exists() and not (tmp_path / "runs").exists()
