"""The command that works, as a stored fix session ends: argv, environment, packages.

Shown in ``findings --json``, the Markdown export and by ``fix`` itself, as one shell line
(quoted, secrets as stored: masked) plus the ``pip install`` a package fix needs.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from servedoctor.env.serverenv import resolve_python
from servedoctor.experiments.command import parse
from servedoctor.experiments.overlay import requirement_of
from servedoctor.model import Change

__all__ = ["WorkingCommand", "shell_line", "working_command"]


@dataclass(frozen=True, slots=True)
class WorkingCommand:
    argv: list[str]
    env: dict[str, str]
    packages: list[str]  # requirements to install in the server's environment
    python: str | None = None  # the server's interpreter: its pip installs them

    def to_dict(self) -> dict[str, Any]:
        return {"argv": self.argv, "env": self.env, "packages": self.packages,
                "python": self.python}  # fmt: skip

    def lines(self) -> list[str]:
        pip = [self.python, "-m", "pip"] if self.python else ["pip"]
        installs = [shlex.join([*pip, "install", r]) for r in self.packages]
        return [*installs, shell_line(self.argv, self.env)]


def shell_line(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """``NAME=value ... argv`` for a shell: each value and argument quoted, never the
    assignment itself (a quoted ``'NAME=value'`` would be run as a program)."""
    assignments = [f"{k}={shlex.quote(v)}" for k, v in env.items()]
    return " ".join([*assignments, shlex.join(argv)])


def working_command(
    argv: Sequence[str], env: Mapping[str, str], changes: Sequence[Change]
) -> WorkingCommand | None:
    """The command with ``changes`` applied, or None when there is nothing to show."""
    if not argv or not changes:
        return None
    cmd = parse([*(f"{k}={v}" for k, v in env.items()), *argv])
    for change in changes:
        if change.kind != "package":
            cmd = cmd.apply(change)
    packages = [req for c in changes if (req := requirement_of(c))]
    python = None
    if packages:  # the server's own pip, not whichever one is first on the PATH
        found = resolve_python(argv, env={**os.environ, **cmd.env})
        python = found.path if found.how != "not found" else None
    return WorkingCommand(cmd.render(), dict(cmd.env), packages, python)
