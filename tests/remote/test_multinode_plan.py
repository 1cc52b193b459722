"""Per-node commands for 2 and 4 nodes, checked against the versioned flag inventories."""

from __future__ import annotations

import pytest

from servedoctor.engines.inventory import inventory
from servedoctor.errors import UserError
from servedoctor.launch.endpoint import flag_value
from servedoctor.remote.multinode import plan_nodes

SGLANG = [
    "python",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "zai-org/GLM-5",
    "--tp-size",
    "16",
]
VLLM = ["vllm", "serve", "zai-org/GLM-5", "--tensor-parallel-size", "8"]


def _flags(argv: tuple[str, ...]) -> list[str]:
    return [a.split("=", 1)[0] for a in argv if a.startswith("--")]


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("version", [None, "0.4.6", "0.5.23"])
def test_sglang_nodes_get_nnodes_rank_and_rendezvous(n: int, version: str | None) -> None:
    hosts = [f"ssh://gpu{i}" for i in range(n)]
    plan = plan_nodes(SGLANG, hosts, version=version, dist_port=5000)
    inv = inventory("sglang")
    assert inv is not None
    assert [c.rank for c in plan] == list(range(n))
    assert [c.host for c in plan] == hosts
    assert [c.serves for c in plan] == [True] + [False] * (n - 1)
    for c in plan:
        for flag in _flags(c.argv):
            assert inv.flag(flag, version) is not None, (version, flag)
        assert flag_value(c.argv, ["--nnodes"]) == str(n)
        assert flag_value(c.argv, ["--node-rank"]) == str(c.rank)
        assert flag_value(c.argv, ["--dist-init-addr"]) == "gpu0:5000"
        assert c.argv[: len(SGLANG)] == tuple(SGLANG)  # the user's command is kept


def test_sglang_keeps_a_given_rendezvous_and_replaces_any_spelling() -> None:
    argv = [*SGLANG, "--nccl-init-addr", "10.0.0.1:7000", "--node-rank=5"]
    plan = plan_nodes(argv, ["a", "b"])
    for c in plan:
        assert flag_value(c.argv, ["--dist-init-addr"]) == "10.0.0.1:7000"
        assert "--nccl-init-addr" not in c.argv and "--node-rank=5" not in c.argv
        assert c.argv.count("--node-rank") == 1


def test_sglang_node_count_that_disagrees_is_refused() -> None:
    with pytest.raises(UserError, match="says 4 nodes"):
        plan_nodes([*SGLANG, "--nnodes", "4"], ["a", "b"])


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("version", [None, "0.8.5", "0.33.0"])
def test_vllm_ray_cluster_then_serve_with_parallel_sizes(n: int, version: str | None) -> None:
    hosts = [f"user@node{i}:2222" for i in range(n)]
    plan = plan_nodes(VLLM, hosts, version=version, ray_port=6380)
    inv = inventory("vllm")
    assert inv is not None
    ray = [c for c in plan if c.stage == 0]
    assert [c.role for c in ray] == ["ray-head"] + ["ray-worker"] * (n - 1)
    assert ray[0].argv[:3] == ("ray", "start", "--head") and "--port=6380" in ray[0].argv
    assert all("--address=node0:6380" in c.argv for c in ray[1:])
    assert all("--block" in c.argv for c in ray)  # stays in the foreground, supervised
    (serve,) = [c for c in plan if c.stage == 1]
    assert serve.serves and serve.host == hosts[0] and serve.rank == 0
    for flag in _flags(serve.argv):
        assert inv.flag(flag, version) is not None, (version, flag)
    assert flag_value(serve.argv, ["--tensor-parallel-size", "-tp"]) == "8"
    assert flag_value(serve.argv, ["--pipeline-parallel-size", "-pp"]) == str(n)
    assert flag_value(serve.argv, ["--distributed-executor-backend"]) == "ray"


def test_vllm_keeps_the_pipeline_size_given() -> None:
    plan = plan_nodes([*VLLM, "-pp", "2"], ["a", "b", "c", "d"])
    serve = plan[-1]
    assert flag_value(serve.argv, ["--pipeline-parallel-size", "-pp"]) == "2"
    assert serve.argv.count("-pp") + serve.argv.count("--pipeline-parallel-size") == 1


@pytest.mark.parametrize(
    ("argv", "hosts", "message"),
    [
        (SGLANG, ["a"], "two or more"),
        (SGLANG, ["a", "a"], "twice"),
        (["llama-server", "-m", "x.gguf"], ["a", "b"], "knows SGLang and vLLM"),
        (SGLANG, ["-oProxyCommand=x", "b"], "not a host"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], hosts: list[str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        plan_nodes(argv, hosts)
