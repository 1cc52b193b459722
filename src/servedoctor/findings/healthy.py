"""What the server's environment held when it last worked, per engine and model.

A healthy launch or fix records the packages of the server's own interpreter; a later
failure of the same server is diffed against the last record, and each package that moved
is a candidate "back to the version that worked" (tried in an overlay by ``fix``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from servedoctor.findings.schema import HealthyEnvRow
from servedoctor.findings.store import FindingsStore

__all__ = ["PackageMove", "diff", "last_healthy", "record_healthy"]


def record_healthy(
    store: FindingsStore, *, engine: str, target: str, python: str, packages: Mapping[str, str]
) -> None:
    def work(session: Session) -> None:
        session.add(
            HealthyEnvRow(engine=engine, target=target, python=python, packages=dict(packages))
        )

    store._transaction(work)


def last_healthy(store: FindingsStore, *, engine: str, target: str) -> dict[str, str] | None:
    def work(session: Session) -> dict[str, str] | None:
        row = session.scalars(
            select(HealthyEnvRow)
            .where(HealthyEnvRow.engine == engine, HealthyEnvRow.target == target)
            .order_by(HealthyEnvRow.id.desc())
            .limit(1)
        ).first()
        return {str(k): str(v) for k, v in row.packages.items()} if row else None

    return store._transaction(work, write=False)


@dataclass(frozen=True, slots=True)
class PackageMove:
    name: str
    was: str | None  # None: not installed when it worked
    now: str | None  # None: gone since

    def describe(self) -> str:
        return f"{self.name} {self.was or '(absent)'} → {self.now or '(absent)'}"


def diff(healthy: Mapping[str, str], now: Mapping[str, str]) -> list[PackageMove]:
    """Packages whose version differs between the healthy record and now (names compared
    the way pip does: case, '-', '_' and '.' alike)."""

    def norm(table: Mapping[str, str]) -> dict[str, tuple[str, str]]:
        return {k.lower().replace("_", "-").replace(".", "-"): (k, v) for k, v in table.items()}

    was, cur = norm(healthy), norm(now)
    moves = []
    for key in sorted(set(was) | set(cur)):
        old, new = was.get(key), cur.get(key)
        if (old and old[1]) != (new and new[1]):
            name = (new or old or (key, ""))[0]
            moves.append(PackageMove(name, old[1] if old else None, new[1] if new else None))
    return moves
