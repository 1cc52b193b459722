from __future__ import annotations

from fakeworld import diag

from servedoctor.experiments.candidates import Candidate, ChangeHistory, build_candidates
from servedoctor.experiments.command import parse
from servedoctor.knowledge.registry import Registry
from servedoctor.model import REMOVE, Change, Diagnosis, Evidence

EMPTY = Registry(rules=(), sources={})
CMD = [
    "python", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30000",
    "--attention-backend", "flashinfer", "--tp-size", "2", "--enable-torch-compile",
]  # fmt: skip


def test_every_non_default_flag_is_a_drop_candidate_but_never_host_port_model_or_parallelism() -> (
    None
):
    cands = build_candidates(
        diagnosis=diag("other", "load"), command=parse(CMD), base_cost_s=10, rules=EMPTY
    )
    drops = {c.change.name for c in cands if c.change.value == REMOVE}
    # --tp-size 2 is how the model is split over GPUs: never proposed for dropping
    assert drops == {"--attention-backend", "--enable-torch-compile"}
    assert all(len([c.change]) == 1 for c in cands)


def test_hypothesis_beats_generic_drops_and_noop_changes_are_skipped() -> None:
    d = diag(
        "arch_unsupported",
        "load",
        (Change("flag", "--attention-backend", "triton"), 0.8),
        (Change("flag", "--attention-backend", "flashinfer"), 0.9),  # already set: no-op
    )
    cands = build_candidates(diagnosis=d, command=parse(CMD), base_cost_s=10, rules=EMPTY)
    assert cands[0].change == Change("flag", "--attention-backend", "triton")
    assert Change("flag", "--attention-backend", "flashinfer") not in [c.change for c in cands]


def test_flag_named_in_the_evidence_ranks_above_other_drops() -> None:
    d = diag("missing_dependency", "load")
    d = type(d)(**{**{k: getattr(d, k) for k in d.__slots__ if k != "evidence"},
                   "evidence": (Evidence(3, "ImportError: FlashInfer is required"),)})  # fmt: skip
    cands = build_candidates(diagnosis=d, command=parse(CMD), base_cost_s=10, rules=EMPTY)
    assert cands[0].change == Change("flag", "--attention-backend", REMOVE)


def test_async_error_puts_the_localising_probe_first() -> None:
    d = diag("device_assert", "decode", (Change("flag", "--attention-backend", "triton"), 0.9))
    cands = build_candidates(diagnosis=d, command=parse(CMD), base_cost_s=10, rules=EMPTY)
    assert cands[0].change == Change("env", "CUDA_LAUNCH_BLOCKING", "1")
    assert cands[0].is_probe
    sync = diag("cuda_oom", "decode", (Change("flag", "--attention-backend", "triton"), 0.9))
    cands = build_candidates(diagnosis=sync, command=parse(CMD), base_cost_s=10, rules=EMPTY)
    assert not any(c.is_probe for c in cands)


def test_probe_not_offered_when_launches_are_already_synchronous() -> None:
    d = diag("illegal_memory_access", "decode")
    cmd = parse(["CUDA_LAUNCH_BLOCKING=1", *CMD])
    cands = build_candidates(diagnosis=d, command=cmd, base_cost_s=10, rules=EMPTY)
    assert not any(c.is_probe for c in cands)


def test_past_findings_reorder_and_add_candidates() -> None:
    a = Change("flag", "--attention-backend", "triton")
    b = Change("flag", "--tp-size", "1")
    d = diag("arch_unsupported", "load", (a, 0.7), (b, 0.6))
    plain = build_candidates(diagnosis=d, command=parse(CMD), base_cost_s=10, rules=EMPTY)
    assert plain[0].change == a
    history = {a: ChangeHistory(0, 4), b: ChangeHistory(4, 4)}
    learnt = build_candidates(
        diagnosis=d, command=parse(CMD), base_cost_s=10, rules=EMPTY, history=history
    )
    assert learnt[0].change == b
    assert "4 of 4" in learnt[0].why
    other = Change("env", "SGL_DISABLE_X", "1")
    extra = build_candidates(
        diagnosis=d, command=parse(CMD), base_cost_s=10, rules=EMPTY,
        history={other: ChangeHistory(2, 2)},
    )  # fmt: skip
    assert any(c.change == other and c.source == "finding" for c in extra)


def test_package_changes_are_listed_last_and_not_runnable() -> None:
    d = diag("arch_unsupported", "load", (Change("package", "torch", ">=2.7"), 0.95))
    cands = build_candidates(diagnosis=d, command=parse(CMD), base_cost_s=10, rules=EMPTY)
    assert not cands[-1].runnable and cands[-1].change.kind == "package"


def test_a_hypothesis_proposing_the_probe_is_treated_as_a_probe_not_a_fix() -> None:
    probe = Change("env", "CUDA_LAUNCH_BLOCKING", "1")
    d = diag("cublas_error", "serving", (Change("flag", "--dtype", "float16"), 0.35), (probe, 0.3))
    cands = build_candidates(diagnosis=d, command=parse(CMD), base_cost_s=10, rules=EMPTY)
    (p,) = [c for c in cands if c.change == probe]
    assert p.is_probe and p.prior == 0.0
    assert cands[0].change == Change("flag", "--dtype", "float16")


