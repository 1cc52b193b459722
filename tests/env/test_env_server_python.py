"""The server's own Python: found from the command (or --python), probed in a subprocess of
that interpreter, never in servedoctor's; a one-line warning when they are the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pyenvs import build_wheel, make_venv, pip_install

from servedoctor.env.fingerprint import collect
from servedoctor.env.serverenv import resolve_python, same_prefix
from servedoctor.errors import UserError


@pytest.fixture(scope="module")
def server_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv of its own (not servedoctor's) holding a package servedoctor's lacks, and a
    console script whose shebang names the venv's python."""
    root = tmp_path_factory.mktemp("server")
    python = make_venv(root / "venv")
    wheels = root / "wheels"
    build_wheel(wheels, "sd-onlyhere", "3.1", {"sdonly/__init__.py": "X = 1\n"})
    pip_install(python, wheels, "sd-onlyhere==3.1")
    script = root / "venv" / "bin" / "myserve"
    script.write_text(f"#!{python}\nimport sys\nprint('serving', sys.argv[1:])\n")
    script.chmod(0o755)
    return python


def _sd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "servedoctor", *args], capture_output=True,
                          text=True, timeout=180)  # fmt: skip


def test_the_interpreter_comes_from_the_shebang_or_from_python(server_venv: Path) -> None:
    script = server_venv.parent / "myserve"
    found = resolve_python([str(script), "serve", "m"])
    assert found.path == str(server_venv) and found.how == "the script's shebang"
    assert not found.own and found.warning() is None
    forced = resolve_python([str(script)], server_venv)
    assert forced.how == "--python" and forced.path == str(server_venv)
    with pytest.raises(UserError, match="--python /nonexistent/python: not an executable"):
        resolve_python([str(script)], "/nonexistent/python")


def test_servedoctors_own_interpreter_is_warned_about_in_one_line() -> None:
    own = resolve_python([sys.executable, "-m", "vllm.entrypoints.openai.api_server"])
    assert own.own and same_prefix(sys.executable)
    warning = own.warning()
    assert warning is not None and "servedoctor's own Python" in warning
    assert "\n" not in warning
    unknown = resolve_python(["no-such-program-xyz", "serve"])
    assert unknown.how == "not found" and "cannot tell" in (unknown.warning() or "")


def test_the_fingerprint_is_taken_inside_the_servers_interpreter(server_venv: Path) -> None:
    theirs = collect(python=str(server_venv), with_torch=True)
    ours = collect(with_torch=False)
    assert theirs.interpreter == str(server_venv)
    assert theirs.installed().get("sd-onlyhere") == "3.1"
    assert "sd-onlyhere" not in ours.installed()
    assert theirs.import_names()["sd-onlyhere"] == ("sdonly",)
    # the server's venv has no torch (servedoctor's has): the probe ran there, not here
    assert theirs.torch is None and "torch is not installed" in theirs.notes
    assert "typer" in ours.installed() and "typer" not in theirs.installed()


def test_a_python_that_cannot_run_is_a_note(tmp_path: Path) -> None:
    broken = tmp_path / "python3"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    fp = collect(python=str(broken), with_torch=False)
    assert fp.installed() == {} and any("cannot probe the server's Python" in n for n in fp.notes)


def test_env_and_preflight_and_archscan_look_at_the_servers_python(server_venv: Path) -> None:
    script = str(server_venv.parent / "myserve")
    env = _sd("env", "--json", "--", script, "serve", "m")
    assert env.returncode == 0, env.stderr
    data = json.loads(env.stdout)
    assert data["interpreter"] == str(server_venv) and data["installed"]["sd-onlyhere"] == "3.1"
    assert "warning" not in env.stderr

    own = _sd("env", "--no-torch", "--", sys.executable, "-m", "x")
    assert own.returncode == 0
    assert own.stderr.count("servedoctor's own Python") == 1

    by_flag = _sd("env", "--json", "--no-torch", "--python", str(server_venv))
    assert json.loads(by_flag.stdout)["interpreter"] == str(server_venv)
    bad = _sd("env", "--python", "/nonexistent/python")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().count("\n") == 0

    pre = _sd("preflight", "--json", "--no-scan", "--", script, "serve", "m")
    assert pre.returncode in (0, 1), pre.stderr
    assert json.loads(pre.stdout)["fingerprint"]["interpreter"] == str(server_venv)

    scan = _sd("archscan", "--", script, "serve", "m")  # no stack there: one line, exit 2
    assert scan.returncode == 2 and "no installed stack package" in scan.stderr
