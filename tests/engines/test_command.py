from __future__ import annotations

from pathlib import Path

import pytest

from servedoctor.engines.command import parse_command
from servedoctor.engines.flagtable import flag_table, known_tables
from servedoctor.errors import UserError
from servedoctor.model import REMOVE, SERVER_BIN, Change


def test_every_flag_table_loads_and_lists_bring_up_flags() -> None:
    assert set(known_tables()) >= {"sglang", "vllm", "transformers"}
    sglang = flag_table("sglang")
    vllm = flag_table("vllm")
    assert sglang is not None and vllm is not None
    for flag in (
        "--mem-fraction-static",
        "--attention-backend",
        "--kv-cache-dtype",
        "--nsa-decode-backend",
        "--cuda-graph-max-bs",
        "--tp-size",
        "--port",
    ):
        assert sglang.lookup(flag) is not None, flag
    for flag in (
        "--gpu-memory-utilization",
        "--enforce-eager",
        "--kv-cache-dtype",
        "--max-model-len",
        "--tensor-parallel-size",
        "--quantization",
    ):
        assert vllm.lookup(flag) is not None, flag


@pytest.mark.parametrize("alias", ["--tp", "--tp-size", "--tensor-parallel-size", "--tp_size"])
def test_sglang_tp_aliases_share_one_canonical_flag(alias: str) -> None:
    cmd = parse_command(["python", "-m", "sglang.launch_server", "--model", "m", alias, "4"])
    assert cmd.engine == "sglang"
    assert cmd.get("--tp-size") == "4"
    assert cmd.value("--tp") == 4
    assert cmd.unknown == ()


def test_env_prefixes_and_python_options_before_module() -> None:
    cmd = parse_command(
        [
            "env",
            "A=1",
            "B=two words",
            "python3.11",
            "-u",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "zai-org/GLM-5",
            "--trust-remote-code",
        ]
    )
    assert dict(cmd.env) == {"A": "1", "B": "two words"}
    assert cmd.program == ("python3.11", "-u", "-m", "sglang.launch_server")
    assert cmd.get("--trust-remote-code") == "true"
    assert cmd.value("--trust-remote-code") is True
    assert cmd.value("--mem-fraction-static") is None  # auto
    assert cmd.value("--port") == 30000  # table default
    assert cmd.render() == list(cmd.argv[3:])


