"""Multi-node launches: per-node commands planned from one server command, and a run of them.

:func:`plan_nodes` is pure: given ``python -m sglang.launch_server …`` (or ``vllm serve …``)
and the hosts, it returns one command per node and rank. Every engine flag is spelled
through the knob adapters and the versioned flag inventories (``engines/knobs/*.yaml``,
``engines/inventory/*.yaml``), never written here:

* SGLang: each node runs the same command with ``nodes`` (``--nnodes``), ``node_rank``
  (``--node-rank``) and ``dist_init_addr`` (``--dist-init-addr HEAD:PORT``);
* vLLM: a Ray cluster first (``ray start --head`` on the first host, ``ray start
  --address HEAD:PORT`` on the others, each ``--block`` so that it stays under supervision),
  then ``vllm serve`` on the head with the Ray executor and the parallel sizes given
  (the pipeline size defaults to the number of nodes).

:func:`run_nodes` starts each node's command over SSH (``RemoteServerProcess``), keeps one
log per node and rank, merges them into one timeline in arrival order, stops every node as
soon as one ends, and says which node and rank failed first and what the others were doing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from servedoctor.diagnose.api import diagnose_text
from servedoctor.engines import engine_for_command
from servedoctor.engines.adapter import spell
from servedoctor.engines.inventory import inventory
from servedoctor.errors import UserError
from servedoctor.launch.endpoint import flag_value
from servedoctor.launch.process import describe_exit
from servedoctor.model import Diagnosis
from servedoctor.redact import redact_text
from servedoctor.remote.process import RemoteServerProcess
from servedoctor.remote.url import SshTarget, parse_target

Role = Literal["server", "ray-head", "ray-worker"]
DEFAULT_DIST_PORT = 50000
DEFAULT_RAY_PORT = 6379


@dataclass(frozen=True)
class NodeCommand:
    """One command of a multi-node launch: where it runs, its rank, and its argv."""

    host: str  # as given in --nodes (an ssh URL or [user@]host)
    rank: int
    role: Role
    argv: tuple[str, ...]
    stage: int = 0  # commands of a later stage start once the earlier ones are up
    serves: bool = False  # the node whose HTTP endpoint is probed


def _address(host: str) -> str:
    """The host name other nodes reach (user and ssh port stripped)."""
    return parse_target(host, environ={}).destination


def _flag_spellings(engine: str, name: str, version: str | None) -> set[str]:
    inv = inventory(engine)
    flag = inv.flag(name, version) if inv is not None else None
    if flag is None:
        return {name}
    return {flag.name, *flag.aliases}


def _set(
    argv: list[str], knob_id: str, value: str | None, engine: str, version: str | None
) -> None:
    """Set the knob in argv in the engine's spelling, replacing any spelling already there."""
    change = spell(knob_id, value, engine=engine, version=version)
    if change is None or change.kind != "flag":
        raise UserError(f"{engine} {version or '(latest)'} has no flag for {knob_id}")
    names = _flag_spellings(engine, change.name, version)
    out: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg in names:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            skip = change.value is not None and nxt is not None and not nxt.startswith("--")
            continue
        if arg.split("=", 1)[0] in names:
            continue
        out.append(arg)
    out.append(change.name)
    if change.value is not None:
        out.append(change.value)
    argv[:] = out


def _given(argv: Sequence[str], knob_id: str, engine: str, version: str | None) -> str | None:
    change = spell(knob_id, "1", engine=engine, version=version)
    if change is None or change.kind != "flag":
        return None
    return flag_value(argv, sorted(_flag_spellings(engine, change.name, version)))


def knob_value(argv: Sequence[str], knob_id: str, *, version: str | None = None) -> str | None:
    """The value the command gives a knob (``tensor_parallel`` → ``--tp-size 2``), in any
    of its engine's spellings; None when it gives none or the engine has no such flag."""
    return _given(argv, knob_id, engine_for_command(list(argv)).name, version)


