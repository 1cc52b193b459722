from __future__ import annotations

import subprocess
import sys


def test_public_api_loads_without_the_cli() -> None:
    code = (
        "import sys, servedoctor\n"
        "from servedoctor import diagnose_text, parse_command, Change\n"
        "d = diagnose_text('RuntimeError: CUDA error: an illegal memory access was encountered')\n"
        "assert d.error_class == 'illegal_memory_access', d\n"
        "cmd = parse_command(['vllm', 'serve', 'm', '--gpu-memory-utilization', '0.9'])\n"
        "assert cmd.apply(Change('flag', '--gpu-memory-utilization', '0.8')).get('--gpu-memory-utilization') == '0.8'\n"
        "assert 'typer' not in sys.modules, 'the CLI was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_a_diagnosis_survives_its_json_form_and_skips_malformed_parts() -> None:
    from servedoctor.diagnose import diagnose_text
    from servedoctor.model import Diagnosis

    d = diagnose_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    back = Diagnosis.from_dict(d.to_dict())
    assert back.to_dict() == d.to_dict()
    broken = {
        **d.to_dict(),
        "evidence": [{"line": "x"}, {"line": 3, "text": "ok"}],
        "hypotheses": [7],
    }
    assert [e.line for e in Diagnosis.from_dict(broken).evidence] == [3]
    assert Diagnosis.from_dict(broken).hypotheses == ()
