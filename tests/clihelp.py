"""Shared by the CLI tests in this folder: a machine with no config or state of its own, and
the CLI run in-process as a user runs it (exit code, stdout, stderr)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servedoctor.cli.app import run_app


def isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cwd: str) -> None:
    """HOME and the XDG folders under ``tmp_path``, no servedoctor env vars, cwd inside."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("SERVEDOCTOR_RUNS_DIR", raising=False)
    monkeypatch.delenv("SERVEDOCTOR_STORE", raising=False)
    (tmp_path / cwd).mkdir()
    monkeypatch.chdir(tmp_path / cwd)


def sd(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        run_app(list(argv))
    cap = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 0), cap.out, cap.err
