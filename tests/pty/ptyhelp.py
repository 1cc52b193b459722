"""Drive the real CLI in a pseudo-terminal (pexpect), as a person at a terminal would.

The real-server fixtures and helpers come from tests/realserve.py, so both folders can run
in one pytest session.
"""

from __future__ import annotations

import os
import re
import time

import pexpect
import pytest

from realserve import (  # noqa: F401 (re-exported for the pty tests)
    SERVEDOCTOR,
    VENV_BIN,
    free_port,
    processes_mentioning,
    realserver,
    serve_cmd,
    tinymodels,
)

#: Terminal control sequences rich writes (colours, cursor moves, hide/show cursor).
_ANSI = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()=>][0-9A-Za-z]?"
)


_TOKENS = re.compile(
    r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()=>][0-9A-Za-z]?"
    r"|\r|\n|[^\x1b\r\n]+"
)


def screen_lines(raw: str) -> list[str]:
    """What stays on a terminal after ``raw``: a small replay of text, CR, LF, cursor up
    (``ESC[nA``) and erase line (``ESC[2K``), the moves rich's live panel makes."""
    lines, row, col = [""], 0, 0
    for m in _TOKENS.finditer(raw):
        token = m.group(0)
        if token == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif token == "\r":
            col = 0
        elif m.group(2) == "A":
            row = max(0, row - int(m.group(1) or 1))
        elif m.group(2) == "K" and m.group(1) == "2":
            lines[row] = ""
        elif not token.startswith("\x1b"):
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + len(token) :]
            col += len(token)
    return [line.rstrip() for line in lines]


class Term:
    """One CLI run in a 120x40 pseudo-terminal; ``text`` is everything it drew, plain."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        full = {**os.environ, **env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
        full.pop("NO_COLOR", None)
        self.child = pexpect.spawn(
            SERVEDOCTOR, args, env=full, dimensions=(40, 120), encoding="utf-8", timeout=5
        )
        self.raw = ""

    @property
    def text(self) -> str:
        return _ANSI.sub("", self.raw).replace("\r", "")

    def screen(self) -> list[str]:
        return screen_lines(self.raw)

    def _read(self, wait: float) -> bool:
        """Read what is there (up to ``wait`` s); False at end of output."""
        try:
            self.raw += self.child.read_nonblocking(1 << 20, timeout=wait)
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            return False
        return True

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.text)
            if found is not None:
                return found
            if time.monotonic() > deadline or not self._read(0.2):
                found = re.search(pattern, self.text)
                if found is not None:
                    return found
                tail = self.text[-3000:]
                pytest.fail(
                    f"{pattern!r} never appeared in {timeout:g} s; the screen ended:\n{tail}"
                )

    def finish(self, timeout: float) -> int:
        """Read to the end; the exit status (128+N for a signal N)."""
        deadline = time.monotonic() + timeout
        while self._read(0.5):
            if time.monotonic() > deadline:
                self.child.kill(9)
                pytest.fail(f"still running after {timeout:g} s:\n{self.text[-3000:]}")
        self.child.close()
        if self.child.signalstatus is not None:
            return 128 + int(self.child.signalstatus)
        return int(self.child.exitstatus)

    def kill(self) -> None:
        if self.child.isalive():
            self.child.kill(9)
