"""Process names from line prefixes are evidence: which engine, which of its processes."""

from __future__ import annotations

from servedoctor.diagnose import diagnose_text

V1 = (
    "(VllmWorker rank=0 pid=12144) ERROR 04-30 16:21:27 [multiproc_executor.py:380] "
    "WorkerProc hit an exception.\n"
    "(VllmWorker rank=0 pid=12144) ERROR 04-30 16:21:27 [multiproc_executor.py:380] "
    "RuntimeError: something failed while capturing\n"
)


def test_the_worker_prefix_names_the_engine() -> None:
    assert diagnose_text(V1).engine == "vllm"


def test_v1_workers_offer_the_v0_engine_where_the_release_has_it() -> None:
    d = diagnose_text(V1, engine_version="0.8.4")
    assert ("VLLM_USE_V1", "0") in [(c.name, c.value) for h in d.hypotheses for c in h.changes]


def test_v0_worker_processes_do_not() -> None:
    v0 = V1.replace("VllmWorker rank=0", "VllmWorkerProcess")
    d = diagnose_text(v0)
    assert "VLLM_USE_V1" not in [c.name for h in d.hypotheses for c in h.changes]
