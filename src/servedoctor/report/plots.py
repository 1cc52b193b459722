"""The report's figures, drawn by matplotlib as SVG and inlined into the page.

matplotlib renders offline, needs no browser-side script, and its SVG keeps text as text
(``svg.fonttype: none``). Colours of text, axes and grid are drawn in placeholder colours
and replaced by CSS variables, so one figure follows the page's light or dark theme and
prints in black on white. Every drawn series carries an id (``phase-N``, ``gpu-N``,
``series-rss``, ``trial-N``) that tests and readers can find.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

from servedoctor.launch.samples import Sample
from servedoctor.launch.types import PhaseSpan

__all__ = ["MAX_POINTS", "Figure", "TrialBar", "timeline_figure", "trials_figure", "usage_figure"]

#: Above this many samples a series is drawn as per-bucket minimum and maximum.
MAX_POINTS = 2000

_FG, _MUTED, _GRID = "#010203", "#040506", "#070809"
_CSS = {_FG: "var(--fg)", _MUTED: "var(--muted)", _GRID: "var(--grid)"}
#: Okabe–Ito: tells apart for colour-blind readers, readable on light and dark grounds.
_PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442")
_PHASE_COLOUR = {
    "install": "#999999",
    "startup": "#56b4e9",
    "load": "#0072b2",
    "memory_setup": "#cc79a7",
    "graph_capture": "#e69f00",
    "warmup": "#f0e442",
    "serving": "#009e73",
    "prefill": "#009e73",
    "decode": "#009e73",
    "shutdown": "#999999",
}
_OUTCOME_COLOUR = {
    "healthy": "#009e73",
    "failed": "#d55e00",
    "same_failure": "#d55e00",
    "different_failure": "#e69f00",
    "rejected": "#cc79a7",
    "interrupted": "#999999",
}
_FAIL = "#d55e00"


@dataclass(frozen=True, slots=True)
class Figure:
    svg: str  # an <svg> element
    count: int  # what it draws: phases, samples or trials
    points: int = 0  # points drawn per series (fewer than samples when bucketed)
    caption: str = ""


def _rc() -> Any:  # matplotlib types the keys as a Literal of every rc name
    return {
        "svg.fonttype": "none",
        "svg.hashsalt": "servedoctor",
        "path.simplify": False,
        "font.size": 9,
        "font.family": "sans-serif",
        "text.color": _FG,
        "axes.labelcolor": _FG,
        "axes.edgecolor": _MUTED,
        "xtick.color": _MUTED,
        "ytick.color": _MUTED,
        "xtick.labelcolor": _FG,
        "ytick.labelcolor": _FG,
        "grid.color": _GRID,
        "axes.facecolor": "none",
        "figure.facecolor": "none",
        "savefig.facecolor": "none",
        "legend.frameon": False,
    }


def _svg(fig: MplFigure, name: str) -> str:
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": name}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # no XML prolog or DOCTYPE inside HTML
    for colour, var in _CSS.items():
        text = text.replace(colour, var)
    # ids unique across the page's figures; the page sizes the figure to its column
    text = text.replace('id="', f'id="{name}-').replace("url(#", f"url(#{name}-")
    text = text.replace('xlink:href="#', f'xlink:href="#{name}-')
    return text.replace("<svg ", f'<svg class="plot" role="img" aria-label="{name}" ', 1)


def _new(height_in: float, rows: int = 1) -> tuple[MplFigure, list[Axes]]:
    fig = MplFigure(figsize=(9.0, height_in), layout="constrained")
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)
    return fig, [row[0] for row in axes]


def timeline_figure(
    phases: Sequence[PhaseSpan],
    *,
    end_s: float,
    failure_at: float | None = None,
    failure_label: str = "",
) -> Figure:
    """One bar per phase span on a time axis; the failure is a red line with its label."""
    with matplotlib.rc_context(_rc()):
        fig, (ax,) = _new(1.2)
        lanes: dict[str, int] = {}
        for i, span in enumerate(phases):
            lane = lanes.setdefault(span.name, len(lanes))
            end = span.end if span.end is not None else end_s
            width = max(end - span.start, end_s / 400)  # an instant still shows
            bars = ax.barh(
                lane,
                width,
                left=span.start,
                height=0.7,
                color=_PHASE_COLOUR.get(span.name, "#999999"),
            )
            bars.patches[0].set_gid(f"phase-{i}")
            bars.patches[0].set_label(f"{span.name}: {span.label}")
        ax.set_yticks(range(len(lanes)), list(lanes))
        ax.invert_yaxis()
        ax.set_ylim(len(lanes) - 0.4, -0.6)
        if failure_at is not None:
            line = ax.axvline(failure_at, color=_FAIL, linewidth=2)
            line.set_gid("failure")
            ax.annotate(
                failure_label or "failure",
                (failure_at, 0),
                xytext=(-4, 0) if failure_at > 0.6 * end_s else (4, 0),
                textcoords="offset points",
                color=_FAIL,
                va="center",
                ha="right" if failure_at > 0.6 * end_s else "left",
                fontweight="bold",
            )
        ax.set_xlim(0, max(end_s, 1e-3) * 1.01)
        ax.set_xlabel("seconds since launch")
        ax.grid(axis="x", linewidth=0.5)
        fig.set_figheight(0.9 + 0.32 * max(1, len(lanes)))
        return Figure(_svg(fig, "timeline"), len(phases))


def _thin(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    """At most :data:`MAX_POINTS` points: each bucket's minimum and maximum, in order."""
    if len(xs) <= MAX_POINTS:
        return list(xs), list(ys)
    buckets = MAX_POINTS // 2
    size = len(xs) / buckets
    out_x: list[float] = []
    out_y: list[float] = []
    for b in range(buckets):
        lo, hi = int(b * size), max(int((b + 1) * size), int(b * size) + 1)
        idx = range(lo, min(hi, len(xs)))
        i_min = min(idx, key=ys.__getitem__)
        i_max = max(idx, key=ys.__getitem__)
        for i in sorted({i_min, i_max}):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


