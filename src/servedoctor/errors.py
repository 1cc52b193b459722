"""Errors the user can act on: the CLI prints them as one line and exits 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input: a missing file, an unknown flag, a command that does not exist."""

    exit_code = 2
