"""The report of a real `transformers serve` run (tiny Llama on CPU whose decode raises),
opened in Debian's chromium; its screenshot is docs/report.png (README, "Reports")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from browser import path_points, visit

import realserve
from realserve import SECRET_TOKEN, SERVEDOCTOR, free_port, launch_argv, serve_cmd

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(300)]

offline_env = realserve.offline_env  # the fixtures, shared with tests/realserver
models = realserve.models
no_leftovers = realserve.no_leftovers

#: README's picture; re-taken when SERVEDOCTOR_SCREENSHOT=1 (else into the test's folder)
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "report.png"


def test_report_of_a_real_failed_launch(
    browser: object,
    models: dict[str, Path],
    offline_env: dict[str, str],
    tmp_path: Path,
    no_leftovers: None,
) -> None:
    runs = tmp_path / "runs"
    cmd = [
        *launch_argv(runs, "--quiet", "--max-tokens", "4"),
        *serve_cmd(models["raise"], free_port(), "--trust-remote-code"),
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=200, env={**os.environ, **offline_env}
    )
    assert proc.returncode == 1, proc.stderr
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    page = run_dir / "report.html"
    assert f"report: {page}" in proc.stderr  # launch wrote it and said where
    record = json.loads((run_dir / "run.json").read_text())
    samples = (run_dir / "telemetry.jsonl").read_text().splitlines()
    assert len(samples) >= 2  # the server's process tree, sampled once a second
    html = page.read_text(encoding="utf-8")
    assert SECRET_TOKEN not in html

    seen = visit(browser, page)
    p = seen.page
    assert seen.console_errors == [] and seen.page_errors == []
    assert seen.network == []
    assert p.locator('#fig-timeline g[id^="timeline-phase-"]').count() == len(record["phases"])
    assert p.locator("#fig-timeline #timeline-failure").count() == 1
    # no GPU here: host RSS and CPU of the server's tree, one vertex per sample
    d = p.locator("#usage-series-rss path").first.get_attribute("d")
    assert path_points(d) == len(samples)
    assert "tiny fault" in p.locator("#verdict").inner_text()
    error = p.locator('#log-excerpt tr[data-role="error"]')
    assert error.count() >= 1 and "tiny fault" in error.first.inner_text()
    assert p.locator('#log-excerpt tr[data-role="frame"]').count() >= 1
    shot = SCREENSHOT if os.environ.get("SERVEDOCTOR_SCREENSHOT") == "1" else tmp_path / "r.png"
    p.set_viewport_size({"width": 1000, "height": 900})
    p.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    # the verb writes the same page again, elsewhere, and names it
    again = subprocess.run(
        [SERVEDOCTOR, "report", str(run_dir), "-o", str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == str(tmp_path / "r.html")