def test_bare_assignment_prefix_and_sglang_serve() -> None:
    cmd = parse_command(["SGLANG_ENABLE_JIT_DEEPGEMM=0", "sglang", "serve", "--model-path", "m"])
    assert cmd.engine == "sglang" and cmd.env == {"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
    assert cmd.render() == ["sglang", "serve", "--model-path", "m"]


def test_vllm_serve_positional_model_and_negated_boolean() -> None:
    cmd = parse_command(
        [
            "vllm",
            "serve",
            "Qwen/Qwen3-8B",
            "-tp",
            "2",
            "--no-enable-prefix-caching",
            "--max-model-len=32768",
        ]
    )
    assert cmd.engine == "vllm"
    assert cmd.get("--model") == "Qwen/Qwen3-8B"
    assert cmd.value("--tensor-parallel-size") == 2
    assert cmd.get("--enable-prefix-caching") == "false"
    assert cmd.value("--max-model-len") == 32768
    assert cmd.render() == list(cmd.argv)
    renamed = cmd.apply(Change("flag", "--model", "other/model"))
    assert renamed.render()[2] == "other/model"
    assert renamed.render().count("other/model") == 1


def test_vllm_api_server_module() -> None:
    cmd = parse_command(
        [
            "python",
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            "m",
            "--gpu-memory-utilization",
            "0.85",
        ]
    )
    assert cmd.engine == "vllm" and cmd.value("--gpu-memory-utilization") == 0.85


def test_transformers_serve() -> None:
    cmd = parse_command(["transformers", "serve", "--port", "8123", "--continuous-batching"])
    assert cmd.engine == "transformers"
    assert cmd.value("--port") == 8123 and cmd.value("--continuous-batching") is True


def test_docker_wrapper_collects_env_and_keeps_options() -> None:
    argv = [
        "docker",
        "run",
        "--gpus",
        "all",
        "--shm-size",
        "32g",
        "-e",
        "HF_TOKEN=hf_x",
        "-e",
        "PASS_THROUGH",
        "-p",
        "30000:30000",
        "--ipc=host",
        "--rm",
        "lmsysorg/sglang:latest",
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--host",
        "0.0.0.0",
    ]
    cmd = parse_command(argv)
    assert cmd.engine == "sglang" and cmd.docker
    assert cmd.env == {"HF_TOKEN": "hf_x"}
    rendered = cmd.render()
    assert rendered[: rendered.index("lmsysorg/sglang:latest")].count("-e") == 2
    assert "HF_TOKEN=hf_x" in rendered and "PASS_THROUGH" in rendered
    assert cmd.get("--host") == "0.0.0.0"
    changed = cmd.apply(Change("env", "SGLANG_ENABLE_JIT_DEEPGEMM", "0")).render()
    assert changed[changed.index("SGLANG_ENABLE_JIT_DEEPGEMM=0") - 1] == "-e"
    assert changed.index("SGLANG_ENABLE_JIT_DEEPGEMM=0") < changed.index("lmsysorg/sglang:latest")


def test_docker_image_entry_point_guesses_engine() -> None:
    cmd = parse_command(
        ["docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.11.0", "--model", "m", "-tp", "4"]
    )
    assert cmd.engine == "vllm" and cmd.program == ()
    assert cmd.value("--tensor-parallel-size") == 4
    with pytest.raises(UserError):
        parse_command(["docker", "run", "busybox", "--model", "m"])


def test_unknown_flags_are_reported_and_kept_in_place() -> None:
    argv = ["vllm", "serve", "m", "--brand-new-flag", "7", "--another-new", "--port", "9"]
    cmd = parse_command(argv)
    assert cmd.unknown == ("--brand-new-flag", "--another-new")
    assert cmd.get("--brand-new-flag") == "7"
    assert cmd.render() == argv


def test_apply_set_replace_add_remove() -> None:
    cmd = parse_command(
        [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--tp",
            "8",
            "--mem-fraction-static=0.95",
        ]
    )
    lower = cmd.apply(Change("flag", "--mem-fraction-static", "0.88"))
    assert lower.render()[-1] == "--mem-fraction-static=0.88"
    assert cmd.value("--mem-fraction-static") == 0.95  # frozen: original untouched
    added = cmd.apply(Change("flag", "--attention-backend", "triton"))
    assert added.render()[-2:] == ["--attention-backend", "triton"]
    boolean = cmd.apply(Change("flag", "--disable-cuda-graph"))
    assert boolean.render()[-1] == "--disable-cuda-graph" and boolean.value("--disable-cuda-graph")
    via_alias = cmd.apply(Change("flag", "--tensor-parallel-size", "4"))
    assert via_alias.render().count("--tp") == 1 and via_alias.get("--tp-size") == "4"
    removed = cmd.apply(Change("flag", "--tp-size", REMOVE))
    assert "--tp" not in removed.render() and removed.value("--tp-size") == 1
    env = cmd.apply(Change("env", "CUDA_LAUNCH_BLOCKING", "1"))
    assert env.env == {"CUDA_LAUNCH_BLOCKING": "1"} and env.render() == cmd.render()
    assert env.apply(Change("env", "CUDA_LAUNCH_BLOCKING", REMOVE)).env == {}
    with pytest.raises(ValueError):
        cmd.apply(Change("package", "torch", "2.9"))


def test_apply_switches_negatable_boolean_off() -> None:
    cmd = parse_command(["vllm", "serve", "m", "--enforce-eager"])
    off = cmd.apply(Change("flag", "--enforce-eager", "false"))
    assert off.render() == ["vllm", "serve", "m", "--no-enforce-eager"]
    assert off.value("--enforce-eager") is False


def test_repeated_flag_last_wins_and_apply_collapses_duplicates() -> None:
    cmd = parse_command(["vllm", "serve", "m", "--port", "1", "--port", "2"])
    assert cmd.value("--port") == 2
    assert cmd.apply(Change("flag", "--port", "3")).render() == [
        "vllm",
        "serve",
        "m",
        "--port",
        "3",
    ]


def test_empty_command_is_a_user_error() -> None:
    with pytest.raises(UserError):
        parse_command([])


def test_an_environment_value_is_expanded_as_the_server_will_see_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    python = venv_bin / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin")
    cmd = parse_command([str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", "m"])
    changed = cmd.apply(Change("env", "PATH", f"{SERVER_BIN}:$PATH"))
    assert changed.env["PATH"] == f"{venv_bin}:/usr/bin"
    # a wrapper script run by that interpreter: the interpreter's folder, not `vllm` on PATH
    wrapped = parse_command([str(python), "/opt/run.py", "vllm", "serve", "m"])
    assert wrapped.apply(Change("env", "PATH", f"{SERVER_BIN}:$PATH")).env["PATH"] == (
        f"{venv_bin}:/usr/bin"
    )
    # a value naming another variable reads it (the command's own first, then the process')
    lib = cmd.apply(Change("env", "LD_LIBRARY_PATH", "/opt/lib:${PATH}"))
    assert lib.env["LD_LIBRARY_PATH"] == "/opt/lib:/usr/bin"
    # a program that cannot be found leaves PATH as it is
    missing = parse_command(["/nowhere/vllm", "serve", "m"]).apply(
        Change("env", "PATH", f"{SERVER_BIN}:$PATH")
    )
    assert missing.env["PATH"] == "/usr/bin"


def test_a_successor_spelling_replaces_the_refused_one() -> None:
    # llama.cpp removed --draft-max for --spec-draft-n-max: setting the new one drops the old
    cmd = parse_command(["llama-server", "-m", "x.gguf", "--draft-max", "16", "-md", "d.gguf"])
    assert cmd.apply(Change("flag", "--spec-draft-n-max", "16")).render() == [
        "llama-server", "-m", "x.gguf", "-md", "d.gguf", "--spec-draft-n-max", "16",
    ]  # fmt: skip
    # SGLang's parser refuses the underscore spelling: the change is written as it takes it
    sglang = parse_command(
        ["python", "-m", "sglang.launch_server", "--model-path", "m", "--reasoning_parser", "k2"]
    )
    assert sglang.apply(Change("flag", "--reasoning-parser", "k2")).render()[-2:] == [
        "--reasoning-parser", "k2",
    ]  # fmt: skip
    # a spelling the release has is kept as the user wrote it
    vllm = parse_command(["vllm", "serve", "m", "-tp", "2"])
    assert vllm.apply(Change("flag", "--tensor-parallel-size", "4")).render()[-2:] == ["-tp", "4"]
