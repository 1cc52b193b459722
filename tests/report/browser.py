"""Open a report in Debian's chromium through Playwright, offline, and say what happened.

Every request is routed: a file: or data: URL goes on, anything else is recorded and
aborted, so a page that reaches for the network fails its test. Playwright's own browser
download is never used (it cannot be fetched here): ``executable_path`` is Debian's binary.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("SERVEDOCTOR_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@dataclass
class Visit:
    page: Any
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    network: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def chromium_or_skip() -> str:
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no chromium binary at {CHROMIUM} (make test installs Debian's chromium)")
    pytest.importorskip("playwright", reason="pip install -e '.[dev]' brings playwright")
    return CHROMIUM


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def visit(browser: Any, page_path: Path, *, scheme: str = "light", width: int = 1100) -> Visit:
    context = browser.new_context(
        viewport={"width": width, "height": 900}, color_scheme=scheme, offline=True
    )
    page = context.new_page()
    seen = Visit(page)

    def route(r: Any) -> None:
        url = r.request.url
        seen.requests.append(url)
        if url.startswith(("file:", "data:")):
            r.continue_()
        else:
            seen.network.append(url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: seen.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.page_errors.append(str(e)))
    page.goto(page_path.resolve().as_uri())
    page.wait_for_load_state("load")
    return seen


def path_points(d: str) -> int:
    """Vertices of an SVG path as matplotlib writes a line: ``M x y L x y ...``."""
    return sum(1 for token in d.split() if token in ("M", "L"))
