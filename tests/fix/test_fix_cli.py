from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from fakeworld import FakeWorld, Fault, diag, flag_is
from typer.testing import CliRunner

from servedoctor.cli import app
from servedoctor.cli import fix_cmd as fix_module
from servedoctor.errors import UserError
from servedoctor.experiments.trial import LaunchReport
from servedoctor.findings.store import FindingsStore
from servedoctor.model import REMOVE

CMD = [sys.executable, "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "2",
       "--enable-torch-compile", "--attention-backend", "flashinfer"]  # fmt: skip


class Interrupting(FakeWorld):
    """Raises KeyboardInterrupt (Ctrl-C) on launch number ``at``."""

    at: int = 0

    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> LaunchReport:
        if len(self.calls) + 1 == self.at:
            self.calls.append((list(argv), dict(env)))
            raise KeyboardInterrupt
        return super().__call__(argv, env)


def world() -> Interrupting:
    return Interrupting(
        [Fault(flag_is("--attention-backend", "flashinfer"), diag("other", "load"))]
    )


def test_interrupted_fix_resumes_from_the_store_without_relaunching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "f.db"
    first = world()
    first.at = 3  # baseline, one candidate, then Ctrl-C
    monkeypatch.setattr(fix_module, "supervised_launcher", lambda options, **_: first)
    r = CliRunner().invoke(app, ["fix", "--store", str(store), "--", *CMD])
    assert r.exit_code == 130, r.output
    (run,) = FindingsStore.open(store).runs()
    assert run.status == "interrupted" and len(run.trials) == 2

    second = world()
    monkeypatch.setattr(fix_module, "supervised_launcher", lambda options, **_: second)
    r = CliRunner().invoke(app, ["fix", "--resume", "--json", "--store", str(store)])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["outcome"] == "fixed" and result["session"] == run.id
    assert result["changes"] == [{"kind": "flag", "name": "--attention-backend", "value": REMOVE}]
    # the two stored trials were replayed, not launched again
    assert len(second.calls) == len(result["trials"]) - 2
    (done,) = FindingsStore.open(store).runs()
    assert done.status == "fixed" and len(done.trials) == len(result["trials"])


def test_dry_run_prints_the_plan_from_a_failure_log_and_launches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_launch(options: object) -> None:
        raise AssertionError("dry run must not launch")

    monkeypatch.setattr(fix_module, "supervised_launcher", no_launch)
    log = tmp_path / "server.log"
    log.write_text(
        "[2025-10-16 09:06:32] Capture cuda graph begin. This can take up to several minutes.\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a "
        "total capacity of 95.00 GiB of which 120.00 MiB is free.\n",
        encoding="utf-8",
    )
    argv = [*CMD, "--mem-fraction-static", "0.92"]
    r = CliRunner().invoke(
        app, ["fix", "--dry-run", "--json", "--store", str(tmp_path / "f.db"), "--log", str(log),
              "--", *argv],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)["plan"]
    assert plan and all(len(p["change"]) == 3 for p in plan)
    assert {"kind": "flag", "name": "--enable-torch-compile", "value": REMOVE} in [
        p["change"] for p in plan
    ]
    assert FindingsStore.open(tmp_path / "f.db").runs() == []


def test_resume_with_nothing_to_resume_is_one_line_and_exit_2(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "servedoctor", "fix", "--resume", "--store", str(tmp_path / "f.db")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "nothing to resume" in r.stderr


def test_fix_of_a_command_that_does_not_exist_is_exit_2_and_stores_nothing(tmp_path: Path) -> None:
    store = tmp_path / "f.db"
    argv = ["fix", "--store", str(store), "--", "no-such-server-xyz", "--port", "1"]
    done = subprocess.run(
        [sys.executable, "-m", "servedoctor", *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "servedoctor: command not found: no-such-server-xyz"
    assert FindingsStore.open(store).runs() == []


def test_findings_of_a_store_that_does_not_exist_is_exit_2_and_creates_nothing(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no" / "such.db"
    for verb in (["findings"], ["findings", "export"]):
        done = subprocess.run(
            [sys.executable, "-m", "servedoctor", *verb, "--store", str(missing)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2
        assert done.stderr.strip() == f"servedoctor: no findings store at {missing}"
    assert not missing.parent.exists()


def test_resume_refuses_a_finished_session_and_another_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "f.db"
    first = world()
    first.at = 3
    monkeypatch.setattr(fix_module, "supervised_launcher", lambda options, **_: first)
    assert CliRunner().invoke(app, ["fix", "--store", str(store), "--", *CMD]).exit_code == 130
    (run,) = FindingsStore.open(store).runs()
    other = [*CMD[:-1], "triton"]
    r = CliRunner().invoke(app, ["fix", "--resume", "--store", str(store), "--", *other])
    assert isinstance(r.exception, UserError) and "another command" in str(r.exception)
    monkeypatch.setattr(fix_module, "supervised_launcher", lambda options, **_: world())
    same = CliRunner().invoke(app, ["fix", "--resume", "--store", str(store), "--", *CMD])
    assert same.exit_code == 0, same.output  # the same command given again is fine
    again = CliRunner().invoke(
        app, ["fix", "--resume", "--run", str(run.id), "--store", str(store)]
    )
    assert isinstance(again.exception, UserError)
    assert "already finished (fixed)" in str(again.exception)


def test_the_command_that_works_is_in_the_json_the_store_and_the_markdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servedoctor.findings.export import render_markdown

    store = tmp_path / "f.db"
    monkeypatch.setattr(fix_module, "supervised_launcher", lambda options, **_: world())
    env_cmd = ["HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz", *CMD]
    r = CliRunner().invoke(app, ["fix", "--json", "--store", str(store), "--", *env_cmd])
    assert r.exit_code == 0, r.output
    works = json.loads(r.stdout)["command"]
    assert "--attention-backend" not in works["argv"] and "--tp-size" in works["argv"]
    assert works["env"] == {"HF_TOKEN": "***"}  # never the secret itself
    (run,) = FindingsStore.open(store).runs()
    assert run.to_dict()["command_that_works"]["argv"] == works["argv"]
    markdown = render_markdown([run], store=str(store))
    assert "The command that works" in markdown and "(1-minimal)" not in markdown
    line = next(ln for ln in markdown.splitlines() if ln.startswith("HF_TOKEN='***' "))
    assert "--attention-backend" not in line and "sglang.launch_server" in line
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in markdown