def plan_nodes(
    argv: Sequence[str],
    hosts: Sequence[str],
    *,
    version: str | None = None,
    dist_port: int = DEFAULT_DIST_PORT,
    ray_port: int = DEFAULT_RAY_PORT,
) -> list[NodeCommand]:
    """Per-node commands for ``argv`` over ``hosts`` (the first is the head); see module doc."""
    if len(hosts) < 2:
        raise UserError("--nodes wants two or more hosts, comma-separated")
    if len(set(hosts)) != len(hosts):
        raise UserError("--nodes names a host twice")
    engine = engine_for_command(list(argv)).name
    head = _address(hosts[0])
    if engine == "sglang":
        return _plan_sglang(list(argv), hosts, head, version, dist_port)
    if engine == "vllm":
        return _plan_vllm(list(argv), hosts, head, version, ray_port)
    raise UserError(f"--nodes knows SGLang and vLLM commands, not {engine}")


def _plan_sglang(
    argv: list[str], hosts: Sequence[str], head: str, version: str | None, port: int
) -> list[NodeCommand]:
    given = _given(argv, "nodes", "sglang", version)
    if given is not None and given != str(len(hosts)):
        raise UserError(f"the command says {given} nodes, --nodes names {len(hosts)}")
    addr = _given(argv, "dist_init_addr", "sglang", version) or f"{head}:{port}"
    plan = []
    for rank, host in enumerate(hosts):
        node = list(argv)
        _set(node, "nodes", str(len(hosts)), "sglang", version)
        _set(node, "node_rank", str(rank), "sglang", version)
        _set(node, "dist_init_addr", addr, "sglang", version)
        plan.append(NodeCommand(host, rank, "server", tuple(node), serves=rank == 0))
    return plan


def _plan_vllm(
    argv: list[str], hosts: Sequence[str], head: str, version: str | None, port: int
) -> list[NodeCommand]:
    serve = list(argv)
    if _given(serve, "pipeline_parallel", "vllm", version) is None:
        _set(serve, "pipeline_parallel", str(len(hosts)), "vllm", version)
    _set(serve, "ray_executor", None, "vllm", version)
    plan = [
        NodeCommand(
            hosts[0], 0, "ray-head", ("ray", "start", "--head", f"--port={port}", "--block")
        )
    ]
    for rank, host in enumerate(hosts[1:], start=1):
        join = ("ray", "start", f"--address={head}:{port}", "--block")
        plan.append(NodeCommand(host, rank, "ray-worker", join))
    plan.append(NodeCommand(hosts[0], 0, "server", tuple(serve), stage=1, serves=True))
    return plan


# -- running a plan ---------------------------------------------------------------------


@dataclass
class NodeOutcome:
    """How one node's command ended."""

    host: str
    rank: int
    role: Role
    log: Path
    exit_code: int | None = None
    ended_at: float | None = None  # seconds since launch, when it ended by itself
    stopped: bool = False  # stopped by the launcher after another node failed
    last_line: str = ""
    leftover: int = 0

    def doing(self) -> str:
        """What the node was doing when the run ended, in words."""
        if self.ended_at is not None:
            return f"ended ({describe_exit(self.exit_code)})"
        last = self.last_line.strip()
        waiting = "waiting" if not last else f"last line: {last[:120]}"
        return f"killed by the launcher ({waiting})"


@dataclass
class MultiNodeResult:
    nodes: list[NodeOutcome]
    merged_log: Path
    first_failed: NodeOutcome | None = None
    diagnosis: Diagnosis | None = None
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        first = self.first_failed
        if first is None:
            return "no node failed"
        others = "; ".join(
            f"node {n.rank} ({_address(n.host)}): {n.doing()}" for n in self.nodes if n is not first
        )
        what = f" ({self.diagnosis.summary})" if self.diagnosis and self.diagnosis.failed else ""
        return (
            f"node {first.rank} ({_address(first.host)}, rank {first.rank}) failed first: "
            f"{describe_exit(first.exit_code)}{what}. Others: {others}"
        )


