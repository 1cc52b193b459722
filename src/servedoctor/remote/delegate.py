"""``env --on`` and ``preflight --on``: the same command, run by servedoctor on the remote host.

What these commands read — GPUs through NVML, the driver, the server's Python and its
libraries — is only where the server will run, so they run there: ``ssh HOST servedoctor
ARGS…`` with the output streamed back unchanged (``SERVEDOCTOR_REMOTE_COMMAND`` names the
remote program when it is not on the login PATH). Nothing is installed remotely.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

from servedoctor.errors import UserError
from servedoctor.redact import redact_text
from servedoctor.remote.ssh import ssh_argv
from servedoctor.remote.url import SshTarget

REMOTE_COMMAND_VAR = "SERVEDOCTOR_REMOTE_COMMAND"
_NOT_FOUND = 127
_SSH_FAILED = 255


def run_servedoctor(target: SshTarget, args: Sequence[str]) -> int:
    """Run ``servedoctor ARGS`` on ``target``; its exit status (output passed through)."""
    program = os.environ.get(REMOTE_COMMAND_VAR) or "servedoctor"
    argv = ssh_argv(target, [program, *args])
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode == _NOT_FOUND:
        raise UserError(
            f"{program} is not installed on {target.url} (install it there, or name it "
            f"with {REMOTE_COMMAND_VAR})"
        )
    if proc.returncode == _SSH_FAILED:
        last = (proc.stderr.strip().splitlines() or ["no answer"])[-1]
        raise UserError(f"cannot reach {target.url}: {redact_text(last)}")
    if proc.stderr:
        sys.stderr.write(redact_text(proc.stderr))
    return proc.returncode
