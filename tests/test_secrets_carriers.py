"""End to end: secrets given to servedoctor never reach what it writes.

Each carrier is driven through its real writer — a supervised launch (run.json, server.log),
the ``--keep-running`` log relay, the findings store (database file, ``findings --json``,
``findings export``) and the store URL in errors and headers — and its output is searched
for the secret.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servedoctor.cli.app import app
from servedoctor.errors import UserError
from servedoctor.experiments.trial import Trial
from servedoctor.findings.connect import make_engine
from servedoctor.findings.export import render_markdown
from servedoctor.findings.store import FindingsStore
from servedoctor.launch import LaunchOptions, launch
from servedoctor.launch.relay import relay
from servedoctor.model import Change, Diagnosis, Evidence, Hypothesis

pytestmark = pytest.mark.timeout(60)

#: Two secrets, one plain and one with URL-safe punctuation.
SECRETS = ["Zq8vN3xKp2Lw7Rt5", "a1.B2-c3_D4~e5F6g7"]


def _argv(secret: str) -> list[str]:
    return [
        "--api-key", secret, f"--hf-token={secret}", "--tokenizer", "tok/path",
        "--store", f"postgresql+psycopg://bob:{secret}@db:5432/sd",
        "-H", f"Authorization: Basic {secret}",
    ]  # fmt: skip


def _env(secret: str) -> dict[str, str]:
    return {
        "HF_TOKEN": secret,
        "DATABASE_URL": f"postgresql://bob:{secret}@db/sd",
        "HTTPS_PROXY": f"http://proxy-user:{secret}@proxy:3128",
    }


def _log_lines(secret: str) -> list[str]:
    """What a server prints about its arguments, headers and connections."""
    return [
        f"INFO non-default args: {{'api_key': '{secret}', 'tokenizer_path': 'tok/path'}}",
        f"Namespace(api_key='{secret}', max_num_batched_tokens=8192)",
        f'{{"token": "{secret}", "token_usage": 3}}',
        f"password: {secret}",
        f"launching with --api-key {secret} --port 8000",
        f"HF_TOKEN={secret}",
        f"request headers: Authorization: Bearer {secret}",
        f"Authorization: Basic {secret}",
        f"connecting to postgresql+psycopg://bob:{secret}@db:5432/sd",
    ]


@pytest.mark.parametrize("secret", SECRETS)
def test_launch_writes_no_secret_to_run_json_or_server_log(tmp_path: Path, secret: str) -> None:
    script = textwrap.dedent(
        f"""
        import os, sys
        for line in {_log_lines(secret)!r}:
            print(line, flush=True)
        print("proxy is " + os.environ["HTTPS_PROXY"], flush=True)
        print("Traceback (most recent call last):", flush=True)
        print("RuntimeError: bad key " + {f"api_key='{secret}'"!r}, flush=True)
        sys.exit(1)
        """
    )
    server = tmp_path / "server.py"
    server.write_text(script)
    options = LaunchOptions(
        runs_dir=tmp_path / "runs",
        grace_s=1.0,
        request_timeout=5.0,
        env=_env(secret),
        prompt=f"say hi, my password: {secret}",
        quiet=True,
    )
    result = launch([sys.executable, str(server), *_argv(secret)], options)
    log = result.log_path.read_text()
    run = (result.run_dir / "run.json").read_text()
    assert "non-default args" in log and "tok/path" in log  # the log was written...
    assert secret not in log  # ...without the secret
    record = json.loads(run)
    assert "--api-key" in record["command"] and "HF_TOKEN" in record["env_overrides"]
    assert secret not in run
    assert secret not in json.dumps(result.to_dict(), default=str)


@pytest.mark.parametrize("secret", SECRETS)
def test_keep_running_relay_writes_no_secret(tmp_path: Path, secret: str) -> None:
    # the server wrote its private raw log; the relay transcribes it, masked, once the
    # server's process group is gone (here: a group that has already ended)
    data = "".join(line + "\n" for line in _log_lines(secret))
    raw = tmp_path / "server.raw.log"
    raw.write_text(data + f"tail without newline HF_TOKEN={secret}")
    ended = subprocess.Popen(["true"], start_new_session=True)
    ended.wait()
    log = tmp_path / "server.log"
    relay(raw, log, 0, ended.pid)
    text = log.read_text()
    assert "non-default args" in text and "tail without newline" in text
    assert secret not in text
    assert not raw.exists()  # everything transcribed: the raw copy is gone


def _trial(secret: str, index: int, role: Any, outcome: Any) -> Trial:
    change = Change("flag", "--api-key", secret)
    diagnosis = Diagnosis(
        file="server.log",
        error_class="auth_failed",
        phase="load",
        component=None,
        culprit=None,
        summary=f"401 for Authorization: Bearer {secret}",
        evidence=tuple(Evidence(i, line, "error") for i, line in enumerate(_log_lines(secret), 1)),
        hypotheses=(Hypothesis("h1", "wrong key", 0.5, changes=(change,)),),
    )
    return Trial(
        index=index,
        role=role,
        changes=(change, Change("env", "HF_TOKEN", secret)),
        tested=change,
        why="the key was refused",
        argv=("vllm", "serve", "m", *_argv(secret)),
        env=_env(secret),
        outcome=outcome,
        diagnosis=diagnosis,
        duration_s=1.0,
    )


def _fill(store_file: Path, secret: str) -> FindingsStore:
    fs = FindingsStore.open(str(store_file))
    run_id = fs.start_run(
        engine="vllm",
        argv=["vllm", "serve", "m", *_argv(secret)],
        env=_env(secret),
        options={},
        fingerprint={"gpu": "H200"},
    )
    fs.add_trial(run_id, _trial(secret, 0, "baseline", "failed"))
    fs.add_trial(run_id, _trial(secret, 1, "candidate", "healthy"))
    fs.finish_run(
        run_id,
        status="fixed",
        reason="done",
        fix=[Change("flag", "--api-key", secret), Change("env", "HF_TOKEN", secret)],
        trials=[_trial(secret, 1, "candidate", "healthy")],
    )
    return fs


@pytest.mark.parametrize("secret", SECRETS)
def test_findings_store_json_and_markdown_hold_no_secret(tmp_path: Path, secret: str) -> None:
    store_file = tmp_path / "f.db"
    fs = _fill(store_file, secret)
    runs = fs.runs()
    assert runs and runs[0].trials
    fs.close()
    assert secret.encode() not in store_file.read_bytes()
    listed = CliRunner().invoke(app, ["findings", "--json", "--store", str(store_file)])
    assert listed.exit_code == 0, listed.output
    assert "--api-key" in listed.stdout and secret not in listed.stdout
    out = tmp_path / "findings.md"
    exported = CliRunner().invoke(
        app, ["findings", "export", "--store", str(store_file), "-o", str(out)]
    )
    assert exported.exit_code == 0, exported.output
    md = out.read_text()
    assert "--api-key" in md and "auth_failed" in md
    assert secret not in md and secret not in exported.output
    assert secret not in render_markdown(runs, store=fs.url)


@pytest.mark.parametrize("secret", SECRETS)
def test_store_url_password_is_not_printed_in_errors(secret: str) -> None:
    url = f"postgresql+psycopg://bob:{secret}@127.0.0.1:1/sd"  # nothing listens on port 1
    with pytest.raises(UserError) as caught:
        FindingsStore(url, retry_for_s=0.0)
    assert "bob:***@127.0.0.1" in str(caught.value) and secret not in str(caught.value)


def test_store_url_shown_by_findings_has_no_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store line of ``findings`` and ``findings export`` (a PostgreSQL URL with a
    password, served here by a SQLite file behind the engine factory)."""
    secret = SECRETS[1]
    _fill(tmp_path / "f.db", secret).close()
    real = f"sqlite:///{tmp_path / 'f.db'}"
    monkeypatch.setattr(
        "servedoctor.findings.store.make_engine", lambda url, **kw: make_engine(real, **kw)
    )
    url = f"postgresql+psycopg://bob:{secret}@db:5432/sd"
    exported = CliRunner().invoke(app, ["findings", "export", "--store", url])
    assert exported.exit_code == 0, exported.output
    assert "`postgresql+psycopg://bob:***@db:5432/sd`" in exported.stdout
    assert secret not in exported.output
