"""The server's selection lines name the job a failing library was doing."""

from __future__ import annotations

from servedoctor.diagnose import diagnose_text
from servedoctor.model import Change

HEAD = "INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
ATTENTION = "INFO 05-01 10:00:01 [cuda.py:1] Using {name} attention backend.\n"
SAMPLER = (
    "INFO 05-01 10:00:02 [topk_topp_sampler.py:1] Using FlashInfer for top-p & top-k sampling.\n"
)
REFUSAL = "RuntimeError: FlashInfer requires GPUs with sm75 or higher\n"


def _first_changes(text: str, n: int = 1) -> list[Change]:
    return [c for h in diagnose_text(text).hypotheses[:n] for c in h.changes]


def test_a_library_chosen_for_one_job_names_the_component_and_its_knob() -> None:
    d = diagnose_text(HEAD + ATTENTION.format(name="FLASH_ATTN") + SAMPLER + REFUSAL)
    assert d.component == "sampling"
    assert d.hypotheses[0].changes[0] == Change("env", "VLLM_USE_FLASHINFER_SAMPLER", "0")
    assert "line 3" in d.hypotheses[0].cause


def test_a_library_chosen_for_several_jobs_names_none() -> None:
    d = diagnose_text(HEAD + ATTENTION.format(name="FLASHINFER") + SAMPLER + REFUSAL)
    assert not any(h.id == "SELECTION.1" for h in d.hypotheses)
    assert d.component != "sampling"


def test_a_library_the_log_did_not_choose_names_nothing() -> None:
    d = diagnose_text(HEAD + ATTENTION.format(name="FLASH_ATTN") + REFUSAL)
    assert not any(h.id == "SELECTION.1" for h in d.hypotheses)


def test_the_portable_choice_itself_is_not_moved_onto() -> None:
    log = (
        HEAD
        + ATTENTION.format(name="TRITON_ATTN")
        + (
            "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: "
            "98304, Hardware limit: 65536. Reducing block sizes or `num_stages` may help.\n"
        )
    )
    d = diagnose_text(log)
    assert d.component == "attention"
    assert not any(h.id == "SELECTION.1" for h in d.hypotheses)
