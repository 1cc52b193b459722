"""Servers on remote hosts through the system OpenSSH client.

``url`` parses ``ssh://[user@]host[:port]``; ``ssh`` builds the ``ssh`` argv (the remote
argv quoted for the remote login shell, the one place a shell is involved); ``agent`` is the
stdlib-only script that runs there, starts the server in its own process group and stops it
when told or when its connection drops; ``process`` is the local end the supervisor drives;
``launching`` adds the port forward; ``multinode`` plans per-node commands.
"""

from __future__ import annotations

from servedoctor.remote.url import SshTarget, parse_target

__all__ = ["SshTarget", "parse_target"]
