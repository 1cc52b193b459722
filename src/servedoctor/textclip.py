"""Shorten text for a summary line without cutting a word in half."""

from __future__ import annotations

ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """``text`` with runs of whitespace folded, cut at the last word boundary that fits
    ``limit`` characters (an ellipsis marks the cut); a single overlong word is cut hard."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    room = max(1, limit - len(ELLIPSIS))
    cut = flat[: room + 1].rsplit(" ", 1)[0] if " " in flat[: room + 1] else flat[:room]
    return cut[:room].rstrip(" ,;:") + ELLIPSIS
