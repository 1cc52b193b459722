"""What changed in the server's environment since it last worked (``fix``'s memory).

The last healthy record of the same engine and model (``findings.healthy``) is diffed with
the packages the server's interpreter sees now; each package that moved becomes the change
"back to the version that worked". A session that ends healthy records the environment it
ended with (a package fixed in an overlay counts at its overlay version).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from servedoctor.engines.command import ServerCommand
from servedoctor.env.serverenv import import_names, installed_packages
from servedoctor.experiments.command import CommandLike
from servedoctor.experiments.policy import default_policy
from servedoctor.findings.healthy import PackageMove, diff, last_healthy, record_healthy
from servedoctor.findings.store import FindingsStore
from servedoctor.model import Change, Diagnosis, Hypothesis

__all__ = [
    "EnvDiff",
    "env_diff",
    "moved_since_healthy",
    "remember_healthy",
    "target_of",
    "touched_by",
    "with_env_hypotheses",
]

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


@dataclass(frozen=True, slots=True)
class EnvDiff:
    """The packages that moved since the last healthy run, and the import names by which
    a failure can name each of them (``PyYAML`` → ``yaml``)."""

    moves: tuple[PackageMove, ...]
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def changes(self) -> list[Change]:
        """Each moved package back to the version that worked (gone ones have none)."""
        return [Change("package", m.name, f"=={m.was}") for m in self.moves if m.was]

    def lines(self, touched: Mapping[str, str] | None = None, limit: int = 12) -> list[str]:
        """One line per package, the ones the failure touches first."""
        touched = touched or {}
        moves = sorted(self.moves, key=lambda m: m.name not in touched)
        shown = [
            m.describe() + (f"  (the failure names {touched[m.name]})" if m.name in touched else "")
            for m in moves[:limit]
        ]
        if len(moves) > limit:
            shown.append(f"... and {len(moves) - limit} more")
        return shown

    def to_dict(self, touched: Mapping[str, str] | None = None) -> list[dict[str, object]]:
        touched = touched or {}
        return [
            {"package": m.name, "worked": m.was, "now": m.now, "touched_by": touched.get(m.name)}
            for m in self.moves
        ]


def env_diff(store: FindingsStore, cmd: CommandLike, python: str) -> EnvDiff | None:
    """What moved in ``python``'s environment since the last healthy run of the same engine
    and model; None when none was recorded (or nothing moved)."""
    healthy = last_healthy(store, engine=cmd.engine, target=target_of(cmd))
    if not healthy:
        return None
    moves = diff(healthy, installed_packages(python, dict(cmd.env)))
    if not moves:
        return None
    names = import_names(python, dict(cmd.env))
    return EnvDiff(tuple(moves), {m.name: tuple(names.get(m.name, ())) for m in moves})


def _named(name: str, text: str) -> bool:
    forms = {name.lower(), name.lower().replace("-", "_"), name.lower().replace("_", "-")}
    return any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text) for f in forms)


def touched_by(found: EnvDiff, diagnosis: Diagnosis) -> dict[str, str]:
    """Package → the name by which the failure (its summary, evidence lines and frames,
    culprit, missing names) touches it: the distribution's own name or an import name."""
    text = "\n".join(
        [diagnosis.summary, diagnosis.culprit or "", diagnosis.component or ""]
        + [e.text for e in diagnosis.evidence]
    ).lower()
    touched: dict[str, str] = {}
    for move in found.moves:
        for name in (move.name, *found.aliases.get(move.name, ())):
            if len(name) > 2 and _named(name, text):
                touched[move.name] = name
                break
    return touched


def with_env_hypotheses(diagnosis: Diagnosis, found: EnvDiff) -> Diagnosis:
    """``diagnosis`` with one hypothesis per moved package ("back to the version that
    worked"), ranked among the others by confidence: higher when the failure touches it."""
    policy = default_policy()
    touched = touched_by(found, diagnosis)
    extra = []
    for n, move in enumerate(found.moves, 1):
        if not move.was:
            continue
        name = touched.get(move.name)
        extra.append(
            Hypothesis(
                id=f"ENV.{n}",
                cause=f"{move.name} changed since this server last worked "
                f"({move.was} → {move.now or 'removed'}); back to the version that worked",
                confidence=policy.env_diff_prior_named if name else policy.env_diff_prior,
                changes=(Change("package", move.name, f"=={move.was}"),),
                why=f"the failure names {name}" if name else "changed since the last healthy run",
            )
        )
    ranked = sorted([*diagnosis.hypotheses, *extra], key=lambda h: -h.confidence)
    return dataclasses.replace(diagnosis, hypotheses=tuple(ranked))


@dataclass(frozen=True, slots=True)
class Remembered:
    """What the environment memory adds to a launch or a diagnosis."""

    diagnosis: Diagnosis | None
    diff: EnvDiff | None = None
    touched: Mapping[str, str] = field(default_factory=dict)
    recorded: bool = False  # a healthy environment was stored
    problem: str | None = None  # why the store could not be used (one line)

    def lines(self) -> list[str]:
        if self.problem:
            return [f"environment memory: {self.problem}"]
        if self.diff is None:
            return []
        return ["since it last worked:", *(f"  {x}" for x in self.diff.lines(self.touched))]

    def to_dict(self) -> list[dict[str, object]] | None:
        return self.diff.to_dict(self.touched) if self.diff else None


def remember_run(
    store: str | None,
    argv: Sequence[str],
    python: str,
    *,
    healthy: bool,
    diagnosis: Diagnosis | None,
    env: Mapping[str, str] | None = None,
) -> Remembered:
    """After a launch (or for a recorded run): a healthy one stores the packages
    ``python`` sees; a failed one is diffed against the last healthy record of the same
    engine and model, and each moved package becomes a hypothesis. A store that cannot
    be opened is one line, never an error of the launch."""
    from sqlalchemy.exc import SQLAlchemyError

    from servedoctor.errors import UserError
    from servedoctor.experiments.command import parse

    try:
        cmd = parse(list(argv))
        fs = FindingsStore.open(store)
        if healthy:
            seen = installed_packages(python, {**(env or {}), **cmd.env})
            remember_healthy(fs, cmd, python, seen=seen)
            return Remembered(diagnosis, recorded=bool(seen))
        found = env_diff(fs, cmd, python)
    except (UserError, SQLAlchemyError, OSError) as exc:
        problem = (str(exc).splitlines() or [type(exc).__name__])[0]
        return Remembered(diagnosis, problem=problem)
    if found is None:
        return Remembered(diagnosis)
    touched = touched_by(found, diagnosis) if diagnosis is not None else {}
    ranked = with_env_hypotheses(diagnosis, found) if diagnosis is not None else None
    return Remembered(ranked, found, touched)
