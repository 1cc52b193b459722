"""One self-contained HTML page per run or fix session (Jinja2 templates, matplotlib SVG).

No script and no external resource: the CSS and the figures are inline, and the page's
Content-Security-Policy forbids loading anything, so it opens the same offline, attached
to an issue or printed. Links point at the whole log, relative to where the page is.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from servedoctor import __version__
from servedoctor.report.evidence import MARK
from servedoctor.report.rundata import RunData

if TYPE_CHECKING:  # the findings store (SQLAlchemy) is imported only for a session's page
    from servedoctor.report.session import SessionData

__all__ = [
    "REPORT_NAME",
    "human_bytes",
    "render_journal",
    "render_run",
    "render_session",
    "write_html",
]

REPORT_NAME = "report.html"


@cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("servedoctor.report", "templates"),
        undefined=StrictUndefined,
        autoescape=select_autoescape(["html.j2", "html"], default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


def _href(target: Path, page: Path) -> str:
    """``target`` relative to the folder of ``page``, as a URL path."""
    rel = os.path.relpath(os.path.abspath(target), os.path.abspath(page.parent))
    return quote(Path(rel).as_posix())


def shell_line(argv: Sequence[str], env: dict[str, str]) -> str:
    """As :func:`servedoctor.findings.working.shell_line` (each value quoted, never the
    assignment), without importing the findings store for a run's page."""
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(argv)])


def _common() -> dict[str, Any]:
    return {
        "version": __version__,
        "written_at": datetime.now().astimezone().isoformat(timespec="seconds"),
        "marks": MARK,
    }


def render_run(run: RunData, *, page: Path) -> str:
    from servedoctor.report.plots import timeline_figure, usage_figure

    failure_at = run.failure.at_s if run.failure and run.outcome == "failed" else None
    d = run.diagnosis
    label = ""
    if failure_at is not None:
        label = (d.error_class if d and d.failed else run.failure.kind) or ""  # type: ignore[union-attr]
        phase = (d.phase if d and d.phase else None) or (run.failure.phase if run.failure else "")
        label = f"{label} · {phase}" if phase else label
    end = max(
        [run.duration_s]
        + [p.end or p.start for p in run.phases]
        + ([run.samples[-1].t] if run.samples else [])
    )
    timeline = timeline_figure(run.phases, end_s=end, failure_at=failure_at, failure_label=label)
    usage = usage_figure(run.samples, end_s=end, memory_gib=run.memory_gib, failure_at=failure_at)
    smoke = run.probes.get("smoke") if isinstance(run.probes.get("smoke"), dict) else None
    return (
        _environment()
        .get_template("run.html.j2")
        .render(
            run=run,
            d=d,
            machine=run.machine,
            command_line=shell_line(run.command, run.env),
            timeline=timeline if run.phases else None,
            usage=usage,
            gpu=any(s.gpu_mib for s in run.samples),
            smoke=smoke,
            log_href=_href(run.log, page) if run.log_bytes else None,
            log_size=human_bytes(run.log_bytes),
            **_common(),
        )
    )


def _session_context(s: SessionData, page: Path) -> dict[str, Any]:
    from servedoctor.report.plots import trials_figure

    links: dict[int, str] = {}
    for t in s.run.trials:
        if t.run_dir:
            folder = Path(t.run_dir)
            for name in ("report.html", "server.log"):
                if (folder / name).is_file():
                    links[t.index] = _href(folder / name, page)
                    break
    return {
        "figure": trials_figure(s.bars, name=f"trials-{s.run.id}"),
        "links": links,
        "log_href": _href(s.log, page) if s.log else None,
        "log_size": human_bytes(s.log.stat().st_size) if s.log and s.log.is_file() else "",
    }


class _View:
    """A session with what its page adds (figure, links) readable as attributes."""

    def __init__(self, data: SessionData, extra: dict[str, Any]) -> None:
        self._data = data
        self._extra = extra

    def __getattr__(self, name: str) -> Any:
        if name in self._extra:
            return self._extra[name]
        return getattr(self._data, name)


def render_session(session: SessionData, *, page: Path) -> str:
    view = _View(session, _session_context(session, page))
    return _environment().get_template("session.html.j2").render(s=view, **_common())


def render_journal(sessions: Sequence[SessionData], *, store: str, page: Path) -> str:
    views = [_View(s, _session_context(s, page)) for s in sessions]
    return (
        _environment()
        .get_template("journal.html.j2")
        .render(sessions=views, store=store, **_common())
    )


def write_html(text: str, path: Path) -> Path:
    """Write the page atomically (a reader never sees half of it)."""
    path = Path(os.path.abspath(path.expanduser()))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
