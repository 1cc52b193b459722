"""Config files: precedence (option > env var > project file > user file > default) and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clihelp import isolate, sd
from servedoctor import config
from servedoctor.errors import UserError


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(tmp_path, monkeypatch, "proj")
    return tmp_path


def user_file(home: Path, text: str) -> Path:
    path = home / "config" / "servedoctor" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_builtin_defaults(home: Path) -> None:
    s = config.effective()
    assert {k: v.source for k, v in s.items()} == dict.fromkeys(config.KEYS, "default")
    assert s["runs_dir"].value == str(home / "state" / "servedoctor" / "runs")
    assert s["store"].value == str(home / "data" / "servedoctor" / "findings.db")
    assert (s["request_timeout"].value, s["grace"].value, s["startup_timeout"].value) == (
        60.0,
        10.0,
        None,
    )
    assert config.default_store() is None and config.config_env() == {}


def test_xdg_state_home_unset_falls_back_to_home(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_STATE_HOME")
    assert config.default_runs_dir() == home / "home" / ".local" / "state" / "servedoctor" / "runs"


def test_precedence(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    user = user_file(
        home,
        'runs_dir = "/u/runs"\nstore = "/u/f.db"\nrequest_timeout = 11\ngrace = 2\n[env]\nA = "user"\nB = "user"\n',
    )
    project = home / "proj" / "servedoctor.toml"
    project.write_text('runs_dir = "pr"\nrequest_timeout = 22\n[env]\nB = "project"\n')
    s = config.effective()
    assert (s["runs_dir"].value, s["runs_dir"].source) == (str(home / "proj" / "pr"), str(project))
    assert (s["request_timeout"].value, s["request_timeout"].source) == (22.0, str(project))
    assert (s["grace"].value, s["grace"].source) == (2.0, str(user))
    assert (s["store"].value, s["store"].source) == ("/u/f.db", str(user))
    assert s["startup_timeout"].source == "default"
    assert config.config_env() == {"A": "user", "B": "project"}
    assert config.default_store() == "/u/f.db"

    monkeypatch.setenv("SERVEDOCTOR_RUNS_DIR", str(home / "envruns"))
    monkeypatch.setenv("SERVEDOCTOR_STORE", "postgresql+psycopg://u@h/db")
    s = config.effective()
    assert (s["runs_dir"].value, s["runs_dir"].source) == (
        str(home / "envruns"),
        "$SERVEDOCTOR_RUNS_DIR",
    )
    assert s["store"].source == "$SERVEDOCTOR_STORE"
    assert config.default_store() is None  # the findings store reads the variable itself

    code, out, _ = sd(capsys, "config", "--json")
    rows = {r["key"]: r for r in map(json.loads, out.splitlines())}
    assert code == 0 and list(rows) == list(config.KEYS)
    assert rows["request_timeout"] == {
        "key": "request_timeout",
        "value": 22.0,
        "source": str(project),
    }
    assert rows["runs_dir"]["source"] == "$SERVEDOCTOR_RUNS_DIR"
    code, out, _ = sd(capsys, "config")
    assert code == 0 and f"# project file: {project}\n" in out
    assert any(
        line.split()[0] == "grace" and line.split()[-1] == str(user) for line in out.splitlines()
    )

    # the command-line option beats them all
    monkeypatch.delenv("SERVEDOCTOR_RUNS_DIR")
    code, out, _ = sd(capsys, "runs", "--runs-dir", str(home / "cli"))
    assert code == 0 and f"no runs yet in {home / 'cli'}" in out
    code, out, _ = sd(capsys, "runs")
    assert code == 0 and f"no runs yet in {home / 'proj' / 'pr'}" in out


def test_findings_reads_the_configured_store(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "proj" / "servedoctor.toml").write_text('store = "team.db"\n')
    code, _, err = sd(capsys, "findings")
    assert code == 2 and f"no findings store at {home / 'proj' / 'team.db'}" in err
    code, _, err = sd(capsys, "findings", "--store", str(home / "cli.db"))
    assert code == 2 and "cli.db" in err
    monkeypatch.setenv("SERVEDOCTOR_STORE", str(home / "env.db"))
    code, out, _ = sd(capsys, "findings")
    assert code == 0 and f"no findings yet in {home / 'env.db'}" in " ".join(out.split())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("runs_dir = \n", "not valid TOML"),
        ("color = true\n", "unknown key 'color'"),
        ('request_timeout = "soon"\n', "request_timeout must be a number > 0"),
        ("grace = -1\n", "grace must be a number ≥ 0"),
        ("env = 3\n", "env must be a table"),
        ("[env]\nX = [1]\n", "env.X must be a string or a number"),
        ('runs_dir = ""\n', "runs_dir must be a non-empty string"),
        (b"\xff\xfe = 1\n", "not UTF-8"),
    ],
)
def test_a_bad_config_file_is_one_line_and_exit_2(
    home: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, message: str
) -> None:
    path = home / "proj" / "servedoctor.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(UserError, match=message):
        config.effective()
    for argv in (["config"], ["runs"], ["launch", "--", "true"]):
        code, out, err = sd(capsys, *argv)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith(f"servedoctor: {path}: ") and message in err


def test_a_bad_user_file_names_itself(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = user_file(home, "[env\n")
    code, _, err = sd(capsys, "config")
    assert code == 2 and err.count("\n") == 1 and str(path) in err


def test_a_log_file_diagnosis_does_not_read_the_config(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "proj" / "servedoctor.toml").write_text("nonsense\n")
    (home / "proj" / "server.log").write_text("INFO: all good\n")
    code, out, _ = sd(capsys, "diagnose", "--json", "server.log")
    assert code == 0 and json.loads(out)["error_class"] is None
