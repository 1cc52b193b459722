"""A value the failing line read from the environment: unset that variable."""

from __future__ import annotations

from servedoctor.diagnose import diagnose_text
from servedoctor.model import REMOVE, Change

K8S_PORT = """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/utils.py", line 506, in get_open_port
    port = envs.VLLM_PORT
  File "/usr/local/lib/python3.12/dist-packages/vllm/envs.py", line 188, in <lambda>
    lambda: int(os.getenv('VLLM_PORT', '0'))
ValueError: invalid literal for int() with base 10: 'tcp://172.16.168.90:8000'
"""


def test_a_value_the_raising_line_read_from_the_environment_is_unset() -> None:
    d = diagnose_text(K8S_PORT)
    first = d.hypotheses[0]
    assert first.changes == (Change("env", "VLLM_PORT", REMOVE),)
    assert d.component == "environment"


def test_any_program_and_any_variable_not_one_engines_spelling() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/settings.py", line 12, in <module>\n'
        '    WORKERS = int(os.environ["MYAPP_WORKERS"])\n'
        "ValueError: invalid literal for int() with base 10: 'four'\n"
    )
    changes = [c for h in diagnose_text(log).hypotheses for c in h.changes]
    assert Change("env", "MYAPP_WORKERS", REMOVE) in changes


def test_a_line_that_reads_no_variable_or_an_error_that_is_no_parse_gives_none() -> None:
    no_read = K8S_PORT.replace("int(os.getenv('VLLM_PORT', '0'))", "int(port_text)")
    assert not any(h.id == "ENVREAD.1" for h in diagnose_text(no_read).hypotheses)
    other = K8S_PORT.replace("ValueError: invalid literal", "RuntimeError: CUDA error")
    assert not any(h.id == "ENVREAD.1" for h in diagnose_text(other).hypotheses)
