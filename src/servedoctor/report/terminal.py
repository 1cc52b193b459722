"""Render a :class:`Diagnosis` for people: evidence first, in context, failing line marked.

The layout follows pytest's failure output: ``path:line:`` headers editors understand,
context lines indented, the frame marked ``>``, the error marked ``E``.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from servedoctor.model import Diagnosis, Hypothesis
from servedoctor.report.context import read_context

_MARK = {"error": "E", "frame": ">", "clue": "~", "context": " "}
_STYLE = {"error": "bold red", "frame": "bold", "clue": "yellow", "context": "dim"}


def evidence_block(diagnosis: Diagnosis, *, with_context: bool = True) -> Text:
    wanted = [e.line for e in diagnosis.evidence if e.role in ("error", "frame")]
    context = read_context(diagnosis.file, wanted) if with_context else {}
    by_line = {e.line: e for e in diagnosis.evidence}
    numbers = sorted(set(context) | set(by_line))
    width = len(str(numbers[-1])) if numbers else 1
    out = Text(no_wrap=True, overflow="ellipsis")
    previous = 0
    for n in numbers:
        if previous and n > previous + 1:
            out.append(f"  {'':>{width}} ⋮\n", style="dim")
        previous = n
        evidence = by_line.get(n)
        role = evidence.role if evidence else "context"
        text = evidence.text if evidence and n not in context else context.get(n, "")
        out.append(f"{_MARK[role]} {n:>{width}} | ", style=_STYLE[role])
        out.append(text[:220] + "\n", style=_STYLE[role] if evidence else "")
    return out


def hypotheses_table(hypotheses: tuple[Hypothesis, ...]) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    table.add_column("#", justify="right")
    table.add_column("conf", justify="right")
    table.add_column("one change to test it", style="cyan", no_wrap=True)
    table.add_column("hypothesis")
    for i, h in enumerate(hypotheses, start=1):
        change = h.changes[0].describe() if h.changes else "(observe only)"
        table.add_row(str(i), f"{h.confidence:.2f}", change, f"{h.cause} [dim]({h.id})[/]")
    return table


def render(diagnosis: Diagnosis, console: Console, *, with_context: bool = True) -> None:
    if not diagnosis.failed:
        console.print(f"[green]{escape(diagnosis.file)}: no failure found[/]")
        return
    first = next((e.line for e in diagnosis.evidence if e.role == "error"), 0)
    rules = ", ".join(diagnosis.rules) or "no rule"
    header = Text.assemble(
        (f"{diagnosis.file}:{first}: ", "bold"),
        (f"{diagnosis.error_class}", "bold red"),
        f" · {diagnosis.phase} · {diagnosis.component}",
        (f" · {diagnosis.culprit}" if diagnosis.culprit else ""),
        (f"  [{rules}]", "dim"),
    )
    parts: list[object] = [header, Text(diagnosis.summary)]
    if diagnosis.extras.get("truncated"):
        parts.append(Text("(the log ends mid-line: it was cut, the failure may go on)", "dim"))
    parts.append(Text(""))
    if diagnosis.evidence:
        parts.append(evidence_block(diagnosis, with_context=with_context))
    if diagnosis.hypotheses:
        parts.append(Text("Hypotheses, most informative first (one change each):", style="bold"))
        parts.append(hypotheses_table(diagnosis.hypotheses))
    console.print(Panel(Group(*parts), expand=True, border_style="red"))  # type: ignore[arg-type]