def _target(host: str, template: SshTarget | None) -> SshTarget:
    target = parse_target(host)
    if template is not None and template.config_file and target.config_file is None:
        target = SshTarget(
            target.host, target.user, target.port, template.config_file, template.python
        )
    return target


def _await_output(nodes: Sequence[NodeOutcome], timeout: float) -> None:
    """Before a later stage: wait until every node started so far has printed something."""
    deadline = time.monotonic() + timeout
    while nodes and time.monotonic() < deadline:
        if all(n.log.exists() and n.log.stat().st_size > 0 for n in nodes):
            return
        time.sleep(0.1)


def run_nodes(
    plan: Sequence[NodeCommand],
    run_dir: Path,
    *,
    env: dict[str, str] | None = None,
    grace_s: float = 10.0,
    timeout_s: float = 600.0,
    settle_s: float = 1.0,
    template: SshTarget | None = None,
    stage_wait_s: float = 60.0,
) -> MultiNodeResult:
    """Run every node's command (stage by stage), stop all once one ends; see module doc."""
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    procs: list[tuple[NodeOutcome, RemoteServerProcess]] = []
    offsets: dict[int, int] = {}
    merged: list[str] = []

    def read_new() -> None:
        for i, (node, _) in enumerate(procs):
            try:
                with node.log.open("rb") as f:
                    f.seek(offsets.get(i, 0))
                    data = f.read()
            except OSError:
                continue
            complete = data[: data.rfind(b"\n") + 1]
            offsets[i] = offsets.get(i, 0) + len(complete)
            stamp = time.monotonic() - t0
            for raw in complete.decode("utf-8", "replace").splitlines():
                text = redact_text(raw)
                if text.strip():
                    node.last_line = text
                merged.append(f"{stamp:9.3f} [node{node.rank} {node.role}] {text}")

    first: NodeOutcome | None = None
    try:
        for stage in sorted({c.stage for c in plan}):
            _await_output([n for n, _ in procs], stage_wait_s)
            for command in (c for c in plan if c.stage == stage):
                name = f"node{command.rank}-{command.role}.log"
                node = NodeOutcome(command.host, command.rank, command.role, run_dir / name)
                fd = os.open(node.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    proc = RemoteServerProcess(
                        command.argv,
                        target=_target(command.host, template),
                        env=env,
                        grace_s=grace_s,
                        output_fd=fd,
                    )
                finally:
                    os.close(fd)
                procs.append((node, proc))
        deadline = t0 + timeout_s
        while first is None and time.monotonic() < deadline:
            read_new()
            for node, proc in procs:
                code = proc.poll()
                if code is not None:
                    node.exit_code, node.ended_at = code, time.monotonic() - t0
                    first = node
                    break
            time.sleep(0.1)
        if first is not None:  # the others may be ending too: whoever ends now is not first
            end = time.monotonic() + settle_s
            while time.monotonic() < end:
                for node, proc in procs:
                    if node.ended_at is None and proc.poll() is not None:
                        node.exit_code, node.ended_at = proc.poll(), time.monotonic() - t0
                time.sleep(0.05)
    finally:
        read_new()
        for node, proc in procs:
            node.stopped = node.ended_at is None
            teardown = proc.stop(grace_s=grace_s)
            node.leftover = teardown.leftover
            if node.exit_code is None and node.ended_at is not None:
                node.exit_code = teardown.exit_code
        read_new()
    merged_log = run_dir / "merged.log"
    merged_log.write_text("\n".join(merged) + "\n", encoding="utf-8")
    result = MultiNodeResult([n for n, _ in procs], merged_log, first)
    for _, proc in procs:
        result.notes.extend(proc.notes)
    if first is not None:
        text = first.log.read_text(encoding="utf-8", errors="replace")
        result.diagnosis = diagnose_text(redact_text(text), name=str(first.log))
    return result
