"""Each preflight rule fires on its case and stays quiet on a look-alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servedoctor.env.arch import Arch, parse_arch
from servedoctor.env.archjudge import Judgement
from servedoctor.env.fingerprint import Fingerprint, TorchInfo
from servedoctor.env.preflight import evaluate, run_preflight, scan_command
from servedoctor.env.versions import (
    TorchPin,
    archscan_facts,
    driver_facts,
    model_facts,
    torch_arch_facts,
    torch_pin_facts,
)
from servedoctor.errors import UserError
from servedoctor.knowledge.registry import default_registry
from servedoctor.model import Change

RULES = default_registry().area("preflight")
SGL = ["python", "-m", "sglang.launch_server", "--model-path", "m"]
VLLM = ["vllm", "serve", "m"]
DSA = ["model-dsa: the model uses DeepSeek sparse attention (index_topk=2048)"]

# rule id → (argv, environment, facts, gpu) that must fire, and a look-alike that must not
FLAG_CASES: dict[str, tuple[tuple, tuple]] = {  # type: ignore[type-arg]
    "ARCH101": (
        ([*SGL, "--attention-backend", "fa3"], {}, [], "sm_120"),
        ([*SGL, "--attention-backend", "fa3"], {}, [], "sm_90"),
    ),
    "ARCH102": (
        ([*SGL, "--attention-backend=trtllm_mla"], {}, [], "sm_120"),
        ([*SGL, "--attention-backend=trtllm_mla"], {}, [], "sm_100"),
    ),
    "ARCH103": (
        ([*SGL, "--attention_backend", "trtllm_mha"], {}, [], "sm_121"),
        ([*SGL, "--attention-backend", "trtllm_mha"], {}, [], "sm_100"),
    ),
    "ARCH104": (
        ([*SGL, "--attention-backend", "fa4"], {}, [], "sm_90"),
        ([*SGL, "--attention-backend", "fa4"], {}, [], "sm_100"),
    ),
    "ARCH105": (
        ([*SGL, "--moe-runner-backend", "flashinfer_trtllm"], {}, [], "sm_90"),
        ([*SGL, "--moe-runner-backend", "flashinfer_cutlass"], {}, [], "sm_90"),
    ),
    "ARCH106": (
        ([*SGL, "--nsa-prefill-backend", "flashmla_sparse"], {}, [], "sm_120"),
        ([*SGL, "--nsa-prefill-backend", "tilelang"], {}, [], "sm_120"),
    ),
    "ARCH107": (
        ([*SGL, "--kv-cache-dtype", "fp8_e4m3"], {}, DSA, "sm_120"),
        ([*SGL, "--kv-cache-dtype", "fp8_e4m3"], {}, [], "sm_120"),  # not a DSA model
    ),
    "ARCH108": (
        ([*SGL, "--moe-runner-backend", "deep_gemm"], {}, [], "sm_120"),
        ([*SGL, "--moe-runner-backend", "deep_gemm"], {}, [], "sm_90"),
    ),
    "ARCH109": (
        (["VLLM_USE_DEEP_GEMM=1", *VLLM], {}, [], "sm_121"),
        (["VLLM_USE_DEEP_GEMM=0", *VLLM], {}, [], "sm_121"),
    ),
    "ARCH110": (
        (VLLM, {"VLLM_ATTENTION_BACKEND": "FLASHMLA"}, [], "sm_89"),
        (
            [*SGL, "--attention-backend", "flashmla"],
            {"VLLM_ATTENTION_BACKEND": "FLASHMLA"},
            [],
            "sm_89",
        ),  # another engine
    ),
}


def _fired(argv: list[str], env: dict[str, str], facts: list[str], gpu: str) -> set[str]:
    from servedoctor.engines import engine_for_command

    risks = evaluate(
        RULES,
        facts=facts,
        command=scan_command(argv, env),
        engine=engine_for_command(argv).name,
        gpu=parse_arch(gpu),
    )
    return {r.rule for r in risks}


@pytest.mark.parametrize("rule_id", sorted(FLAG_CASES))
def test_flag_rule(rule_id: str) -> None:
    positive, negative = FLAG_CASES[rule_id]
    assert rule_id in _fired(*positive)
    assert rule_id not in _fired(*negative)


def _facts_fire(facts: list[str], gpu: str = "sm_90") -> dict[str, tuple[Change, ...]]:
    risks = evaluate(
        RULES,
        facts=facts,
        command=scan_command(["vllm", "serve", "m"]),
        engine=None,
        gpu=parse_arch(gpu),
    )
    return {r.rule: r.changes for r in risks}


def test_driver_rules() -> None:
    old = Fingerprint(driver_version="550.54", cuda_driver="12.4", cuda_runtime="13.0")
    minor = Fingerprint(cuda_driver="12.8", cuda_runtime="12.9")
    fine = Fingerprint(cuda_driver="13.0", cuda_runtime="12.8")
    assert set(_facts_fire(driver_facts(old))) == {"PRE001"}
    assert set(_facts_fire(driver_facts(minor))) == {"PRE002"}
    assert driver_facts(fine) == []


def _torch(*archs: str) -> Fingerprint:
    return Fingerprint(torch=TorchInfo("2.6.0+cu124", "12.4", archs, False, None))


def test_torch_arch_rules() -> None:
    old = torch_arch_facts(_torch("sm_50", "sm_80", "sm_86", "sm_90"), Arch(12, 0))
    assert set(_facts_fire(old)) == {"PRE003"}
    assert torch_arch_facts(_torch("sm_80", "sm_90", "sm_120"), Arch(12, 0)) == []
    jit = torch_arch_facts(_torch("sm_80", "sm_90", "compute_90"), Arch(12, 0))
    assert _facts_fire(jit) == {
        "ARCH121": (Change("package", "torch", "a build with SASS for this GPU"),)
    }


def test_torch_pin_rule_names_the_required_version() -> None:
    pins = [TorchPin("vllm", "0.7.3", "torch==2.5.1")]
    facts = torch_pin_facts("2.4.0+cu124", pins)
    assert _facts_fire(facts) == {"PRE004": (Change("package", "torch", "==2.5.1"),)}
    assert torch_pin_facts("2.5.1+cu124", pins) == []


def test_model_rules() -> None:
    known = ("4.57.0", {"llama", "qwen2"})
    unknown = model_facts({"model_type": "glm_moe_dsa"}, known=known, trust_remote_code=False)
    assert set(_facts_fire(unknown)) == {"PRE005"}
    assert model_facts({"model_type": "llama"}, known=known, trust_remote_code=False) == []
    remote = {"model_type": "mine", "auto_map": {"AutoConfig": "x.MyConfig"}}
    assert set(_facts_fire(model_facts(remote, known=known, trust_remote_code=False))) == {"PRE006"}
    assert model_facts(remote, known=known, trust_remote_code=True) == []


def test_library_rules_name_the_package() -> None:
    none = Judgement(
        "/site/sgl_kernel/common_ops.abi3.so", Arch(12, 0), "none", ("sm_90a", "sm_100a"), (), 3, 3
    )
    jit = Judgement(
        "/site/flash_attn_2_cuda.so", Arch(12, 0), "ptx_jit", ("sm_80",), ("compute_90",), 1, 0
    )
    fine = Judgement(
        "/site/torch/lib/libtorch_cuda.so", Arch(12, 0), "exact_sass", ("sm_120",), (), 9, 0
    )
    too_new = Judgement(
        "/site/sgl_kernel/flashmla.so",
        Arch(12, 0),
        "ptx_too_new",
        ("sm_90a",),
        ("compute_90",),
        1,
        1,
        ptx_needs_cuda="12.8",
        driver_cuda="12.4",
    )
    owners = {
        none.file: "sgl-kernel",
        jit.file: "flash-attn",
        fine.file: "torch",
        too_new.file: "sgl-kernel",
    }
    facts = archscan_facts([none, jit, fine, too_new], owners)
    assert facts[0] == (
        "no-kernel: sgl-kernel common_ops.abi3.so has sm_90a and sm_100a SASS and no PTX: "
        "no kernel for sm_120"
    )
    fired = _facts_fire(facts, "sm_120")
    assert fired["ARCH120"] == (
        Change("package", "sgl-kernel", "a build with SASS or PTX for this GPU"),
    )
    assert fired["ARCH121"][0].name == "flash-attn"
    assert facts[2] == (
        "ptx-too-new: sgl-kernel flashmla.so has sm_90a SASS and PTX compute_90: no SASS for "
        "sm_120, and its PTX needs a CUDA 12.8 driver; this driver supports CUDA 12.4"
    )
    assert fired["ARCH122"][0].name == "sgl-kernel"
    assert len(facts) == 3


def test_every_preflight_rule_has_a_case() -> None:
    covered = set(FLAG_CASES) | {
        "PRE001",
        "PRE002",
        "PRE003",
        "PRE004",
        "PRE005",
        "PRE006",
        "PRE007",  # tests/env/test_env_serverenv.py
        "PRE008",
        "PRE009",
        "ARCH120",
        "ARCH121",
        "ARCH122",
    }
    assert {r.id for r in RULES} == covered
    assert all(r.id.startswith(("PRE", "ARCH1")) for r in RULES)


def test_scan_command() -> None:
    cmd = scan_command(
        [
            "env",
            "A=1",
            "vllm",
            "serve",
            "m",
            "--port=8000",
            "-tp",
            "2",
            "--enforce-eager",
            "--temperature",
            "-1.5",
            "--trust_remote_code",
        ],
        {"B": "2"},
    )
    assert cmd.command.engine == "vllm"
    assert cmd.get("--port") == (True, "8000")
    assert cmd.get("--tensor-parallel-size") == (True, "2")  # the -tp alias, from vLLM's table
    assert cmd.get("--temperature") == (True, "-1.5")  # a negative number is a value
    assert cmd.get("--enforce_eager") == (True, "true")
    assert cmd.enabled("--trust-remote-code") and not cmd.enabled("--enable-lora")
    assert cmd.get("A") == (True, "1") and cmd.get("B") == (True, "2")
    assert cmd.get("--missing") == (False, None)


def test_flag_rules_see_aliases_docker_env_and_negation() -> None:
    docker = scan_command(
        ["docker", "run", "--gpus", "all", "-e", "VLLM_USE_DEEP_GEMM=1", "vllm/vllm-openai", "m"],
        {"VLLM_USE_DEEP_GEMM": "0"},
    )
    assert docker.get("VLLM_USE_DEEP_GEMM") == (True, "1")  # the command's own -e wins
    sglang = scan_command(["python", "-m", "sglang.launch_server", "--kv_cache_dtype", "fp8_e5m2"])
    assert sglang.get("--kv-cache-dtype") == (True, "fp8_e5m2")
    negated = scan_command(["vllm", "serve", "m", "--no-trust-remote-code"])
    assert not negated.enabled("--trust-remote-code")


def _report(tmp_path: Path, argv: list[str], config: dict | None = None):  # type: ignore[no-untyped-def, type-arg]
    model = None
    if config is not None:
        model = tmp_path / "model"
        model.mkdir()
        (model / "config.json").write_text(json.dumps(config))
    return run_preflight(
        argv, fingerprint=Fingerprint(), gpu=Arch(12, 0), model=model, scan=False, environ={}
    )


def test_run_preflight_blocking_and_redacted(tmp_path: Path) -> None:
    report = _report(tmp_path, [*SGL, "--attention-backend", "trtllm_mha", "--api-key", "s3cr3t"])
    assert report.blocking and report.engine == "sglang"
    assert [r.rule for r in report.risks] == ["ARCH103"]
    data = report.to_dict()
    assert "s3cr3t" not in json.dumps(data)
    assert data["risks"][0]["changes"] == [
        {"kind": "flag", "name": "--attention-backend", "value": "flashinfer"}
    ]


def test_run_preflight_clean_command(tmp_path: Path) -> None:
    # triton needs no module of its own (flashinfer would need the flashinfer package here)
    report = _report(tmp_path, [*SGL, "--attention-backend", "triton"])
    assert not report.blocking and report.risks == ()


def test_run_preflight_reads_the_model(tmp_path: Path) -> None:
    config = {"model_type": "mine", "auto_map": {"AutoConfig": "c.Config"}}
    report = _report(tmp_path, VLLM, config)
    assert [r.rule for r in report.risks] == ["PRE006"]


def test_bad_model_dir(tmp_path: Path) -> None:
    with pytest.raises(UserError):
        run_preflight(VLLM, fingerprint=Fingerprint(), model=tmp_path, scan=False, environ={})
