"""The server's own interpreter, and what preflight learns there before a launch."""

from __future__ import annotations

import sys
from pathlib import Path

from servedoctor.env.fingerprint import Fingerprint
from servedoctor.env.preflight import run_preflight
from servedoctor.env.serverenv import importable, server_interpreter, torch_build


def test_the_interpreter_comes_from_the_command(tmp_path: Path) -> None:
    script = tmp_path / "myserve"
    script.write_text(f"#!{sys.executable}\nprint('hi')\n")
    script.chmod(0o755)
    assert server_interpreter([str(script), "serve"]) == sys.executable
    env_script = tmp_path / "other"
    env_script.write_text("#!/usr/bin/env python3\n")
    env_script.chmod(0o755)
    assert Path(server_interpreter([str(env_script)])).name.startswith("python3")
    assert server_interpreter([sys.executable, "-m", "x"]) == sys.executable
    binary = tmp_path / "notpython"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert server_interpreter([str(binary)]) == sys.executable  # cannot tell: our own


def test_importable_is_checked_in_that_interpreter() -> None:
    found = importable(sys.executable, ["json", "surely_not_a_module_xyz"])
    assert found == {"json": True, "surely_not_a_module_xyz": False}
    assert importable("/nonexistent/python", ["json"]) == {}


def _risks(argv: list[str]) -> dict[str, list[str]]:
    report = run_preflight(argv, fingerprint=Fingerprint(), scan=False, environ={})
    return {r.rule: [c.describe() for c in r.changes] for r in report.risks}


def test_a_selected_implementation_that_is_not_installed_is_blocking() -> None:
    argv = [sys.executable, "-m", "transformers.commands.serving", "/m",
            "--attn-implementation", "flash_attention_2"]  # fmt: skip
    risks = _risks(argv)
    assert "PRE007" in risks
    assert "flash-attn install" in risks["PRE007"]
    assert "drop --attn-implementation" in risks["PRE007"]
    assert "PRE007" not in _risks([*argv[:-1], "sdpa"])


def test_cuda_device_with_a_cpu_torch_is_blocking() -> None:
    build = torch_build(sys.executable)
    argv = [sys.executable, "-m", "transformers.commands.serving", "/m", "--device", "cuda"]
    risks = _risks(argv)
    if build is not None and build[1] is None:  # the CI and CPU machines: a CPU wheel
        assert "PRE008" in risks and "drop --device" in risks["PRE008"]
    else:
        assert "PRE008" not in risks
    assert "PRE008" not in _risks([*argv[:-1], "cpu"])
