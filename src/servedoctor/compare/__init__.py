"""Three-way diff of a model card's launch command, the command used and the server's config."""

from __future__ import annotations

from servedoctor.compare.card import CardCommand, card_commands
from servedoctor.compare.diff import AutoChange, Comparison, FlagRow, compare, scan_log

__all__ = [
    "AutoChange",
    "CardCommand",
    "Comparison",
    "FlagRow",
    "card_commands",
    "compare",
    "scan_log",
]
