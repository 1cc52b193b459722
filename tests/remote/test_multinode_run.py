"""A two-node SGLang launch through a real sshd where rank 1 dies in NCCL set-up.

Each node is a stand-in started through ssh that replays real lines of a two-node SGLang
report: rank 0 the weight-loading lines of tests/corpus/holdout2/sglang-3368 (then it waits),
rank 1 the NCCL watchdog failure of tests/corpus/holdout3/sglang-3606 (then it dies). The
diagnosis must name node 1, rank 1, and say rank 0 was stopped by the launcher.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from servedoctor.remote.multinode import NodeCommand, plan_nodes, run_nodes
from servedoctor.remote.url import SshTarget

CORPUS = Path(__file__).parent.parent / "corpus"
STANDIN = Path(__file__).with_name("standin_node.py")
SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", "DeepSeek-R1", "--tp-size", "16"]

pytestmark = pytest.mark.timeout(120)


def _standin_plan(tmp_path: Path, hosts: list[str]) -> list[NodeCommand]:
    rank0 = tmp_path / "rank0.log"
    lines = (CORPUS / "holdout2/sglang-3368/log.txt").read_text().splitlines()
    rank0.write_text("\n".join(line for line in lines if "TP0" in line or "Loading" in line))
    rank1 = tmp_path / "rank1.fail"
    rank1.write_text((CORPUS / "holdout3/sglang-3606/log.txt").read_text())
    plan = plan_nodes(SGLANG, hosts)
    replay = [sys.executable, str(STANDIN), f"0={rank0}", f"1={rank1}", "--"]
    return [
        NodeCommand(c.host, c.rank, c.role, (*replay, *c.argv), c.stage, c.serves) for c in plan
    ]


def test_rank_one_dies_in_nccl_init_and_is_named(ssh_host: SshTarget, tmp_path: Path) -> None:
    hosts = ["ssh://node-a", "ssh://node-b"]  # both aliases reach the loopback sshd
    plan = _standin_plan(tmp_path, hosts)
    result = run_nodes(plan, tmp_path / "run", grace_s=1.0, timeout_s=60, template=ssh_host)
    first = result.first_failed
    assert first is not None
    assert (first.rank, first.host, first.exit_code) == (1, "ssh://node-b", 1)
    (other,) = [n for n in result.nodes if n is not first]
    assert other.stopped and other.ended_at is None
    assert "killed by the launcher" in other.doing()
    assert all(n.leftover == 0 for n in result.nodes)
    assert result.diagnosis is not None and result.diagnosis.error_class == "nccl_error"
    summary = result.summary()
    assert summary.startswith("node 1 (node-b, rank 1) failed first: exit 1")
    assert "node 0 (node-a): killed by the launcher" in summary
    merged = result.merged_log.read_text()
    assert "[node0 server] stand-in node rank 0" in merged
    assert "[node1 server] Process group watchdog" in merged
    # one log per node and rank, each the node's own output
    assert "Rank 1" in (tmp_path / "run/node1-server.log").read_text()
    assert "Load weight end" in (tmp_path / "run/node0-server.log").read_text()
    # the planned flags reached each node's command line
    assert "--node-rank 1 --dist-init-addr node-a:50000" in " ".join(plan[1].argv)