def usage_figure(
    samples: Sequence[Sample],
    *,
    end_s: float,
    memory_gib: Mapping[str, float] | None = None,
    failure_at: float | None = None,
) -> Figure | None:
    """GPU memory per GPU over time; where no sample has a GPU, the host RSS and CPU of the
    server's process tree. The figures the log stated (weights, KV cache) are dashed lines."""
    if not samples:
        return None
    xs = [s.t for s in samples]
    gpus = max(len(s.gpu_mib) for s in samples)
    with matplotlib.rc_context(_rc()):
        points = 0
        if gpus:
            fig, (ax,) = _new(2.6)
            for g in range(gpus):
                ys = [(s.gpu_mib[g] if g < len(s.gpu_mib) else 0.0) / 1024 for s in samples]
                tx, ty = _thin(xs, ys)
                points = len(tx)
                (line,) = ax.plot(tx, ty, color=_PALETTE[g % len(_PALETTE)], label=f"GPU {g}")
                line.set_gid(f"gpu-{g}")
            for i, (name, gib) in enumerate(sorted((memory_gib or {}).items())):
                ref = ax.axhline(
                    gib,
                    color=_MUTED,
                    linestyle="--",
                    linewidth=1,
                    label=f"{name} (log): {gib:.2f} GiB",
                )
                ref.set_gid(f"stated-{i}")
            ax.set_ylabel("GPU memory in use (GiB)")
            ax.legend(loc="upper left", fontsize=8)
            axes = [ax]
            what = f"{len(samples)} NVML samples of {gpus} GPU{'s' if gpus > 1 else ''}"
        else:
            fig, axes = _new(3.2, rows=2)
            rss = [s.rss_mib / 1024 for s in samples]
            cpu = [s.cpu_pct for s in samples]
            for ax, ys, gid, label, colour in (
                (axes[0], rss, "series-rss", "host RSS (GiB)", _PALETTE[0]),
                (axes[1], cpu, "series-cpu", "CPU (%, 100 = a core)", _PALETTE[1]),
            ):
                tx, ty = _thin(xs, ys)
                points = len(tx)
                (line,) = ax.plot(tx, ty, color=colour)
                line.set_gid(gid)
                ax.set_ylabel(label)
                ax.set_ylim(bottom=0)
            what = f"{len(samples)} samples of the server's process tree (no GPU)"
        for ax in axes:
            ax.grid(linewidth=0.5)
            if failure_at is not None:
                ax.axvline(failure_at, color=_FAIL, linewidth=1.5)
        axes[-1].set_xlim(0, max(end_s, xs[-1], 1e-3) * 1.01)
        axes[-1].set_xlabel("seconds since launch")
        if points < len(samples):
            what += f", drawn as {points} points (each bucket's minimum and maximum)"
        return Figure(_svg(fig, "usage"), len(samples), points, what)


@dataclass(frozen=True, slots=True)
class TrialBar:
    label: str
    outcome: str
    start_s: float
    duration_s: float


def trials_figure(trials: Sequence[TrialBar], *, name: str = "trials") -> Figure | None:
    """One row per trial, in order, on the session's time axis; coloured by outcome."""
    if not trials:
        return None
    with matplotlib.rc_context(_rc()):
        fig, (ax,) = _new(0.8 + 0.3 * len(trials))
        for i, t in enumerate(trials):
            bars = ax.barh(
                i,
                max(t.duration_s, 0.1),
                left=t.start_s,
                height=0.7,
                color=_OUTCOME_COLOUR.get(t.outcome, "#999999"),
            )
            bars.patches[0].set_gid(f"trial-{i}")
        ax.set_yticks(range(len(trials)), [t.label[:48] for t in trials])
        ax.invert_yaxis()
        end = max(t.start_s + t.duration_s for t in trials)
        ax.set_xlim(0, max(end, 1e-3) * 1.01)
        ax.set_xlabel("seconds since the session started (trials back to back)")
        ax.grid(axis="x", linewidth=0.5)
        return Figure(_svg(fig, name), len(trials))
