from __future__ import annotations

from servedoctor.redact import MASK, redact_argv, redact_env, redact_text


def test_secret_flags_are_masked_in_both_forms() -> None:
    argv = [
        "sglang",
        "serve",
        "--api-key",
        "s3cret",
        "--hf-token=hf_abcdefghijklmnopqrstuvwx",
        "--port",
        "8000",
    ]
    out = redact_argv(argv)
    assert out == ["sglang", "serve", "--api-key", MASK, f"--hf-token={MASK}", "--port", "8000"]


def test_token_counts_are_not_secrets() -> None:
    assert redact_argv(["--max-tokens", "64", "--max-new-tokens", "8"]) == [
        "--max-tokens",
        "64",
        "--max-new-tokens",
        "8",
    ]


def test_env_and_text() -> None:
    env = redact_env({"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz", "CUDA_VISIBLE_DEVICES": "0"})
    assert env == {"HF_TOKEN": MASK, "CUDA_VISIBLE_DEVICES": "0"}
    text = redact_text(
        "Authorization: Bearer abcdefghijklmnop and OPENAI_API_KEY=sk-abcdefghijklmnopqrstu"
    )
    assert "abcdefghijklmnop" not in text and "sk-abc" not in text
