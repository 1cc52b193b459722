"""Where a server listens, taken from its own command line and its engine's defaults."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servedoctor.engines import EngineSpec

_ANY_ADDRESS = {"0.0.0.0", "::", "[::]", ""}


@dataclass(frozen=True)
class Endpoint:
    host: str  # the address to connect to (a wildcard bind becomes loopback)
    port: int
    health_path: str | None
    models_path: str
    chat_path: str

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def flag_value(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the last ``--name V`` or ``--name=V`` in argv."""
    value = None
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                value = argv[i + 1]
            elif arg.startswith(name + "="):
                value = arg[len(name) + 1 :]
    return value


def endpoint_for(spec: EngineSpec, argv: Sequence[str]) -> Endpoint:
    """Host and port from the command's flags (the engine's defaults otherwise)."""
    host = flag_value(argv, spec.host_flags) or spec.default_host
    if host in _ANY_ADDRESS:
        host = "127.0.0.1"
    if host == "localhost":
        host = "127.0.0.1"
    port_text = flag_value(argv, spec.port_flags)
    try:
        port = int(port_text) if port_text is not None else spec.default_port
    except ValueError:
        from servedoctor.errors import UserError

        raise UserError(f"port {port_text!r} in the server command is not a number") from None
    return Endpoint(host, port, spec.health_path, spec.models_path, spec.chat_path)
