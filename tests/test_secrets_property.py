"""Property: a random secret, put in any carrier in any spelling, never survives redaction.

Examples come from the suite's Hypothesis profile (tests/conftest.py: derandomized).
"""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from servedoctor.redact import MASK, redact_argv, redact_env, redact_lines, redact_text, redact_url

_ALNUM = string.ascii_letters + string.digits
#: 12-40 characters: letters and digits, and URL-safe punctuation after the first one.
secrets = st.builds(
    lambda first, rest: first + rest,
    st.sampled_from(_ALNUM),
    st.text(alphabet=_ALNUM + "-._~", min_size=11, max_size=39),
)
SECRET_FLAGS = ["--api-key", "--hf-token", "--token", "--password", "--db-password",
                "--client-secret", "--access-token", "--auth-token", "--private-key",
                "--credentials"]  # fmt: skip
SECRET_NAMES = ["api_key", "HF_TOKEN", "OPENAI_API_KEY", "token", "access_token", "auth_token",
                "secret", "password", "PGPASSWORD", "passwd", "credential", "private_key",
                "apiKey", "authToken"]  # fmt: skip
PUBLIC_NAMES = ["tokenizer_path", "tokenizer", "max_tokens", "num_tokens",
                "max_num_batched_tokens", "token_usage", "tokens_per_second",
                "skip_tokenizer_init", "model", "port"]  # fmt: skip
secret_flags = st.sampled_from(SECRET_FLAGS)
secret_names = st.sampled_from(SECRET_NAMES)
schemes = st.sampled_from(
    ["https", "http", "postgresql+psycopg", "mysql", "redis", "amqp", "s3", "git+ssh"]
)
users = st.text(alphabet=_ALNUM + "._-", max_size=12)
#: Every spelling of ``name`` → ``secret`` a log line or a command uses.
FORMS = [
    "{name}={s}",
    "{name}='{s}'",
    '{name}="{s}"',
    "'{name}': '{s}'",
    '"{name}": "{s}"',
    "{name}: {s}",
    "--{name} {s}",
    "--{name}={s}",
    "Authorization: Basic {s}",
    "Authorization: Bearer {s}",
    "Authorization: Token {s}",
    "{{'Authorization': 'Bearer {s}'}}",
    "GET /v1/models?{name}={s}&x=1",
]
forms = st.sampled_from(FORMS)
prefixes = st.sampled_from(
    ["", "INFO 05-01 12:00:00 api_server.py:42] non-default args: {", "[rank0]: ", "  ", "env: "]
)
suffixes = st.sampled_from(["", ", 'port': 8000}", " --port 8000", "\n", ")", " tokens=5"])


def _url(scheme: str, user: str, secret: str) -> str:
    return f"{scheme}://{user}:{secret}@host.example:5432/db?sslmode=require"


@given(secrets, secret_flags, st.booleans())
def test_secret_flag_in_argv(secret: str, flag: str, joined: bool) -> None:
    argv = ["vllm", "serve", "m", *([f"{flag}={secret}"] if joined else [flag, secret]), "--x"]
    out = redact_argv(argv)
    assert not any(secret in a for a in out)
    assert MASK in " ".join(out) and "--x" in out


@given(secrets, secret_names, forms, prefixes, suffixes)
def test_secret_in_any_spelling_in_argv_and_log(
    secret: str, name: str, form: str, prefix: str, suffix: str
) -> None:
    line = prefix + form.format(name=name, s=secret) + suffix
    assert secret in line
    assert secret not in redact_text(line)
    assert not any(secret in x for x in redact_lines([line, "next line"]))
    assert not any(secret in a for a in redact_argv(["sh", "-c", line]))


@given(secrets, secret_names)
def test_secret_env_var(secret: str, name: str) -> None:
    out = redact_env({name: secret, "CUDA_VISIBLE_DEVICES": "0"})
    assert secret not in repr(out) and out["CUDA_VISIBLE_DEVICES"] == "0"


@given(secrets, schemes, users, prefixes, suffixes)
def test_secret_in_a_url_in_every_carrier(
    secret: str, scheme: str, user: str, prefix: str, suffix: str
) -> None:
    url = _url(scheme, user, secret)
    assert redact_url(url) == _url(scheme, user, MASK)  # the user name is kept
    assert secret not in redact_text(prefix + url + suffix)
    assert secret not in redact_text(f"connecting to '{url}'")
    assert not any(secret in a for a in redact_argv(["x", "--store", url, f"--db={url}", url]))
    env = redact_env({"DATABASE_URL": url, "HTTPS_PROXY": url, "SERVEDOCTOR_STORE": url})
    assert secret not in repr(env)


@given(
    st.sampled_from(PUBLIC_NAMES),
    st.text(alphabet=_ALNUM, min_size=1, max_size=30),
    forms,
    prefixes,
)
def test_public_fields_are_kept(name: str, value: str, form: str, prefix: str) -> None:
    if "Authorization" in form:
        return  # that header is secret whatever the field name
    line = prefix + form.format(name=name, s=value)
    assert redact_text(line) == line
    assert redact_env({name: value}) == {name: value}
