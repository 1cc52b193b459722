"""Reports of run folders made from real logs (examples/ and the dev corpus), opened in
Debian's chromium: nothing fails in the console, nothing reaches for the network, and the
figures draw what the run holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import path_points, visit
from synth import make_run

from servedoctor.report.plots import MAX_POINTS
from servedoctor.report.write import write_run_report

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus" / "dev"
SECRET = "sk-abcdefghijklmnopqrstuvwx1234"

LOGS = [
    pytest.param(ROOT / "examples" / "glm5-graph-capture-oom.log", "sglang", id="glm5-oom"),
    pytest.param(ROOT / "examples" / "glm5-decode-device-assert.log", "sglang", id="glm5-assert"),
    pytest.param(CORPUS / "sglang-1953" / "log.txt", "sglang", id="corpus-sglang-1953"),
    pytest.param(CORPUS / "vllm-9377" / "log.txt", "vllm", id="corpus-vllm-9377"),
]


def _command(engine: str) -> list[str]:
    if engine == "vllm":
        return ["vllm", "serve", "m", "--api-key", SECRET]
    return ["python", "-m", "sglang.launch_server", "--model-path", "m", "--api-key", SECRET]


@pytest.mark.parametrize(("log", "engine"), LOGS)
def test_report_of_a_real_log(browser: object, tmp_path: Path, log: Path, engine: str) -> None:
    if not log.is_file():
        pytest.skip(f"{log} is not here (../shared/corpus beside the checkout)")
    run_dir = tmp_path / "run"
    record = make_run(log, run_dir, engine=engine, command=_command(engine), samples=57, gpus=2)
    page = write_run_report(run_dir)
    html = page.read_text(encoding="utf-8")
    assert SECRET not in html and "***" in html
    assert page.stat().st_size < 5_000_000

    seen = visit(browser, page)
    p = seen.page
    assert seen.console_errors == [] and seen.page_errors == []
    assert seen.network == [], seen.network
    # the timeline: one bar per phase span of run.json, the failure marked when it failed
    assert p.locator("#fig-timeline svg").count() == 1
    assert p.locator('#fig-timeline g[id^="timeline-phase-"]').count() == len(record["phases"])
    failed = record["outcome"] == "failed"
    assert p.locator("#fig-timeline #timeline-failure").count() == (1 if failed else 0)
    # GPU memory: one line per GPU, one vertex per sample
    for g in range(2):
        d = p.locator(f"#fig-usage #usage-gpu-{g} path").first.get_attribute("d")
        assert path_points(d) == 57
    assert p.locator("#fig-usage").get_attribute("data-count") == "57"
    # the memory figures the log stated are drawn and listed
    assert p.locator('#fig-usage g[id^="usage-stated-"]').count() == len(record["memory_gib"])
    # evidence lines, marked as the terminal marks them
    if failed:
        errors = p.locator('#log-excerpt tr[data-role="error"]')
        assert errors.count() >= 1
        assert errors.first.locator("td.mark").inner_text() == "E"
        diag = record["diagnosis"]
        assert isinstance(diag, dict)
        shown = {
            int(x)
            for x in p.locator("#log-excerpt tr[data-line]").evaluate_all(
                "rows => rows.map(r => r.dataset.line)"
            )
        }
        assert {e["line"] for e in diag["evidence"]} <= shown
        assert p.locator("#hypotheses tr[data-rule]").count() == len(diag["hypotheses"])
    # the whole log, linked relative to the page
    assert p.locator('a[href="server.log"]').count() == 1


def test_no_gpu_draws_rss_and_cpu(browser: object, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    make_run(
        ROOT / "examples" / "vllm-kv-cache-too-small.log",
        run_dir,
        engine="vllm",
        command=["vllm", "serve", "m"],
        samples=23,
        gpus=0,
    )
    seen = visit(browser, write_run_report(run_dir), scheme="dark")
    p = seen.page
    assert seen.console_errors == [] and seen.network == []
    assert p.locator("#usage").inner_text().startswith("Host memory and CPU")
    for series in ("rss", "cpu"):
        d = p.locator(f"#usage-series-{series} path").first.get_attribute("d")
        assert path_points(d) == 23
    assert p.locator('g[id^="usage-gpu-"]').count() == 0


def test_many_samples_are_bucketed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    make_run(
        ROOT / "examples" / "vllm-kv-cache-too-small.log",
        run_dir,
        engine="vllm",
        command=["vllm", "serve", "m"],
        samples=3 * MAX_POINTS,
        gpus=1,
    )
    html = write_run_report(run_dir).read_text(encoding="utf-8")
    assert f'data-count="{3 * MAX_POINTS}"' in html
    assert f'data-points="{MAX_POINTS}"' in html
    assert "drawn as 2000 points" in html


def test_output_elsewhere_links_the_log_relatively(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "run"
    make_run(
        ROOT / "examples" / "vllm-kv-cache-too-small.log",
        run_dir,
        engine="vllm",
        command=["vllm", "serve", "m"],
        samples=3,
        gpus=0,
    )
    page = write_run_report(run_dir, output=tmp_path / "shared" / "page.html")
    assert 'href="../runs/run/server.log"' in page.read_text(encoding="utf-8")


def test_secrets_in_the_log_are_masked(tmp_path: Path) -> None:
    log = tmp_path / "in.log"
    log.write_text(
        "INFO starting with HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "RuntimeError: CUDA error: device-side assert triggered (api_key='topsecret123')\n",
        encoding="utf-8",
    )
    run_dir = tmp_path / "run"
    make_run(log, run_dir, engine="vllm", command=["vllm", "serve", "m"], samples=2, gpus=0)
    record = json.loads((run_dir / "run.json").read_text())
    record["env_overrides"] = {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz0123"}
    (run_dir / "run.json").write_text(json.dumps(record))
    html = write_run_report(run_dir).read_text(encoding="utf-8")
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in html
    assert "topsecret123" not in html