def test_a_rule_candidate_names_the_located_culprit_not_a_placeholder() -> None:
    from servedoctor.diagnose import diagnose_text

    log = ("[transformers] Loading model /m\nImportError: FlashAttention2 has been toggled on, "
           "but it cannot be used due to the following error: the package for FlashAttention2 "
           "doesn't seem to be installed.\n")  # fmt: skip
    cmd = parse(["transformers", "serve", "/m", "--attn-implementation", "flash_attention_2"])
    cands = build_candidates(diagnosis=diagnose_text(log, engine="transformers"), command=cmd,
                             base_cost_s=10)  # fmt: skip
    (sdpa,) = [c for c in cands if c.change.value == "sdpa"]
    assert "flash-attn" in sdpa.why and "{" not in sdpa.why


def test_two_spellings_of_one_knob_are_one_trial_in_the_commands_spelling() -> None:
    cmd = [*CMD, "--cuda-graph-max-bs", "256"]
    d = diag(
        "cuda_oom",
        "graph_capture",
        (Change("flag", "--cuda-graph-max-bs-decode", "32"), 0.3),
        (Change("flag", "--cuda-graph-max-bs", "32"), 0.2),
        (Change("flag", "--cuda-graph-backend-decode", "disabled"), 0.25),
        (Change("flag", "--disable-cuda-graph", None), 0.2),
    )
    cands = build_candidates(diagnosis=d, command=parse(cmd), base_cost_s=10, rules=EMPTY)
    changes = [c.change for c in cands if c.change.value != REMOVE]
    assert Change("flag", "--cuda-graph-max-bs", "32") in changes  # the command's spelling
    assert Change("flag", "--cuda-graph-max-bs-decode", "32") not in changes
    merged = next(c for c in cands if c.change.name == "--cuda-graph-max-bs")
    alone = diag("cuda_oom", "graph_capture", (Change("flag", "--cuda-graph-max-bs", "32"), 0.3))
    (expected,) = [
        c
        for c in build_candidates(diagnosis=alone, command=parse(cmd), base_cost_s=10, rules=EMPTY)
        if c.change.value != REMOVE
    ]
    assert merged.prior == expected.prior  # the more confident proposal's weight stays
    graphs_off = [
        c for c in changes if c.name in ("--cuda-graph-backend-decode", "--disable-cuda-graph")
    ]
    assert len(graphs_off) == 1  # a switch: its spellings' values differ, the trial is one


def ranked(
    d: Diagnosis, argv: list[str] = CMD, history: dict[Change, ChangeHistory] | None = None
) -> list[Candidate]:
    """The candidates for ``d`` of ``argv``, best first, with no rules but the diagnosis'."""
    return build_candidates(
        diagnosis=d, command=parse(argv), base_cost_s=10, rules=EMPTY, history=history
    )


def test_a_setting_the_command_chose_outranks_an_equal_guess_at_an_unset_one() -> None:
    lower_chunk = Change("flag", "--chunked-prefill-size", "8192")
    lower_static = Change("flag", "--mem-fraction-static", "0.8")
    d = diag("cuda_oom", "load", (lower_static, 0.65), (lower_chunk, 0.4))
    assert ranked(d)[0].change == lower_static
    chose = [*CMD, "--chunked-prefill-size", "16384"]
    first = ranked(d, chose)[0]
    assert first.change == lower_chunk and "the command sets it" in first.why
    # a record on this machine still has the last word
    history = {lower_chunk: ChangeHistory(tries=3, successes=0)}
    assert ranked(d, chose, history=history)[0].change == lower_static


def test_nccl_debug_is_a_probe_offered_only_where_a_rule_suggests_it_and_after_a_fix() -> None:
    p2p = Change("env", "NCCL_P2P_DISABLE", "1")
    debug = Change("env", "NCCL_DEBUG", "INFO")
    d = diag("nccl_error", "startup", (debug, 0.3), (p2p, 0.4))
    cands = ranked(d)
    assert cands[0].change == p2p
    probes = [c for c in cands if c.is_probe]
    assert [c.change for c in probes] == [debug] and probes[0].prior == 0.0
    # an asynchronous CUDA error gets the launch-blocking probe, not NCCL's
    asyn = diag("illegal_memory_access", "decode")
    assert [c.change.name for c in ranked(asyn) if c.is_probe] == ["CUDA_LAUNCH_BLOCKING"]


def test_the_engine_s_previous_release_is_a_last_candidate_where_fix_may_install() -> None:
    def releases(packages: bool) -> list[Candidate]:
        found = build_candidates(
            diagnosis=diag("nccl_error", "startup"), command=parse(CMD), base_cost_s=10,
            rules=EMPTY, engine_version="0.5.3", packages=packages,
        )  # fmt: skip
        return [c for c in found if c.source == "release"]

    (release,) = releases(packages=True)
    assert release.change == Change("package", "sglang", "the release before 0.5.3")
    assert not releases(packages=False)  # no installs: nothing to try
