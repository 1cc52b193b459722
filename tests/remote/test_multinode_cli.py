"""``servedoctor launch --nodes node-a,node-b -- python -m sglang.launch_server …`` from the
command line, through a real sshd on loopback.

Each node runs a stand-in ``sglang.launch_server`` module (put on the remote PYTHONPATH with
``--env``) that replays real lines of a two-node SGLang report for the rank the planner gave
it (``--node-rank``): rank 0 loads weights and waits, rank 1 dies in NCCL set-up. The CLI must
exit 1 and name node 1, rank 1, with the NCCL diagnosis and one log per node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servedoctor.remote.url import SSH_CONFIG_VAR, SshTarget

CORPUS = Path(__file__).parent.parent / "corpus"
HERE = Path(__file__).parent
SERVEDOCTOR = [sys.executable, "-m", "servedoctor"]

pytestmark = pytest.mark.timeout(120)

MODULE = """
import os, sys
from standin_node import main
sys.exit(main([*os.environ["STANDIN_NODE_LOGS"].split(","), "--", "sglang", *sys.argv[1:]]))
"""


def _standin(tmp_path: Path) -> tuple[Path, str]:
    pkg = tmp_path / "fake" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(MODULE)
    rank0 = tmp_path / "rank0.log"
    lines = (CORPUS / "holdout2/sglang-3368/log.txt").read_text().splitlines()
    rank0.write_text("\n".join(line for line in lines if "TP0" in line or "Loading" in line))
    rank1 = tmp_path / "rank1.fail"
    rank1.write_text((CORPUS / "holdout3/sglang-3606/log.txt").read_text())
    return tmp_path / "fake", f"0={rank0},1={rank1}"


def _launch(ssh_host: SshTarget, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    fake, logs = _standin(tmp_path)
    assert ssh_host.config_file is not None
    return subprocess.run(
        [*SERVEDOCTOR, "launch", "--no-report", "--grace", "1", "--runs-dir",
         str(tmp_path / "runs"), "--nodes", "ssh://node-a,node-b", *extra,
         "--env", f"PYTHONPATH={fake}{os.pathsep}{HERE}", "--env", f"STANDIN_NODE_LOGS={logs}",
         "--", sys.executable, "-m", "sglang.launch_server", "--model-path", "DeepSeek-R1",
         "--tp-size", "16"],
        env={**os.environ, SSH_CONFIG_VAR: ssh_host.config_file},
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip


def test_launch_nodes_names_the_rank_that_died_first(ssh_host: SshTarget, tmp_path: Path) -> None:
    proc = _launch(ssh_host, tmp_path, "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["outcome"] == "failed"
    assert data["first_failed"] == {"host": "node-b", "rank": 1}
    assert data["diagnosis"]["error_class"] == "nccl_error"
    assert data["summary"].startswith("node 1 (node-b, rank 1) failed first: exit 1")
    assert "node 0 (node-a): killed by the launcher" in data["summary"]
    # the planned flags reached each node's command line
    rank1 = data["plan"][1]["argv"]
    assert rank1[-6:] == ["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "node-a:50000"]
    logs = {n["rank"]: Path(n["log"]) for n in data["nodes"]}
    assert "Rank 1" in logs[1].read_text() and "Load weight end" in logs[0].read_text()
    assert all(n["leftover"] == 0 for n in data["nodes"])
    run_dir = Path(data["run_dir"])
    assert json.loads((run_dir / "nodes.json").read_text())["first_failed"]["rank"] == 1
    assert "[node1 server] Process group watchdog" in (run_dir / "merged.log").read_text()


def test_launch_nodes_in_words(ssh_host: SshTarget, tmp_path: Path) -> None:
    proc = _launch(ssh_host, tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "node 1 (node-b, rank 1) failed first" in proc.stdout
    assert "diagnosis of node 1: nccl_error" in proc.stdout
    assert "timeline: " in proc.stdout


def test_launch_nodes_refuses_on_and_a_bad_host(tmp_path: Path) -> None:
    cmd = [*SERVEDOCTOR, "launch", "--runs-dir", str(tmp_path)]
    sg = ["--", "python", "-m", "sglang.launch_server", "--model-path", "m"]
    both = subprocess.run([*cmd, "--nodes", "a,b", "--on", "ssh://a", *sg],
                          capture_output=True, text=True)  # fmt: skip
    assert both.returncode == 2 and "exclude each other" in both.stderr
    bad = subprocess.run([*cmd, "--nodes", "a,-oProxyCommand=x", *sg],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    one = subprocess.run([*cmd, "--nodes", "a", *sg], capture_output=True, text=True)
    assert one.returncode == 2 and "two or more hosts" in one.stderr
