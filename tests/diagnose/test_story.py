"""The GLM-5-NVFP4 bring-up story (DEVELOPERS.md), as SGLang logs, diagnosed end to end."""

from __future__ import annotations

from pathlib import Path

from servedoctor.diagnose import diagnose_path


def test_decode_crash_after_prefill(examples: Path) -> None:
    d = diagnose_path(examples / "glm5-decode-device-assert.log")
    assert (d.error_class, d.phase, d.component) == ("device_assert", "decode", "attention")
    assert d.sync_point, "copy_done.synchronize() is a sync point, not the failing kernel"
    assert "synchronisation point" in d.summary
    # the caller that waited, not torch's wrapper around the wait
    assert "process_batch_result_decode (`copy_done.synchronize()`)" in d.summary
    first = d.hypotheses[0]
    assert [c.to_dict() for c in first.changes] == [
        {"kind": "env", "name": "CUDA_LAUNCH_BLOCKING", "value": "1"}
    ]
    changes = {(c.kind, c.name, c.value) for h in d.hypotheses for c in h.changes}
    assert ("flag", "--nsa-decode-backend", "tilelang") in changes
    assert ("flag", "--kv-cache-dtype", "auto") in changes
    assert ("package", "transformers", "==4.57.1") in changes
    assert all(len(h.changes) <= 1 for h in d.hypotheses), "never two changes in one hypothesis"
    lines = {e.line for e in d.evidence}
    assert 109 in lines  # the error line itself


def test_graph_capture_oom_at_095(examples: Path) -> None:
    d = diagnose_path(examples / "glm5-graph-capture-oom.log")
    assert (d.error_class, d.phase, d.component) == ("cuda_oom", "graph_capture", "memory")
    top = d.hypotheses[0].changes[0]
    assert top.name == "--mem-fraction-static"
    assert top.value is not None and float(top.value) < 0.95
    assert {c.name for h in d.hypotheses[:3] for c in h.changes} >= {"--cuda-graph-max-bs"}
    # a capture OOM is not an attention-kernel problem: no NSA hypothesis here
    assert not any(c.name == "--nsa-decode-backend" for h in d.hypotheses for c in h.changes)
