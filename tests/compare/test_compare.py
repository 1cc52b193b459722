from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from servedoctor.cli import app
from servedoctor.compare import card_commands, compare, scan_log
from servedoctor.engines.command import parse_command

FIXTURES = Path(__file__).parent / "fixtures"
README = FIXTURES / "glm5-README.md"  # zai-org/GLM-5 model card (source URL in the file)
LOG = FIXTURES / "glm52-nvfp4-pro6000.log"
MODEL = "/data/models/nvidia/GLM-5.2-NVFP4"
USED = [
    "python3",
    "-m",
    "sglang.launch_server",
    "--model-path",
    MODEL,
    "--tp",
    "8",
    "--mem-fraction-static",
    "0.88",
    "--kv-cache-dtype",
    "fp8_e4m3",
    "--reasoning-parser",
    "glm45",
    "--tool-call-parser",
    "glm47",
]


def test_model_card_commands_are_extracted_from_indented_fences() -> None:
    commands = card_commands(README)
    engines = [c.command.engine for c in commands]
    assert engines == ["vllm", "sglang"]  # `docker pull` and `pip install` lines are skipped
    vllm, sglang = (c.command for c in commands)
    assert vllm.get("--model") == "zai-org/GLM-5-FP8"
    assert vllm.value("--tensor-parallel-size") == 8
    assert "--speculative-config.method" in vllm.unknown  # dotted vLLM args: reported
    assert sglang.value("--tp-size") == 8 and sglang.value("--mem-fraction-static") == 0.85
    assert sglang.get("--speculative-algorithm") == "EAGLE" and sglang.unknown == ()


def test_three_way_diff_on_real_card_and_server_args_dump() -> None:
    card = card_commands(README)[1].command
    result = compare(parse_command(USED), card=card, log_lines=LOG.read_text().splitlines())
    rows = {r.flag: r for r in result.rows}
    assert rows["--mem-fraction-static"].status == "differs"
    assert (rows["--mem-fraction-static"].card, rows["--mem-fraction-static"].used) == (
        "0.85",
        "0.88",
    )
    assert rows["--speculative-algorithm"].status == "missing"
    assert rows["--kv-cache-dtype"].status == "extra"
    assert rows["--tp-size"].status == "same"
    # The server picked these on its own: the dump shows them, the command never set them.
    for flag, value in [
        ("--attention-backend", "dsa"),
        ("--nsa-decode-backend", "flashmla_kv"),
        ("--sampling-backend", "flashinfer"),
        ("--page-size", "64"),
    ]:
        assert rows[flag].status == "server-changed", flag
        assert rows[flag].effective == value and rows[flag].why
    moe = rows["--moe-runner-backend"]
    assert moe.status == "server-changed" and "log line" in moe.why


def test_log_lines_explain_auto_selected_backend_and_dtype_override() -> None:
    lines = [
        "[2025-10-01 10:00:00 TP0] Attention backend not explicitly specified. "
        "Use fa3 backend by default.",
        "WARNING 10-01 config.py:1] Casting torch.float32 to torch.bfloat16.",
        "INFO Using FLASHINFER attention backend out of potential backends: ['FLASHINFER']",
    ]
    sglang = scan_log(lines, engine="sglang")
    assert [(c.flag, c.value) for c in sglang.changes] == [
        ("--attention-backend", "fa3"),
        ("--dtype", "bfloat16"),
    ]
    vllm = scan_log(lines, engine="vllm")
    assert ("--attention-backend", "FLASHINFER") in [(c.flag, c.value) for c in vllm.changes]
    used = parse_command(
        [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--attention-backend",
            "triton",
        ]
    )
    rows = {r.flag: r for r in compare(used, log_lines=lines).rows}
    assert rows["--attention-backend"].status == "server-changed"
    assert rows["--attention-backend"].effective == "fa3"


def test_secret_flag_values_are_masked() -> None:
    used = parse_command(["vllm", "serve", "m", "--api-key", "sk-secretsecretsecret"])
    rows = {r.flag: r for r in compare(used).rows}
    assert rows["--api-key"].used == "***"


def test_cli_compare_json_and_plan_json() -> None:
    runner = CliRunner()
    res = runner.invoke(
        app, ["compare", "--model-card", str(README), "--log", str(LOG), "--json", "--", *USED]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["engine"] == "sglang" and data["card_command"].endswith(":61")
    res = runner.invoke(
        app,
        [
            "plan",
            "--model",
            str(Path(__file__).parents[1] / "plan" / "fixtures" / "glm5-nvfp4"),
            "--tp",
            "8",
            "--gpu-memory-gib",
            "95",
            "--kv-cache-dtype",
            "bf16",
            "--mem-fraction-static",
            "0.92",
            "--weights-gib-per-gpu",
            "57.06",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["kv_tokens"] == 314176


def test_cli_bad_input_exits_2() -> None:
    from servedoctor.errors import UserError

    runner = CliRunner()
    res = runner.invoke(app, ["plan", "--model", "/nonexistent", "--gpu-memory-gib", "80"])
    assert isinstance(res.exception, UserError) or res.exit_code == 2


# A verbatim public SGLang log (source in the fixture's header): GLM-5-FP8 on 8x MI355X.
ROCM_LOG = FIXTURES / "glm5-fp8-mi355x-sglang.log"
ROCM_USED = [
    "python3",
    "-m",
    "sglang.launch_server",
    "--attention-backend",
    "triton",
    "--model-path",
    "zai-org/GLM-5-FP8",
    "--tp-size",
    "8",
    "--kv-cache-dtype",
    "fp8_e4m3",
]


def test_real_rocm_log_shows_nsa_backends_and_page_size_chosen_by_the_server() -> None:
    lines = ROCM_LOG.read_text().splitlines()
    result = compare(parse_command(ROCM_USED), log_lines=lines)
    rows = {r.flag: r for r in result.rows}
    for flag, value, reason in [
        ("--nsa-prefill-backend", "flashmla_auto", "fp8_e4m3 KV cache"),
        ("--nsa-decode-backend", "flashmla_kv", "fp8_e4m3 KV cache"),
        ("--page-size", "1", "ROCm"),
    ]:
        row = rows[flag]
        assert row.status == "server-changed", flag
        assert row.used is None and row.effective == value, flag
        assert reason in row.why and "log line" in row.why, row.why
    # Both NSA backends come from one log line; the dump agrees with it.
    facts = scan_log(lines, engine="sglang")
    assert facts.config["nsa_decode_backend"] == "flashmla_kv"
    assert facts.config["page_size"] == 1
    nsa = [c for c in facts.changes if c.flag.startswith("--nsa-")]
    assert len(nsa) == 2 and nsa[0].line == nsa[1].line
    # What the command asked for is kept and not reported as a server change.
    assert rows["--attention-backend"].effective == "triton"
    assert rows["--attention-backend"].status != "server-changed"
    assert rows["--kv-cache-dtype"].status != "server-changed"


def test_nsa_backends_the_user_set_are_not_reported_as_server_changes() -> None:
    line = (
        "WARNING server_args.py:1: Set NSA backends for bfloat16 KV Cache: prefill=fa3, decode=fa3."
    )
    used = parse_command([*ROCM_USED[:-2], "--nsa-decode-backend", "fa3"])
    rows = {r.flag: r for r in compare(used, log_lines=[line]).rows}
    assert rows["--nsa-decode-backend"].status != "server-changed"
    assert rows["--nsa-prefill-backend"].status == "server-changed"
    assert "bfloat16" in rows["--nsa-prefill-backend"].why
