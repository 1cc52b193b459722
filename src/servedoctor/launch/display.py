"""What a person sees: a live panel while the server comes up, then the run's summary.

One panel for ``launch`` and for every trial of ``fix``: the current phase and its elapsed
time, the total against the time such a run took before (from the findings store), progress
bars (weights, graphs), memory figures (GPU memory per GPU; without a GPU, CPU and RSS of
the server's process tree) and the last log line. It is drawn only on a terminal; elsewhere
each phase change, probe and failure prints as one line. The summary is built from a
:class:`RunResult`, so ``--json`` and the text agree.
"""

from __future__ import annotations

import contextlib
import re
import termios
import time
from types import TracebackType
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from servedoctor.launch.process import describe_exit
from servedoctor.launch.types import LaunchEvent, RunResult, SmokeResult
from servedoctor.redact import redact_text
from servedoctor.textclip import clip

_OUTCOME_STYLE = {"healthy": "bold green", "failed": "bold red", "interrupted": "bold yellow"}
_PLAIN_EVENTS = frozenset(
    {"started", "phase", "ready", "probe", "failure", "teardown", "gpu", "attached"}
)


class LiveDisplay:
    """An ``on_event`` sink; use as a context manager around :func:`launch`."""

    def __init__(
        self, console: Console, *, title: str = "", expected_s: float | None = None
    ) -> None:
        self.console = console
        self.live_mode = console.is_terminal
        self.title = title  # e.g. "trial 2 · candidate" under fix
        self.expected_s = expected_s  # how long such a run took before (findings store)
        self._live: Live | None = None
        self._tty_fd = -1
        self._tty_attrs: list[Any] | None = None  # the terminal's settings, while changed
        self._t0 = time.monotonic()
        self.phase = "startup"
        self.label = "process started"
        self.phase_since = 0.0
        self.progress: dict[str, tuple[float | None, str]] = {}
        self.memory: dict[str, float] = {}
        self.gpu_mib: float | None = None
        self.per_gpu_mib: list[float] = []
        self.usage = ""  # CPU and RSS of the server's tree, when there is no GPU
        self.last_line = ""
        self.status = ""
        self.failed = False
        self.smoke: SmokeResult | None = None

    def __enter__(self) -> LiveDisplay:
        if self.live_mode:
            self._keep_output_on_interrupt()
            self._live = Live(
                self.render(),
                console=self.console,
                refresh_per_second=4,
                transient=True,
                get_renderable=self.render,
            )
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
            self._live = None
        if self._tty_attrs is not None:
            with contextlib.suppress(OSError, ValueError, termios.error):
                termios.tcsetattr(self._tty_fd, termios.TCSADRAIN, self._tty_attrs)
            self._tty_attrs = None

    def _keep_output_on_interrupt(self) -> None:
        """Ctrl-C makes the terminal drop output not yet shown (the rest of a panel frame);
        the panel would then erase lines printed above it. NOFLSH keeps that output."""
        with contextlib.suppress(OSError, ValueError, AttributeError, termios.error):
            fd = self.console.file.fileno()
            attrs = termios.tcgetattr(fd)
            changed = list(attrs)
            changed[3] = attrs[3] | termios.NOFLSH
            termios.tcsetattr(fd, termios.TCSADRAIN, changed)
            self._tty_fd, self._tty_attrs = fd, attrs

    def __call__(self, event: LaunchEvent) -> None:
        data = event.data
        if event.kind == "phase":
            self.phase, self.label, self.phase_since = event.phase, event.message, event.t
        elif event.kind == "progress":
            done, total = data.get("done"), data.get("total")
            count = f"{done}/{total}" if done is not None and total is not None else ""
            self.progress[str(data.get("name"))] = (data.get("fraction"), count)
        elif event.kind == "memory":
            self.memory[str(data.get("name"))] = float(data.get("gib", 0.0))
        elif event.kind == "gpu" and "used_mib" in data:
            self.gpu_mib = float(data["used_mib"])
            self.per_gpu_mib = [float(x) for x in data.get("per_gpu_mib", [])]
        elif event.kind == "usage":
            self.usage = event.message
        elif event.kind == "line":
            self.last_line = printable(event.message)[-160:]
        elif event.kind in ("probe", "ready", "failure", "teardown", "attached"):
            if not (self.failed and event.kind == "teardown"):
                self.status = event.message
            self.failed = self.failed or event.kind == "failure"
            if event.kind == "probe" and data.get("kind") == "smoke" and "ok" in data:
                self.smoke = _smoke_from(data)
        if event.kind == "attached" and self.live_mode:
            self._print_attached(event)
        if not self.live_mode and event.kind in _PLAIN_EVENTS and not _is_gpu_sample(event):
            self.console.print(
                f"[dim]{event.t:7.1f}s[/] [bold]{escape(event.phase)}[/] "
                f"{escape(printable(event.message))}",
                highlight=False,
            )

    def _print_attached(self, event: LaunchEvent) -> None:
        """Above the panel, once: the smoke test passed and where the server listens."""
        if self.smoke is not None:
            self.console.print(_probe_line(self.smoke), highlight=False)
        self.console.print(
            Text.assemble(("✓ ", "green"), (f"{event.t:.1f} s ", "dim"), event.message),
            highlight=False,
        )

    def render(self) -> RenderableType:
        elapsed = time.monotonic() - self._t0
        total = f"   (total {elapsed:.1f} s"
        if self.expected_s is not None:
            total += f" · usually ~{self.expected_s:.0f} s here"
        head = Text.assemble(
            ("✗ ", "bold red") if self.failed else ("● ", "cyan"),
            (f"{self.title} · ", "bold") if self.title else "",
            (self.phase, "bold"),
            f" · {self.label} · {max(0.0, elapsed - self.phase_since):.1f} s",
            (total + ")", "dim"),
        )
        parts: list[RenderableType] = [head]
        if self.progress:
            grid = Table.grid(padding=(0, 1))
            for name, (fraction, count) in self.progress.items():
                bar = ProgressBar(total=1.0, completed=fraction or 0.0, width=30)
                grid.add_row(Text(name, style="dim"), bar, Text(count))
            parts.append(grid)
        figures = [f"{k} {v:.2f} GiB" for k, v in self.memory.items()]
        if len(self.per_gpu_mib) > 1:
            figures += [f"GPU{i} {mib:.0f} MiB" for i, mib in enumerate(self.per_gpu_mib)]
        elif self.gpu_mib is not None:
            figures.append(f"GPU (run) {self.gpu_mib:.0f} MiB")
        if figures:
            parts.append(Text("memory: " + " · ".join(figures), style="magenta"))
        if self.usage and self.gpu_mib is None:
            parts.append(Text(f"server tree: {self.usage}", style="magenta"))
        if self.status:
            parts.append(Text(self.status, style="bold red" if self.failed else "yellow"))
        if self.last_line:
            parts.append(Text(self.last_line, style="dim", overflow="ellipsis", no_wrap=True))
        return Group(*parts)


