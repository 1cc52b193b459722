"""``launch --nodes host1,host2 -- CMD``: a multi-node launch from the command line.

The plan and the run are :func:`~servedoctor.remote.multinode.plan_nodes` and
:func:`~servedoctor.remote.multinode.run_nodes`; this module turns the ``--nodes`` text into
hosts, makes the run folder, and says how it went: one line per node, the first node and
rank that failed with its diagnosis, the logs, and ``nodes.json`` in the run folder. The
nodes are watched until one of them ends, Ctrl-C, or the time limit; then every node is
stopped. There is no health probe of the head node yet.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servedoctor.engines import engine_for_command
from servedoctor.errors import UserError
from servedoctor.launch.rundir import make_run_dir
from servedoctor.redact import redact_argv, redact_text
from servedoctor.remote.multinode import MultiNodeResult, NodeCommand, plan_nodes, run_nodes
from servedoctor.remote.url import parse_target

__all__ = ["NodesReport", "launch_nodes", "parse_hosts"]

DEFAULT_TIMEOUT_S = 600.0


def parse_hosts(text: str) -> list[str]:
    """``host1,host2`` (each ``[user@]host[:port]`` or ``ssh://…``) → hosts, each checked."""
    hosts = [h.strip() for h in text.split(",") if h.strip()]
    for host in hosts:
        parse_target(host)  # a bad host is one line now, before anything starts
    return hosts


@dataclass
class NodesReport:
    """What ``launch --nodes`` prints and writes."""

    outcome: str  # failed | interrupted | no_failure
    run_dir: Path
    plan: list[NodeCommand]
    result: MultiNodeResult | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return {"failed": 1, "interrupted": 130}.get(self.outcome, 0)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "outcome": self.outcome,
            "run_dir": str(self.run_dir),
            "plan": [
                {
                    "host": c.host,
                    "rank": c.rank,
                    "role": c.role,
                    "stage": c.stage,
                    "argv": redact_argv(list(c.argv)),
                }
                for c in self.plan
            ],
            "notes": [redact_text(n) for n in self.notes],
        }
        result = self.result
        if result is not None:
            data["nodes"] = [
                {
                    "host": n.host,
                    "rank": n.rank,
                    "role": n.role,
                    "log": str(n.log),
                    "exit_code": n.exit_code,
                    "doing": n.doing(),
                    "leftover": n.leftover,
                }
                for n in result.nodes
            ]
            data["merged_log"] = str(result.merged_log)
            first = result.first_failed
            data["first_failed"] = (
                None if first is None else {"host": first.host, "rank": first.rank}
            )
            data["summary"] = result.summary()
            d = result.diagnosis
            data["diagnosis"] = (
                None
                if d is None
                else {"error_class": d.error_class, "phase": d.phase, "summary": d.summary}
            )
        return data

    def lines(self) -> list[str]:
        out = [f"plan ({len(self.plan)} commands):"]
        for c in self.plan:
            out.append(
                f"  node {c.rank} {c.role} on {c.host}: {shlex.join(redact_argv(list(c.argv)))}"
            )
        result = self.result
        if self.outcome == "interrupted" or result is None:
            out.append("interrupted: every node was stopped")
            return out
        first = result.first_failed
        if first is None:
            out.append("no node failed before the time limit; every node was stopped")
        else:
            out.append(result.summary())
        d = result.diagnosis
        if first is not None and d is not None and d.failed:
            label = "/".join(x for x in (d.error_class, d.phase) if x)
            out.append(f"diagnosis of node {first.rank}: {label}: {d.summary}")
        for n in result.nodes:
            left = f", {n.leftover} processes left" if n.leftover else ""
            out.append(f"  node {n.rank} {n.role} ({n.host}): {n.doing()}{left} · log {n.log}")
        out.append(f"timeline: {result.merged_log}")
        out.extend(f"warning: {redact_text(n)}" for n in self.notes)
        return out


def launch_nodes(
    argv: Sequence[str],
    nodes: str,
    *,
    runs_dir: Path,
    env: Mapping[str, str],
    grace_s: float = 10.0,
    timeout_s: float | None = None,
) -> NodesReport:
    """Plan ``argv`` over the hosts of ``nodes`` and run it (see module doc)."""
    if not argv:
        raise UserError("no server command given (put it after --)")
    plan = plan_nodes(argv, parse_hosts(nodes))
    run_dir = make_run_dir(runs_dir, engine_for_command(list(argv)).name)
    report = NodesReport("no_failure", run_dir, plan)
    try:
        result = run_nodes(
            plan, run_dir, env=dict(env), grace_s=grace_s, timeout_s=timeout_s or DEFAULT_TIMEOUT_S
        )
    except KeyboardInterrupt:  # run_nodes stopped every node on its way out
        report.outcome = "interrupted"
    else:
        report.result = result
        report.notes = list(result.notes)
        report.outcome = "failed" if result.first_failed is not None else "no_failure"
    (run_dir / "nodes.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    return report
