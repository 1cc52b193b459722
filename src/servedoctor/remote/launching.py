"""What a launch on a remote host adds: the SSH target and the port forward to the server.

The server listens where its command says, on the remote host; probes go to a loopback port
here that ``ssh -L`` forwards there. A forward's local end always accepts connections, so
readiness is decided by the health answer coming through it, never by the port alone. GPU
telemetry comes from the remote host's ``nvidia-smi`` (:mod:`servedoctor.remote.gpu`).

``fix --on`` runs each trial as such a launch; what it cannot know of the remote host (its
GPUs, packages and Python, read locally by ``env``) its fingerprint records as unknown.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, replace
from typing import Any

from servedoctor.launch.endpoint import Endpoint
from servedoctor.launch.telemetry import GpuTelemetry
from servedoctor.remote.ssh import Forward
from servedoctor.remote.url import SshTarget


@dataclass(frozen=True)
class RemoteLaunch:
    target: SshTarget
    forward: Forward


def free_local_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def forwarded(target: SshTarget, endpoint: Endpoint) -> tuple[RemoteLaunch, Endpoint]:
    """The forward to ``endpoint`` (as seen on the remote host) and the endpoint probes use."""
    forward = Forward(free_local_port(), endpoint.host, endpoint.port)
    local = replace(endpoint, host="127.0.0.1", port=forward.local_port)
    return RemoteLaunch(target, forward), local


def remote_telemetry(remote: RemoteLaunch, warnings: list[str]) -> GpuTelemetry:
    """GPU telemetry of the remote host (its ``nvidia-smi``, see :mod:`servedoctor.remote.gpu`);
    where it has none, one line in ``warnings`` and nothing sampled."""
    from servedoctor.remote.gpu import RemoteGpuTelemetry

    return RemoteGpuTelemetry(remote.target, warnings)


def remote_fingerprint(engine: str, target: SshTarget) -> dict[str, Any]:
    """The findings store's fingerprint of a ``fix --on`` session: the host, nothing read.

    ``env --on`` would need servedoctor installed there and a second connection per session;
    so GPUs and versions are recorded as unknown, and past findings apply per host."""
    return {"engine": engine, "host": target.url, "machine": "remote/unknown", "gpus": "unknown"}


def remote_note(target: SshTarget) -> str:
    """The one line ``fix --on`` prints about what it checks where."""
    return (
        f"on {target.url}: the command, its Python and its port are checked there by the first "
        "trial; package versions are not tried remotely (flag and env trials only)"
    )