#: Terminal control from the server's output: CSI and OSC escape sequences (colours, window
#: titles, cursor moves) and other C0 control characters. Shown text never carries them.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, clear screen
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlinks
    r"|\x1b[@-_]?"  # other escapes
    r"|[\x00-\x08\x0b-\x1f\x7f\x9b]"  # C0 controls (tab and newline kept), DEL, CSI
)


def printable(text: str) -> str:
    """``text`` with terminal escape sequences and control characters removed."""
    return _CONTROL.sub("", text)


def _is_gpu_sample(event: LaunchEvent) -> bool:
    return event.kind == "gpu" and "used_mib" in event.data


def _smoke_from(data: Any) -> SmokeResult:
    return SmokeResult(
        kind="smoke",
        ok=bool(data.get("ok")),
        status=data.get("status"),
        ttft_s=data.get("ttft_s"),
        latency_s=data.get("latency_s"),
        tokens=int(data.get("tokens") or 0),
        text=str(data.get("text") or ""),
        error=data.get("error"),
    )


def render_result(result: RunResult) -> RenderableType:
    """The summary printed when the run ends."""
    parts: list[RenderableType] = []
    style = _OUTCOME_STYLE[result.outcome]
    parts.append(
        Text.assemble(
            (result.outcome.upper(), style),
            f"  {result.engine} · {result.duration_s:.1f} s · run {result.run_dir}",
        )
    )
    table = Table(box=None, show_header=True, header_style="dim", pad_edge=False)
    table.add_column("phase")
    table.add_column("label")
    table.add_column("start", justify="right")
    table.add_column("end", justify="right")
    for span in result.phases:
        end = "…" if span.end is None else f"{span.end:.2f}"
        table.add_row(span.name, span.label, f"{span.start:.2f}", end)
    parts.append(table)
    for probe in (result.smoke, result.liveness):
        if probe is not None:
            parts.append(_probe_line(probe))
    if result.attached_s is not None:
        how = f"; stopped by {result.stopped_by}" if result.stopped_by else ""
        parts.append(Text(f"attached {result.attached_s:.1f} s after the smoke test{how}"))
    if result.failure is not None:
        f = result.failure
        parts.append(
            Text.assemble(
                ("failure: ", "bold red"), f"{f.kind} in {f.phase} at {f.at_s:.1f} s — ", f.detail
            )
        )
    d = result.diagnosis
    if d is not None:
        parts.append(
            Text.assemble(
                ("diagnosis: ", "bold"),
                (f"{d.error_class or '-'}", "bold red"),
                f" · phase {d.phase or '-'} · component {d.component or '-'}",
                f" · rules {', '.join(d.rules)}" if d.rules else "",
            )
        )
        if d.summary:
            parts.append(Text("  " + d.summary))
        for ev in d.evidence[:8]:
            shown = clip(redact_text(ev.text), 200)
            parts.append(Text(f"  {d.file}:{ev.line}: {shown}", style="dim"))
        for h in d.hypotheses[:3]:
            change = "; ".join(c.describe() for c in h.changes) or "(observation)"
            parts.append(Text(f"  try: {change} — {h.cause} ({h.confidence:.0%})"))
    tail: list[Any] = [f"leftover processes: {result.leftover_processes}"]
    if result.exit_code is not None:
        tail.append(f"server {describe_exit(result.exit_code)}")
    if result.gpu is not None:
        g = result.gpu
        released = {True: "released", False: "NOT released", None: "?"}[g.released]
        tail.append(f"GPU peak {g.peak_mib:.0f} MiB, {released} (after {g.after_mib or 0:.0f} MiB)")
    parts.append(Text(" · ".join(tail), style="dim" if result.leftover_processes == 0 else "red"))
    if result.kept_running and result.pid is not None:
        parts.append(
            Text(
                f"server left running (pid {result.pid}); "
                f"stop it with: kill -TERM -- -{result.pid}",
                style="bold",
            )
        )
    return Group(*parts)


def _probe_line(probe: SmokeResult) -> Text:
    mark = ("✓", "green") if probe.ok else ("✗", "red")
    bits = [f"{probe.kind}:"]
    if probe.ttft_s is not None:
        bits.append(f"first token {probe.ttft_s * 1000:.0f} ms,")
    if probe.latency_s is not None:
        bits.append(f"{probe.latency_s:.2f} s,")
    bits.append(f"{probe.tokens} tokens")
    if probe.text.strip():
        bits.append(repr(probe.text[:60]))
    if probe.error:
        bits.append(f"— {probe.error}")
    return Text.assemble(mark, " ", " ".join(bits))
