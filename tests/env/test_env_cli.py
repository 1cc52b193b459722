from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cudalibs import TARGETS
from typer.testing import CliRunner

from servedoctor.cli import app

runner = CliRunner()


def _sd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servedoctor", *args], capture_output=True, text=True, timeout=120
    )


def test_env_json_is_one_object() -> None:
    result = runner.invoke(app, ["env", "--json", "--no-torch"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {"gpus", "driver_version", "cuda_runtime", "torch", "packages", "notes"} <= set(data)


def test_env_human_says_what_is_missing() -> None:
    result = runner.invoke(app, ["env", "--no-torch"])
    assert result.exit_code == 0
    assert result.output.startswith("GPU ")
    assert "driver" in result.output and "torch" in result.output


def test_archscan_json_lines(cuda_libs: dict[str, Path]) -> None:
    libs = [str(cuda_libs["sm80"]), str(cuda_libs["several"])]
    result = runner.invoke(app, ["archscan", "--json", "--gpu", "sm_90", *libs])
    assert result.exit_code == 1  # libsm80.so has nothing for sm_90
    records = [json.loads(line) for line in result.output.splitlines()]
    assert [(Path(r["file"]).name, r["sass"], r["ptx"], r["runnable"]) for r in records] == [
        ("libsm80.so", ["sm_80"], [], False),
        ("libseveral.so", ["sm_80", "sm_90a", "sm_100f"], ["compute_120"], True),
    ]


def test_archscan_directory_human(cuda_libs: dict[str, Path]) -> None:
    folder = cuda_libs["sm120"].parent
    result = runner.invoke(app, ["archscan", "--gpu", "sm_120", str(folder)])
    assert "libsm90a.so has sm_90a SASS and no PTX: no kernel for sm_120" in result.output
    assert f"{len(TARGETS)} files" in result.output


def test_archscan_judges_ptx_against_the_driver(cuda_libs: dict[str, Path]) -> None:
    lib = str(cuda_libs["sm90_ptx"])
    old = runner.invoke(
        app, ["archscan", "--json", "--gpu", "sm_120", "--cuda-driver", "11.8", lib]
    )
    record = json.loads(old.output)
    assert old.exit_code == 1
    assert (record["how"], record["runnable"]) == ("ptx_too_new", False)
    assert record["ptx_needs_cuda"] and record["ptx_isa"]
    new = runner.invoke(
        app, ["archscan", "--json", "--gpu", "sm_120", "--cuda-driver", "99.0", lib]
    )
    assert new.exit_code == 0 and json.loads(new.output)["how"] == "ptx_jit"
    bad = _sd("archscan", "--gpu", "sm_120", "--cuda-driver", "new", lib)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "servedoctor: --cuda-driver wants a CUDA version such as 12.8, not 'new'"
    ]


def test_archscan_without_gpu_has_no_runnable(tmp_path: Path) -> None:
    blob = tmp_path / "x.so"
    blob.write_bytes(b"\x7fELF" + b"\0" * 100)
    result = runner.invoke(app, ["archscan", "--json", str(blob)])
    record = json.loads(result.output)
    assert record["file"] == str(blob) and "error" in record


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["archscan", "--gpu", "sm_9x", "/"], "not a CUDA architecture"),
        (["archscan", "/no/such/lib.so"], "no such file or directory"),
        (["preflight"], "give the server command after --"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = _sd(*args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_preflight_exit_codes(tmp_path: Path) -> None:
    bad = [
        "preflight",
        "--gpu",
        "sm_120",
        "--no-scan",
        "--",
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--attention-backend",
        "trtllm_mha",
    ]
    done = _sd(*bad)
    assert done.returncode == 1, done.stderr
    assert "BLOCKING ARCH103" in done.stdout
    assert "change:   --attention-backend flashinfer" in done.stdout
    ok = _sd(
        "preflight",
        "--gpu",
        "sm_100",
        "--no-scan",
        "--json",
        "--",
        "python",
        "-m",
        "sglang.launch_server",
        "--attention-backend",
        "trtllm_mha",
    )
    risks = json.loads(ok.stdout)["risks"]
    assert "ARCH103" not in {r["rule"] for r in risks}  # trtllm_mha is fine on sm_100
    assert ok.returncode == (1 if any(r["severity"] == "blocking" for r in risks) else 0)
