"""The system OpenSSH client as a transport: argv building and one-shot remote commands.

Only the remote login shell ever parses a command line: ``ssh`` sends its command as one
string, so the remote argv is quoted with :func:`shlex.join` for a POSIX shell (sh, bash,
dash, zsh; not fish or csh). Locally nothing goes through a shell. ``BatchMode=yes`` means
ssh never prompts (a missing key is an error, not a hang), and keep-alives notice a dead
connection in about 15 s. The user's ``~/.ssh/config``, agent and jump hosts apply as usual.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from servedoctor.errors import UserError
from servedoctor.remote.url import SshTarget

AGENT = Path(__file__).with_name("agent.py")
CONNECT_TIMEOUT_S = 15
_OPTIONS = (
    "BatchMode=yes",
    f"ConnectTimeout={CONNECT_TIMEOUT_S}",
    "ServerAliveInterval=5",
    "ServerAliveCountMax=3",
    "ExitOnForwardFailure=yes",
)


@dataclass(frozen=True)
class Forward:
    """``ssh -L``: a loopback port here that reaches ``remote_host:remote_port`` there."""

    local_port: int
    remote_host: str
    remote_port: int

    def spec(self) -> str:
        host = f"[{self.remote_host}]" if ":" in self.remote_host else self.remote_host
        return f"127.0.0.1:{self.local_port}:{host}:{self.remote_port}"


def ssh_binary() -> str:
    found = shutil.which("ssh")
    if found is None:
        raise UserError("--on needs the OpenSSH client (ssh) on PATH")
    return found


def ssh_argv(
    target: SshTarget, remote_argv: Sequence[str], *, forwards: Sequence[Forward] = ()
) -> list[str]:
    """The local argv that runs ``remote_argv`` on ``target`` (quoted for its shell)."""
    argv = [ssh_binary(), "-T"]
    if target.config_file:
        argv += ["-F", target.config_file]
    for option in _OPTIONS:
        argv += ["-o", option]
    if target.port:
        argv += ["-p", str(target.port)]
    if target.user:
        argv += ["-l", target.user]
    for forward in forwards:
        argv += ["-L", forward.spec()]
    return [*argv, "--", target.destination, shlex.join(list(remote_argv))]


def agent_argv(target: SshTarget, *args: str) -> list[str]:
    """The remote argv that runs the agent (sent whole as ``python3 -c``) with ``args``."""
    return [target.python, "-c", AGENT.read_text(encoding="utf-8"), *args]


def run_agent(target: SshTarget, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the agent once on ``target`` (its stdin closed), output captured."""
    return subprocess.run(
        ssh_argv(target, agent_argv(target, *args)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


def run_remote(
    target: SshTarget, remote_argv: Sequence[str], *, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run a plain command on ``target`` (no agent), output captured."""
    return subprocess.run(
        ssh_argv(target, remote_argv),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )
