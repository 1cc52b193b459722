"""The real CLI in a pseudo-terminal against a real `transformers serve` (tiny Llama, CPU).

What a person at a terminal sees and does: the live panel while the model loads, the panel of
each `fix` trial, `launch` staying attached and diagnosing a crash that happens after the
smoke test, Ctrl-C at each stage (never a process left), and the command `fix` prints
re-run to healthy. Nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from ptyhelp import Term, free_port, processes_mentioning, serve_cmd, tinymodels

from realserve import launch_argv

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(300)]


def _launch_args(tmp_path: Path, *extra: str) -> list[str]:
    """The CLI's arguments (``Term`` runs servedoctor itself) up to ``--``."""
    return launch_argv(tmp_path / "runs", *extra, secret=False)[1:]


def _run_json(tmp_path: Path) -> dict[str, object]:
    [path] = (tmp_path / "runs").glob("*/run.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture
def crashes_later(models: dict[str, Path], tmp_path: Path) -> Path:
    """A model healthy for the smoke test and the liveness check (requests 1 and 2) whose
    third request kills the server (``os._exit(3)`` in decode)."""
    path = tmp_path / "crashes-on-request-3"
    shutil.copytree(models["healthy"], path)
    tinymodels.make_faulty(path, "exit", fault_request=3)
    return path


def test_launch_live_display_then_attached_catches_a_later_crash(
    crashes_later: Path, offline_env: dict[str, str], tmp_path: Path, no_leftovers: None
) -> None:
    port = free_port()
    argv = serve_cmd(crashes_later, port, "--trust-remote-code")
    term = Term([*_launch_args(tmp_path, "--probe-every", "0", "--max-tokens", "4"), *argv],
                offline_env)  # fmt: skip
    try:
        # the live panel while the model loads: phase, elapsed, the server tree's CPU/RSS
        term.wait_for(r"● load · loading model · \d+\.\d s +\(total \d+\.\d s\)", 120)
        term.wait_for(r"server tree: CPU \d+ % · RSS \d+ MiB", 30)
        term.wait_for(r"✓ smoke: first token \d+ ms", 60)
        term.wait_for(rf"serving at http://127\.0\.0\.1:{port} · attached", 30)
        assert "HEALTHY" not in term.text and "FAILED" not in term.text  # still attached
        # a user's request, after the smoke test, crashes the server
        with httpx.Client(timeout=30) as client, pytest.raises(httpx.HTTPError):
            client.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": str(crashes_later), "max_tokens": 4,
                      "messages": [{"role": "user", "content": "hi"}]},
            )  # fmt: skip
        term.wait_for(r"FAILED +transformers", 60)
        code = term.finish(60)
    finally:
        term.kill()
    text = term.text
    assert code == 1, text[-2000:]
    assert "failure: process_exit in serving" in text  # diagnosed in place, after the smoke
    assert "attached " in text and " s after the smoke test" in text
    assert "diagnosis:" in text and "leftover processes: 0" in text
    run = _run_json(tmp_path)
    assert run["outcome"] == "failed" and run["exit_code"] == 3
    assert run["smoke"]["ok"] is True  # type: ignore[index]


@pytest.mark.parametrize("stage", ["startup", "load", "attached"])
def test_launch_ctrl_c_at_each_stage_leaves_no_process(
    stage: str,
    models: dict[str, Path],
    offline_env: dict[str, str],
    tmp_path: Path,
    no_leftovers: None,
) -> None:
    model = models["healthy" if stage == "attached" else "slow_load"]
    argv = serve_cmd(model, free_port(), "--trust-remote-code")
    term = Term([*_launch_args(tmp_path, "--max-tokens", "4"), *argv], offline_env)
    wait = {
        # the server's tree is sampled once it runs (the panel itself is up before that)
        "startup": r"● startup · process started · .*\n(?:.*\n)?server tree: CPU",
        "load": r"● load · loading model",
        "attached": r"· attached, probes every 30 s · Ctrl-C stops it",
    }[stage]
    try:
        term.wait_for(wait, 120)
        term.child.sendintr()  # Ctrl-C, through the terminal's line discipline
        code = term.finish(60)
    finally:
        term.kill()
    text = term.text
    run = _run_json(tmp_path)
    if stage == "attached":  # healthy until stopped: that is how an attached run ends
        assert code == 0, text[-2000:]
        assert "HEALTHY" in text and "stopped by SIGINT" in text
        # Ctrl-C dropped none of what was printed above the panel (the terminal's NOFLSH);
        # the panel's own last frame can be mid-redraw when the signal lands, so its
        # attached line is checked in what was drawn, not on the final screen
        screen = term.screen()
        assert "attached, probes every 30 s" in text
        assert any(line.startswith("✓ smoke:") for line in screen), screen
        assert run["outcome"] == "healthy" and run["stopped_by"] == "SIGINT"
    else:
        assert code == 130, text[-2000:]
        assert "INTERRUPTED" in text
        assert run["outcome"] == "interrupted"
        assert run["phases"][-1]["name"] == stage  # type: ignore[index]
    assert "leftover processes: 0" in text
    assert Path(str(run["log"])).is_file()  # the log is kept
    assert processes_mentioning(str(model)) == []


def test_fix_ctrl_c_during_a_trial_leaves_no_process(
    models: dict[str, Path], offline_env: dict[str, str], tmp_path: Path, no_leftovers: None
) -> None:
    store = tmp_path / "findings.db"
    model = models["slow_load"]
    term = Term(
        ["fix", "--store", str(store), "--runs-dir", str(tmp_path / "runs"), "--",
         *serve_cmd(model, free_port(), "--trust-remote-code")],
        offline_env,
    )  # fmt: skip
    try:
        term.wait_for(r"● trial 0 baseline · load · loading model", 120)
        term.child.sendintr()
        code = term.finish(60)
    finally:
        term.kill()
    assert code == 130, term.text[-2000:]
    assert f"resume with  servedoctor fix --resume --store {store} --run 1" in term.text
    assert processes_mentioning(str(model)) == []


def test_fix_shows_each_trial_live_and_its_command_runs_healthy(
    models: dict[str, Path], offline_env: dict[str, str], tmp_path: Path, no_leftovers: None
) -> None:
    argv = serve_cmd(models["healthy"], free_port(), "--attn-implementation", "flash_attention_2")
    store = tmp_path / "findings.db"
    term = Term(
        ["fix", "--store", str(store), "--runs-dir", str(tmp_path / "runs"),
         "--max-tokens", "4", "--", *argv],
        offline_env,
    )  # fmt: skip
    try:
        # each trial draws launch's panel, titled with the trial
        term.wait_for(r"● trial 0 baseline · (startup|load) · ", 120)
        term.wait_for(r"● trial 1 candidate · (startup|load|serving) · ", 120)
        term.wait_for(r"server tree: CPU \d+ % · RSS \d+ MiB", 60)
        # the confirmation knows how long the healthy candidate took
        term.wait_for(r"● trial 2 confirm · .*usually ~\d+ s here", 120)
        works = term.wait_for(r"the command that works:\n +(?P<line>[^\n]+)\n", 120)
        code = term.finish(60)
    finally:
        term.kill()
    assert code == 0, term.text[-2000:]
    fixed = shlex.split(works.group("line"))
    assert "flash_attention_2" not in fixed and fixed[:2] == argv[:2]
    # the printed command, run again under supervision: healthy
    again = subprocess.run(
        [*launch_argv(tmp_path / "again", "--exit-after-smoke", "--json", "--max-tokens", "4",
                      secret=False), *fixed],
        env={**os.environ, **offline_env}, capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["outcome"] == "healthy"
