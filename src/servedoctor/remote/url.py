"""Where a command runs: ``ssh://[user@]host[:port]`` parsed into an :class:`SshTarget`.

A password in the URL is refused (keys, agents and ``~/.ssh/config`` are how OpenSSH logs in
without asking; ``BatchMode=yes`` never asks). Two environment variables tune the transport:
``SERVEDOCTOR_SSH_CONFIG`` (a config file for ``ssh -F``) and ``SERVEDOCTOR_REMOTE_PYTHON``
(the remote interpreter that runs the agent; ``python3`` by default).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from servedoctor.errors import UserError
from servedoctor.redact import redact_url

SSH_CONFIG_VAR = "SERVEDOCTOR_SSH_CONFIG"
REMOTE_PYTHON_VAR = "SERVEDOCTOR_REMOTE_PYTHON"
#: A host name, an IPv4 address or a bracketed IPv6 address; never an option (``-oProxy…``).
_HOST = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.\-]*|\[[0-9A-Fa-f:.%\w]+\])$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True)
class SshTarget:
    """A remote host reached through the system OpenSSH client."""

    host: str
    user: str | None = None
    port: int | None = None
    config_file: str | None = None  # ``ssh -F``; None: the user's own ~/.ssh/config
    python: str = "python3"  # the remote interpreter that runs the agent

    @property
    def url(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"ssh://{user}{self.host}{port}"

    @property
    def destination(self) -> str:
        """What ``ssh`` is given as its destination (the user goes in ``-l``)."""
        return self.host[1:-1] if self.host.startswith("[") else self.host


def parse_target(url: str, environ: Mapping[str, str] | None = None) -> SshTarget:
    """``ssh://[user@]host[:port]`` (or a bare ``[user@]host``) → :class:`SshTarget`."""
    env = os.environ if environ is None else environ
    text = url.strip()
    if "://" not in text:
        text = "ssh://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise UserError(f"--on {redact_url(url)!r}: {exc}") from None
    if parts.scheme != "ssh":
        raise UserError(f"--on wants ssh://[user@]host[:port], got {redact_url(url)!r}")
    if parts.password is not None:
        raise UserError(
            "--on: a password in the URL is refused; use a key, an agent or ~/.ssh/config"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UserError(f"--on wants ssh://[user@]host[:port], got {redact_url(url)!r}")
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if not host or not _HOST.match(host):
        raise UserError(f"--on: not a host name: {host!r}")
    user = unquote(parts.username) if parts.username else None
    if user is not None and not _USER.match(user):
        raise UserError(f"--on: not a user name: {user!r}")
    return SshTarget(
        host=host,
        user=user,
        port=port,
        config_file=env.get(SSH_CONFIG_VAR) or None,
        python=env.get(REMOTE_PYTHON_VAR) or "python3",
    )
