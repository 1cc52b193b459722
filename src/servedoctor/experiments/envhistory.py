"""What changed in the server's environment since it last worked (``fix``'s memory).

The last healthy record of the same engine and model (``findings.healthy``) is diffed with
the packages the server's interpreter sees now; each package that moved becomes the change
"back to the version that worked". A session that ends healthy records the environment it
ended with (a package fixed in an overlay counts at its overlay version).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from servedoctor.engines.command import ServerCommand
from servedoctor.env.serverenv import installed_packages
from servedoctor.experiments.command import CommandLike
from servedoctor.findings.healthy import PackageMove, diff, last_healthy, record_healthy
from servedoctor.findings.store import FindingsStore
from servedoctor.model import Change

__all__ = ["moved_since_healthy", "remember_healthy", "target_of"]

_MODEL_FLAGS = ("--model-path", "--model", "--model-id", "-m")


def target_of(cmd: CommandLike) -> str:
    """What the server serves, to match runs of the same server: the model, else the
    program."""
    if isinstance(cmd, ServerCommand):
        for flag in _MODEL_FLAGS:
            value = cmd.get(flag) if cmd.spec(flag) or cmd.find(flag) else None
            if value and value not in ("true", "false"):
                return value
        if cmd.positionals:
            return cmd.positionals[0]
        return " ".join(cmd.program)
    return " ".join(cmd.render()[:3])


def moved_since_healthy(
    store: FindingsStore, cmd: CommandLike, python: str
) -> tuple[list[Change], list[PackageMove]]:
    """Changes back to the last healthy versions, and the moves they undo."""
    healthy = last_healthy(store, engine=cmd.engine, target=target_of(cmd))
    if not healthy:
        return [], []
    moves = diff(healthy, installed_packages(python, dict(cmd.env)))
    changes = [Change("package", m.name, f"=={m.was}") for m in moves if m.was]
    return changes, moves


def remember_healthy(
    store: FindingsStore,
    cmd: CommandLike,
    python: str,
    changes: Sequence[Change] = (),
    seen: Mapping[str, str] | None = None,
) -> None:
    packages = dict(seen) if seen is not None else installed_packages(python, dict(cmd.env))
    for change in changes:
        if change.kind == "package" and change.value and change.value.startswith("=="):
            packages[change.name] = change.value[2:]
    if packages:
        record_healthy(
            store, engine=cmd.engine, target=target_of(cmd), python=python, packages=packages
        )
