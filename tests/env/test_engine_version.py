"""The engine release installed in the server's own interpreter."""

from __future__ import annotations

import importlib.metadata
import sys

from servedoctor.env.engineversion import installed_engine_version


def test_the_engine_version_is_read_in_the_interpreter_the_command_runs() -> None:
    argv = [sys.executable, "-m", "transformers", "serve"]
    assert installed_engine_version(argv, "transformers") == importlib.metadata.version(
        "transformers"
    )


def test_no_version_for_an_engine_without_a_package_or_one_not_installed() -> None:
    assert installed_engine_version(["llama-server", "-m", "x.gguf"], "llamacpp") is None
    assert installed_engine_version([sys.executable, "-m", "vllm"], "vllm") is None
    assert installed_engine_version([], "vllm") is None
