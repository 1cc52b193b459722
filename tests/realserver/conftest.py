"""Shared fixtures for tests that start a real `transformers serve` on loopback (CPU)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

HERE = Path(__file__).parent
VENV_BIN = Path(sys.executable).parent
TRANSFORMERS = VENV_BIN / "transformers"

pytest.importorskip("transformers", reason="pip install -e '.[realserver]' (make test does)")


@pytest.fixture(scope="session")
def offline_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """No hub, a private cache: the server must never reach the network."""
    home = tmp_path_factory.mktemp("hf_home")
    return {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(home),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
    }


@pytest.fixture(scope="session")
def models(
    tmp_path_factory: pytest.TempPathFactory, offline_env: dict[str, str]
) -> dict[str, Path]:
    """The tiny Llama and its fault variants, built once per session (~7 s)."""
    root = tmp_path_factory.mktemp("models")
    env = {**os.environ, **offline_env}
    subprocess.run(
        [sys.executable, str(HERE / "tinymodels.py"), "set", str(root)],
        check=True,
        env=env,
        capture_output=True,
        timeout=300,
    )
    return {p.name: p for p in root.iterdir() if p.is_dir()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: a token each launch below carries in its environment: no output, record or report may show it
SECRET_TOKEN = "hf_abcdefghijklmnopqrstuvwxyz"


def launch_argv(runs: Path, *options: str, secret: bool = True) -> list[str]:
    """``servedoctor launch`` into ``runs`` with the tests' shared settings (3 s grace, the
    secret token in ``--env``) and ``options``, up to ``--``: the server's argv follows."""
    token = ["--env", f"HF_TOKEN={SECRET_TOKEN}"] if secret else []
    servedoctor = str(VENV_BIN / "servedoctor")
    return [servedoctor, "launch", "--runs-dir", str(runs), "--grace", "3", *token, *options, "--"]


def serve_cmd(model: Path, port: int, *extra: str) -> list[str]:
    return [
        str(TRANSFORMERS),
        "serve",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra,
    ]


def processes_mentioning(text: str) -> list[psutil.Process]:
    """Live processes whose command line mentions ``text`` (e.g. a model directory)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
                continue
            if any(text in arg for arg in proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def no_leftovers(models: dict[str, Path]) -> Iterator[None]:
    """After the test, no process may mention any model directory (checked independently)."""
    yield
    root = str(next(iter(models.values())).parent)
    left = processes_mentioning(root)
    for proc in left:  # clean up for the next test, then fail
        proc.kill()
    assert left == [], f"processes of the run left behind: {[p.pid for p in left]}"
