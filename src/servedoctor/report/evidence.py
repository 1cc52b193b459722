"""Evidence lines with their roles (error, frame, clue), as the terminal marks them.

A diagnosis made now carries the roles; one read back from run.json or the findings store
does not (the JSON contract holds line and text only). For those the roles are inferred
from the text: a traceback frame is a frame, the last error-looking line is the error, the
rest are clues.
"""

from __future__ import annotations

import re

from servedoctor.model import Evidence

__all__ = ["MARK", "infer_roles", "roles_by_line"]

#: The terminal's marks (report/terminal.py), per role.
MARK = {"error": "E", "frame": ">", "clue": "~", "context": " ", "gap": "⋮"}

_FRAME = re.compile(r'^\s*(File "[^"]+", line \d+|at [\w.$<>]+\(|#\d+\s+0x[0-9a-f]+)')
_ERROR = re.compile(r"(Error|Exception|error|Assertion|assert|failed|FAILED|Killed|Abort)")


def infer_roles(evidence: tuple[Evidence, ...]) -> tuple[Evidence, ...]:
    """The evidence with roles: kept when any is set, else inferred from the text."""
    if any(e.role != "context" for e in evidence):
        return evidence
    frames = {i for i, e in enumerate(evidence) if _FRAME.search(e.text)}
    errors = [i for i, e in enumerate(evidence) if i not in frames and _ERROR.search(e.text)]
    error = errors[-1] if errors else (len(evidence) - 1 if evidence else -1)
    out = []
    for i, e in enumerate(evidence):
        role = "error" if i == error else "frame" if i in frames else "clue"
        out.append(Evidence(e.line, e.text, role))  # type: ignore[arg-type]
    return tuple(out)


def roles_by_line(evidence: tuple[Evidence, ...]) -> dict[int, str]:
    """Line → role; where two evidence lines share a line, the stronger role wins."""
    rank = {"error": 3, "frame": 2, "clue": 1, "context": 0}
    out: dict[int, str] = {}
    for e in evidence:
        if rank[e.role] >= rank.get(out.get(e.line, "context"), 0):
            out[e.line] = e.role
    return out
