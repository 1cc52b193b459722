"""How long a healthy run of this server took before: the live display's "usually ~N s".

Read from the findings store: the healthy trials of the same engine serving the same model
(``target_of``), newest first; the figure is their median duration (start to teardown).
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Sequence

from sqlalchemy import select

from servedoctor.errors import UserError
from servedoctor.experiments.command import CommandLike, parse
from servedoctor.experiments.envhistory import target_of
from servedoctor.findings.schema import RunRow, TrialRow
from servedoctor.findings.store import FindingsStore

__all__ = ["expected_for_argv", "expected_seconds"]

_RECENT = 200  # healthy trials of the engine looked at, newest first


def expected_seconds(store: FindingsStore, cmd: CommandLike) -> float | None:
    """Median duration of the stored healthy trials of this engine and model, or None."""
    query = (
        select(TrialRow.argv, TrialRow.duration_s)
        .join(RunRow, RunRow.id == TrialRow.run_id)
        .where(RunRow.engine == cmd.engine, TrialRow.outcome == "healthy")
        .order_by(TrialRow.id.desc())
        .limit(_RECENT)
    )
    rows = store._transaction(lambda session: session.execute(query).all(), write=False)
    target = target_of(cmd)
    durations: list[float] = []
    for argv, duration in rows:
        with contextlib.suppress(UserError, ValueError, TypeError):
            if duration and target_of(parse(list(argv))) == target:
                durations.append(float(duration))
    return statistics.median(durations) if durations else None


def expected_for_argv(store: str | None, argv: Sequence[str]) -> float | None:
    """The same for ``launch``: None when the store does not exist or cannot be read."""
    try:
        opened = FindingsStore.open_existing(store)
        if opened is None:
            return None
        return expected_seconds(opened, parse(list(argv)))
    except Exception:  # the figure is a courtesy: never let it stop a launch
        return None
