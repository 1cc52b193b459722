"""A package fix is installed with the server's own pip, not whichever is first on the PATH."""

from __future__ import annotations

import sys

from servedoctor.findings.working import working_command
from servedoctor.model import Change

FIX = [Change("package", "tokenizers", ">=0.23.1,<0.24")]


def test_the_install_line_uses_the_interpreter_the_server_runs() -> None:
    found = working_command([sys.executable, "-m", "transformers", "serve"], {}, FIX)
    assert found is not None
    assert found.lines()[0] == f"{sys.executable} -m pip install 'tokenizers<0.24,>=0.23.1'"
    assert found.to_dict()["python"] == sys.executable


def test_without_a_known_interpreter_it_says_plain_pip() -> None:
    found = working_command(["no-such-server-binary", "--port", "1"], {}, FIX)
    assert found is not None and found.python is None
    assert found.lines()[0].startswith("pip install ")
