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


def _venv_with(tmp_path: Path, name: str, version: str, requires: list[str]) -> str:
    """A venv (seeing this one's packages) where a distribution declares ``requires``."""
    import subprocess
    import sysconfig

    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(env)], check=True)  # fmt: skip
    python = env / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    info = Path(purelib) / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    assert sysconfig.get_paths()["purelib"] != purelib  # not servedoctor's own
    return str(python)


def test_the_engines_own_pins_are_checked_where_it_runs(tmp_path: Path) -> None:
    from servedoctor.env.implfacts import pin_facts

    python = _venv_with(tmp_path, "lmdeploy", "0.9.0",
                        ["packaging<1", "pyyaml>=1", "torch==1.0", "notinstalled>=1",
                         "pydantic<1; extra == 'old'"])  # fmt: skip
    facts = pin_facts("lmdeploy", python)
    assert len(facts) == 1 and facts[0].startswith(
        "pin-violated: lmdeploy 0.9.0 requires packaging<1"
    )
    assert pin_facts("lmdeploy", sys.executable) == []  # not installed in servedoctor's own
    report = run_preflight([python, "-m", "lmdeploy", "serve", "api_server", "/m"],
                           fingerprint=Fingerprint(), scan=False, environ={})  # fmt: skip
    (risk,) = [r for r in report.risks if r.rule == "PRE009"]
    assert risk.changes[0].name == "packaging" and risk.changes[0].value == "<1"
