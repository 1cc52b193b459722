"""Package versions as trials, against a real `transformers serve` in a venv of its own.

The server's venv works; then a real package change in that venv breaks its start. `fix`
must find the package, try the version that works in an overlay (never in the venv), report
the exact pip line, and leave the venv byte-for-byte unchanged. Offline: the venv layers
servedoctor's site-packages (as a --system-site-packages venv would), the breaking packages
are small wheels built here, and the overlay installs a wheel repacked from the real
installed package through pip's own PIP_NO_INDEX / PIP_FIND_LINKS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from realserve import free_port, serve_cmd

sys.path.insert(0, str(Path(__file__).parents[1] / "env"))
from pyenvs import (
    build_wheel,
    make_venv,
    offline_pip_env,
    pip_install,
    repack,
    site_packages,
    tree_hash,
)

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(420)]

SERVEDOCTOR = [sys.executable, "-m", "servedoctor"]
TRANSFORMERS_SCRIPT = Path(sys.executable).parent / "transformers"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real tokenizers and PyYAML (repacked from this venv), and the breaking versions."""
    where = tmp_path_factory.mktemp("wheels")
    repack(where, "tokenizers")
    repack(where, "PyYAML")
    # an older tokenizers that shadows the right one (transformers refuses it at import)
    build_wheel(
        where, "tokenizers", "0.21.0", {"tokenizers/__init__.py": "__version__ = '0.21.0'\n"}
    )
    # a PyYAML whose module breaks at import; the message does not name the package
    broken = "raise RuntimeError('the representer registry is empty')\n"
    build_wheel(where, "PyYAML", "6.0.1", {"yaml/__init__.py": broken})
    return where


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """The server's own venv, with its own `transformers` console script (shebang: its
    python); it sees servedoctor's site-packages after its own."""
    python = make_venv(tmp_path / "server-venv", layered_on_this=True)
    script = python.parent / "transformers"
    body = TRANSFORMERS_SCRIPT.read_text().split("\n", 1)[1]
    script.write_text(f"#!{python}\n{body}")
    script.chmod(0o755)
    return python


def _installed(python: Path, name: str) -> str:
    out = subprocess.run([str(python), "-c", f"from importlib import metadata; "
                          f"print(metadata.version({name!r}))"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return out.stdout.strip()


def _run(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SERVEDOCTOR, *args], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


def _launch(tmp_path: Path, env: dict[str, str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    proc = _run(["launch", "--exit-after-smoke", "--json", "--max-tokens", "4", "--grace", "3",
                 "--startup-timeout", "120", "--store", str(tmp_path / "findings.db"),
                 "--runs-dir", str(tmp_path / "runs"), "--", *argv], env, 200)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    assert "servedoctor's own Python" not in proc.stderr  # the server runs its venv's python
    return proc.returncode, json.loads(proc.stdout)


def _fix(tmp_path: Path, env: dict[str, str], argv: list[str], store: str) -> dict[str, Any]:
    proc = _run(["fix", "--json", "--store", str(tmp_path / store), "--runs-dir",
                 str(tmp_path / "runs"), "--max-tokens", "4", "--startup-timeout", "120",
                 "--max-trials", "6", "--", *argv], env, 400)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    result = dict(json.loads(proc.stdout))
    trials = [(t["role"], t["outcome"]) for t in result["trials"]]
    print(f"fix: {result['outcome']} in {result['elapsed_s']} s; trials {trials}")  # pytest -s
    return result


def test_an_older_package_in_the_servers_venv_is_fixed_in_an_overlay(
    tmp_path: Path,
    venv: Path,
    wheels: Path,
    models: dict[str, Path],
    offline_env: dict[str, str],
    no_leftovers: None,
) -> None:
    env = {**offline_env, **offline_pip_env(wheels)}
    argv = serve_cmd(models["healthy"], free_port())
    argv[0] = str(venv.parent / "transformers")
    code, _ = _launch(tmp_path, env, argv)
    assert code == 0  # it works

    pip_install(venv, wheels, "tokenizers==0.21.0")  # the real change that breaks it
    code, failed = _launch(tmp_path, env, argv)
    assert code == 1 and failed["outcome"] == "failed"
    assert "tokenizers" in failed["diagnosis"]["summary"]  # this failure names the package
    before = tree_hash(site_packages(venv))

    result = _fix(tmp_path, env, argv, "fix.db")  # a store without the healthy record
    assert result["outcome"] == "fixed", [(t["changes"], t["outcome"]) for t in result["trials"]]
    (change,) = result["changes"]
    assert change["kind"] == "package" and change["name"] == "tokenizers"
    line = result["command"]["lines"][0] if "lines" in result["command"] else None
    packages = result["command"]["packages"]
    assert len(packages) == 1 and packages[0].startswith("tokenizers")
    assert line is None or " -m pip install " in line or line.startswith("pip install")
    # the requirement admits the version that works, not the one installed
    from packaging.requirements import Requirement

    req = Requirement(packages[0])
    assert req.specifier.contains("0.23.3") and not req.specifier.contains("0.21.0")
    # the server's venv is byte-for-byte what it was
    assert tree_hash(site_packages(venv)) == before
    assert _installed(venv, "tokenizers") == "0.21.0"


def test_a_package_the_error_does_not_name_is_found_by_the_healthy_diff(
    tmp_path: Path,
    venv: Path,
    wheels: Path,
    models: dict[str, Path],
    offline_env: dict[str, str],
    no_leftovers: None,
) -> None:
    env = {**offline_env, **offline_pip_env(wheels)}
    argv = serve_cmd(models["healthy"], free_port())
    argv[0] = str(venv.parent / "transformers")
    code, _ = _launch(tmp_path, env, argv)  # healthy: its packages are recorded
    assert code == 0

    pip_install(venv, wheels, "PyYAML==6.0.1")
    code, failed = _launch(tmp_path, env, argv)
    assert code == 1
    assert "pyyaml" not in failed["diagnosis"]["summary"].lower()  # the message does not name it
    moved = {m["package"]: m for m in failed["since_healthy"]}
    assert moved["PyYAML"]["worked"] == "6.0.4" and moved["PyYAML"]["now"] == "6.0.1"
    assert moved["PyYAML"]["touched_by"] == "yaml"  # its frames do, by its import name
    first = failed["diagnosis"]["hypotheses"][0]
    assert first["changes"] == [{"kind": "package", "name": "PyYAML", "value": "==6.0.4"}]
    shown = _run(["diagnose", "last", "--runs-dir", str(tmp_path / "runs"), "--store",
                  str(tmp_path / "findings.db")], env, 120)  # fmt: skip
    assert "since it last worked:" in shown.stdout and "PyYAML 6.0.4 → 6.0.1" in shown.stdout

    before = tree_hash(site_packages(venv))
    result = _fix(tmp_path, env, argv, "findings.db")
    assert result["outcome"] == "fixed", [(t["changes"], t["outcome"]) for t in result["trials"]]
    assert result["changes"] == [{"kind": "package", "name": "PyYAML", "value": "==6.0.4"}]
    assert result["command"]["packages"] == ["PyYAML==6.0.4"]
    assert tree_hash(site_packages(venv)) == before
    assert _installed(venv, "PyYAML") == "6.0.1"
