"""ssh://[user@]host[:port] parsing and the ssh argv: what reaches ssh and the remote shell."""

from __future__ import annotations

import shlex

import pytest

from servedoctor.errors import UserError
from servedoctor.remote.ssh import Forward, ssh_argv
from servedoctor.remote.url import parse_target


@pytest.mark.parametrize(
    ("url", "user", "host", "port"),
    [
        ("ssh://gpu1", None, "gpu1", None),
        ("ssh://alice@gpu1.lab:2222", "alice", "gpu1.lab", 2222),
        ("bob@10.0.0.7", "bob", "10.0.0.7", None),
        ("ssh://[fe80::1]:22", None, "[fe80::1]", 22),
    ],
)
def test_urls(url: str, user: str | None, host: str, port: int | None) -> None:
    t = parse_target(url, environ={})
    assert (t.user, t.host, t.port) == (user, host, port)


@pytest.mark.parametrize(
    "url",
    [
        "http://gpu1",
        "ssh://-oProxyCommand=touch%20x",
        "ssh://gpu1/path",
        "ssh://u:pw@h",
        "ssh://gpu1:notaport",
        "ssh://",
        "ssh://-l@h",
    ],
)
def test_bad_urls_are_user_errors(url: str) -> None:
    with pytest.raises(UserError):
        parse_target(url, environ={})


def test_environment_names_the_config_and_the_remote_python() -> None:
    env = {"SERVEDOCTOR_SSH_CONFIG": "/tmp/cfg", "SERVEDOCTOR_REMOTE_PYTHON": "/opt/py/bin/python"}
    t = parse_target("ssh://h", environ=env)
    assert (t.config_file, t.python) == ("/tmp/cfg", "/opt/py/bin/python")


def test_argv_is_batch_mode_and_quotes_for_the_remote_shell() -> None:
    t = parse_target("ssh://alice@gpu1:2222", environ={})
    remote = ["vllm", "serve", "my model", "--chat-template", "$(rm -rf ~)", "a'b"]
    argv = ssh_argv(t, remote, forwards=[Forward(40001, "127.0.0.1", 8000)])
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-l") + 1] == "alice"
    assert "BatchMode=yes" in argv and "-T" in argv
    assert argv[argv.index("-L") + 1] == "127.0.0.1:40001:127.0.0.1:8000"
    assert argv[-3:-1] == ["--", "gpu1"]  # the host can never be read as an option
    assert shlex.split(argv[-1]) == remote  # the remote shell sees exactly the argv
