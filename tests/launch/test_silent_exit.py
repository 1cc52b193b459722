"""A server that exits without an error line still gets its class's changes to try."""

from __future__ import annotations

from pathlib import Path

from servedoctor.diagnose import diagnose_path
from servedoctor.launch.failure import complete
from servedoctor.launch.types import Failure


def test_a_silent_exit_is_diagnosed_with_the_class_fallbacks(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO 05-01 10:00:00 api_server.py:1 vLLM API server version 0.11.0\n")
    empty = diagnose_path(log, engine="vllm")
    assert empty.error_class is None and not empty.hypotheses
    failure = Failure("process_exit", "load", "exit code 1", 3.0)
    done = complete(empty, failure, log=log, engine="vllm", engine_version="0.11.0")
    assert (done.error_class, done.phase) == ("other", "load")
    changes = [(c.name, c.value) for h in done.hypotheses for c in h.changes]
    assert ("--enforce-eager", None) in changes
    assert ("vllm", "the release before 0.11.0") in changes
    assert done.summary.startswith("process exit")


def test_a_log_that_explains_itself_keeps_its_own_hypotheses(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("OSError: [Errno 98] Address already in use\n")
    found = diagnose_path(log, engine="vllm")
    failure = Failure("process_exit", "startup", "exit code 1", 1.0)
    assert complete(found, failure, log=log, engine="vllm") == found
