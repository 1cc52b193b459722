"""A fix session's page and the whole journal's, from a real findings store (SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import visit

from clihelp import isolate, sd
from servedoctor.experiments.trial import Trial
from servedoctor.findings.store import FindingsStore
from servedoctor.model import Change, Diagnosis, Evidence, Hypothesis

SECRET = "hf_abcdefghijklmnopqrstuvwxyz0123"


def _diagnosis(log: Path) -> Diagnosis:
    return Diagnosis(
        file=str(log),
        error_class="cuda_oom",
        phase="graph_capture",
        component="memory",
        culprit=None,
        summary="CUDA out of memory while capturing graphs",
        evidence=(
            Evidence(2, '  File "runner.py", line 9, in capture'),
            Evidence(3, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.12 GiB"),
        ),
        hypotheses=(
            Hypothesis(
                "OOM001.1",
                "The static memory pool leaves too little for CUDA graphs.",
                0.8,
                (Change("flag", "--mem-fraction-static", "0.88"),),
                references=("https://github.com/sgl-project/sglang/issues/5285",),
            ),
        ),
    )


def _session(tmp_path: Path) -> tuple[Path, int]:
    run_dir = tmp_path / "runs" / "baseline"
    run_dir.mkdir(parents=True)
    log = run_dir / "server.log"
    log.write_text(
        "Capture cuda graph begin.\n"
        '  File "runner.py", line 9, in capture\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.12 GiB\n",
        encoding="utf-8",
    )
    store = tmp_path / "findings.db"
    fs = FindingsStore.open(store)
    argv = ("python", "-m", "sglang.launch_server", "--mem-fraction-static", "0.95")
    env = {"HF_TOKEN": SECRET}
    sid = fs.start_run(
        engine="sglang", argv=argv, env=env, options={}, fingerprint={"gpus": "none"}
    )
    fix = Change("flag", "--mem-fraction-static", "0.88")
    trials = [
        Trial(
            0,
            "baseline",
            (),
            None,
            "",
            argv,
            env,
            "failed",
            _diagnosis(log),
            40.0,
            run_dir=str(run_dir),
        ),
        Trial(
            1,
            "candidate",
            (Change("flag", "--disable-cuda-graph"),),
            None,
            "",
            argv,
            env,
            "different_failure",
            None,
            35.0,
        ),
        Trial(2, "candidate", (fix,), fix, "", argv, env, "healthy", None, 50.0),
        Trial(3, "confirm", (fix,), None, "", argv, env, "healthy", None, 48.0),
    ]
    for t in trials:
        fs.add_trial(sid, t)
    fs.finish_run(sid, status="fixed", reason="", fix=[fix], trials=trials)
    fs.close()
    return store, sid


def test_session_report(
    browser: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, sid = _session(tmp_path)
    page = tmp_path / "out" / "session.html"
    code, out, err = sd(
        capsys, "report", "--session", str(sid), "--store", str(store), "-o", str(page)
    )
    assert code == 0, err
    assert out.strip() == str(page)
    html = page.read_text(encoding="utf-8")
    assert SECRET not in html
    seen = visit(browser, page)
    p = seen.page
    assert seen.console_errors == [] and seen.network == []
    assert p.locator(f'g[id^="trials-{sid}-trial-"]').count() == 4
    assert p.locator(f"#trials-{sid} tr[data-outcome]").count() == 4
    assert "--mem-fraction-static 0.88" in p.locator(".works").inner_text()
    error = p.locator('#log-excerpt tr[data-role="error"]')
    assert error.count() == 1 and "out of memory" in error.inner_text()
    assert p.locator('#log-excerpt tr[data-role="frame"] td.mark').inner_text() == ">"
    # the baseline's run is linked relative to the page
    assert p.locator('a[href="../runs/baseline/server.log"]').count() >= 1


def test_findings_export_html(
    browser: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, sid = _session(tmp_path)
    page = tmp_path / "findings.html"
    code, _, err = sd(
        capsys, "findings", "export", "--html", "--store", str(store), "-o", str(page)
    )
    assert code == 0, err
    seen = visit(browser, page)
    assert seen.console_errors == [] and seen.network == []
    assert seen.page.locator("article.session").count() == 1
    assert seen.page.locator(f'g[id^="trials-{sid}-trial-"]').count() == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report"], "name a run"),
        (["report", "last", "--session", "1"], "name a run"),
        (["report", "--session", "7", "--store", "/nonexistent/x.db"], "no findings store"),
        (["report", "/nonexistent/run"], "no run"),
    ],
)
def test_bad_input_is_one_line(
    args: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    isolate(tmp_path, monkeypatch, "cwd")
    code, _, err = sd(capsys, *args, "--runs-dir", str(tmp_path))
    assert code == 2
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unknown_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, sid = _session(tmp_path)
    code, _, err = sd(capsys, "report", "--session", str(sid + 5), "--store", str(store))
    assert code == 2 and f"no fix session {sid + 5}" in err
