from __future__ import annotations

import pytest

from servedoctor.redact import (
    MASK,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_lines,
    redact_text,
    redact_url,
)


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


def test_sglang_batch_lines_keep_their_token_counts() -> None:
    line = "Prefill batch, #new-seq: 1, #new-token: 15, #cached-token: 0, token usage: 0.00"
    assert redact_text(line) == line
    assert redact_text("auth_token: abc, new_token: 15") == "auth_token: ***, new_token: 15"


def test_env_and_text() -> None:
    env = redact_env({"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz", "CUDA_VISIBLE_DEVICES": "0"})
    assert env == {"HF_TOKEN": MASK, "CUDA_VISIBLE_DEVICES": "0"}
    text = redact_text(
        "Authorization: Bearer abcdefghijklmnop and OPENAI_API_KEY=sk-abcdefghijklmnopqrstu"
    )
    assert "abcdefghijklmnop" not in text and "sk-abc" not in text


# -- names: secret words as whole segments ---------------------------------------------------

SECRET_NAMES = [
    "api_key", "--api-key", "OPENAI_API_KEY", "apiKey", "x-api-key", "APIKEY", "hf_token",
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "access_token", "auth_token", "accessToken", "token",
    "--token", "secret", "client_secret", "AWS_SECRET_ACCESS_KEY", "password", "PGPASSWORD",
    "passwd", "db-password", "credential", "credentials", "private_key", "--private-key",
    "Authorization", "authorization", "basic_auth",
]  # fmt: skip
PUBLIC_NAMES = [
    "tokenizer_path", "tokenizer", "--tokenizer", "max_tokens", "--max-tokens", "num_tokens",
    "max_num_batched_tokens", "--max-num-batched-tokens", "token_usage", "tokens_per_second",
    "skip_tokenizer_init", "--skip-tokenizer-init", "tokenizerMode", "eos_token", "pad_token",
    "author", "model", "port", "key", "PWD", "CUDA_VISIBLE_DEVICES", "hf_token_path",
]  # fmt: skip


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_public_names(name: str) -> None:
    assert not is_secret_name(name)


# -- text: every spelling of a secret field --------------------------------------------------

MASKED_TEXT = [
    ("non-default args: {'api_key': 'abc123xyz', 'port': 8000}",
     "non-default args: {'api_key': '***', 'port': 8000}"),
    ('{"token": "abc123xyz", "model": "m"}', '{"token": "***", "model": "m"}'),
    ("Namespace(api_key='abc123xyz', port=8000)", "Namespace(api_key='***', port=8000)"),
    ('Namespace(api_key="abc123xyz")', 'Namespace(api_key="***")'),
    ("password: abc123xyz", "password: ***"),
    ("password : abc123xyz user: bob", "password : *** user: bob"),
    ("run --api-key abc123xyz --port 8000", "run --api-key *** --port 8000"),
    ("run --api-key=abc123xyz --port 8000", "run --api-key=*** --port 8000"),
    ("HF_TOKEN=abc123xyz CUDA_VISIBLE_DEVICES=0", "HF_TOKEN=*** CUDA_VISIBLE_DEVICES=0"),
    ("export PGPASSWORD=abc123xyz", "export PGPASSWORD=***"),
    ("Authorization: Basic dXNlcjpwdw==", "Authorization: Basic ***"),
    ("Authorization: Bearer abc123xyz", "Authorization: Bearer ***"),
    ("authorization: token abc123xyz", "authorization: token ***"),
    ("headers={'Authorization': 'Basic dXNlcjpwdw=='}", "headers={'Authorization': '***'}"),
    ("GET /v1?api_key=abc123xyz&model=m", "GET /v1?api_key=***&model=m"),
    ("https://h/x?a=1&token=abc123xyz", "https://h/x?a=1&token=***"),
    ("api_key='abc123xyz (cut)", "api_key='***"),
    ("postgresql+psycopg://user:abc123xyz@db:5432/findings",
     "postgresql+psycopg://user:***@db:5432/findings"),
    ("connect to redis://:abc123xyz@cache:6379/0 now", "connect to redis://:***@cache:6379/0 now"),
    ("mysql://u:p@ss@host/db", "mysql://u:***@host/db"),
    ("'https://bob:abc123xyz@proxy:3128'", "'https://bob:***@proxy:3128'"),
    ("key hf_abcdefghijklmnopqrstuvwx here", "key *** here"),
    ("sk-abcdefghijklmnopqrstu", "***"),
    ("ghp_abcdefghijklmnopqrstuvwx", "***"),
    ("AKIAABCDEFGHIJKLMNOP", "***"),
]  # fmt: skip
KEPT_TEXT = [
    "non-default args: {'tokenizer_path': '/models/tok', 'max_tokens': 16, 'api_key': None}",
    "Namespace(tokenizer='meta/llama', max_num_batched_tokens=8192, skip_tokenizer_init=False)",
    '{"token_usage": 12, "tokens_per_second": 3.5, "num_tokens": 7}',
    "eos_token='</s>' pad_token: <pad>",
    "https://huggingface.co/meta/llama and http://user@host:8000/v1 and http://host:8000",
    "2024-01-01 12:30:45 INFO: started on 0.0.0.0:8000",
    "Token indices sequence length is longer than the maximum",
    "--max-tokens 64 --tokenizer-mode auto --port 8000",
]


@pytest.mark.parametrize(("raw", "masked"), MASKED_TEXT)
def test_secret_fields_in_text_are_masked(raw: str, masked: str) -> None:
    assert redact_text(raw) == masked


@pytest.mark.parametrize("text", KEPT_TEXT)
def test_public_fields_in_text_are_kept(text: str) -> None:
    assert redact_text(text) == text


def test_argv_masks_urls_headers_and_spares_a_missing_value() -> None:
    argv = [
        "vllm", "serve", "m", "--tokenizer", "t", "--password", "pw1234",
        "--db", "postgresql://u:pw1234@h/db", "-H", "Authorization: Bearer pw1234",
        "--api-key", "--port", "8000", "--max-num-batched-tokens", "8192",
    ]  # fmt: skip
    assert redact_argv(argv) == [
        "vllm", "serve", "m", "--tokenizer", "t", "--password", MASK,
        "--db", f"postgresql://u:{MASK}@h/db", "-H", f"Authorization: Bearer {MASK}",
        "--api-key", "--port", "8000", "--max-num-batched-tokens", "8192",
    ]  # fmt: skip


def test_env_masks_by_name_and_urls_in_values() -> None:
    env = {
        "PGPASSWORD": "pw1234",
        "DATABASE_URL": "postgresql://u:pw1234@h/db",
        "VLLM_ARGS": "--api-key pw1234",
        "TOKENIZERS_PARALLELISM": "false",
    }
    assert redact_env(env) == {
        "PGPASSWORD": MASK,
        "DATABASE_URL": f"postgresql://u:{MASK}@h/db",
        "VLLM_ARGS": f"--api-key {MASK}",
        "TOKENIZERS_PARALLELISM": "false",
    }


def test_redact_url_keeps_the_user_and_everything_but_the_password() -> None:
    url = "postgresql+psycopg://findings:s3cr3t-pw@db.example:5432/sd?sslmode=require"
    assert redact_url(url) == "postgresql+psycopg://findings:***@db.example:5432/sd?sslmode=require"
    assert redact_url("sqlite:////home/u/.local/share/servedoctor/findings.db") == (
        "sqlite:////home/u/.local/share/servedoctor/findings.db"
    )


def test_redact_lines() -> None:
    assert redact_lines(["a", "password=x1", "b"]) == ["a", f"password={MASK}", "b"]
