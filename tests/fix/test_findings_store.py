from __future__ import annotations

from pathlib import Path

import pytest
from fakeworld import FakeWorld, Fault, diag, flag_is
from sqlalchemy import select
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateTable

from servedoctor.experiments.command import parse
from servedoctor.experiments.planner import Planner
from servedoctor.experiments.runner import TrialRunner
from servedoctor.findings.export import render_markdown
from servedoctor.findings.schema import Base
from servedoctor.findings.store import FindingsStore, store_url
from servedoctor.model import REMOVE, Change

CMD = ["python", "-m", "sglang.launch_server", "--model-path", "/m",
       "--api-key", "sk-abcdefghijklmnopqrstu",
       "--attention-backend", "flashinfer", "--enable-torch-compile"]  # fmt: skip
FP = {"gpu": "NVIDIA H200", "arch": "sm_90", "engine": "sglang"}
TRITON = Change("flag", "--attention-backend", "triton")


def fix_once(store: FindingsStore, world: FakeWorld, **kw: object) -> int:
    cmd = parse(CMD)
    run_id = store.start_run(engine="sglang", argv=CMD, env={"HF_TOKEN": "hf_" + "x" * 30},
                             options={}, fingerprint=FP)  # fmt: skip
    history = store.history(FP, "arch_unsupported", exclude_run=run_id)
    runner = TrialRunner(cmd, world, on_trial=lambda t: store.add_trial(run_id, t))
    result = Planner(cmd, runner, history=history, **kw).run()  # type: ignore[arg-type]
    store.finish_run(run_id, status=result.outcome, reason=result.reason,
                     fix=result.changes, trials=result.trials)  # fmt: skip
    return run_id


def _everything_stored(store: FindingsStore) -> str:
    """Every row of every table, as text (what a dump of the database would show)."""
    with store.engine.connect() as conn:
        rows = [row for table in Base.metadata.sorted_tables for row in conn.execute(select(table))]
    return "\n".join(str(tuple(row)) for row in rows)


def test_store_keeps_every_trial_redacted_and_exports_markdown(store_url_for_test: str) -> None:
    store = FindingsStore.open(store_url_for_test)
    world = FakeWorld([Fault(flag_is("--attention-backend", "flashinfer"),
                             diag("arch_unsupported", "load", (TRITON, 0.8)))])  # fmt: skip
    run_id = fix_once(store, world)
    run = store.run(run_id)
    assert run is not None and run.status == "fixed"
    assert [t.role for t in run.trials] == ["baseline", "candidate", "confirm"]
    assert run.fix == [TRITON]
    assert run.error_class == "arch_unsupported"
    dump = _everything_stored(store)
    assert "--attention-backend" in dump  # the dump does hold the command
    assert "sk-abcdefghijklmnopqrstu" not in dump and "hf_xxxxxxxx" not in dump
    if store_url_for_test.endswith(".db"):
        raw = Path(store_url_for_test).read_bytes()
        assert b"sk-abcdefghijklmnopqrstu" not in raw and b"hf_xxxxxxxx" not in raw
    md = render_markdown(store.runs(), store="f.db")
    assert "--attention-backend triton" in md and "arch_unsupported" in md and "sm_90" in md
    assert md.count("| candidate |") == 1


def test_priors_learn_from_past_findings_on_the_same_fingerprint(store_url_for_test: str) -> None:
    store = FindingsStore.open(store_url_for_test)
    drop = Change("flag", "--enable-torch-compile", REMOVE)
    # the rule's favourite (triton) does not help here; dropping torch compile does.
    world = FakeWorld([Fault(flag_is("--enable-torch-compile"),
                             diag("arch_unsupported", "load", (TRITON, 0.8)))])  # fmt: skip
    first = store.run(fix_once(store, world))
    assert first is not None and first.fix == [drop]
    first_candidates = [t for t in first.trials if t.role == "candidate"]
    history = store.history(FP, "arch_unsupported")
    assert history[drop].successes == 1 and history[TRITON].successes == 0
    second = store.run(fix_once(store, world))
    assert second is not None
    second_candidates = [t for t in second.trials if t.role == "candidate"]
    assert second_candidates[0].tested == drop
    assert len(second_candidates) < len(first_candidates)
    assert store.history({**FP, "gpu": "other"}, "arch_unsupported") == {}


def test_store_url_accepts_paths_and_urls(tmp_path: Path) -> None:
    assert store_url(tmp_path / "a.db").startswith("sqlite:///")
    assert store_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"


def test_schema_compiles_for_postgresql() -> None:
    ddl = [
        str(CreateTable(t).compile(dialect=postgresql.dialect()))
        for t in Base.metadata.sorted_tables
    ]
    assert any("CREATE TABLE runs" in d for d in ddl)
    assert all("AUTOINCREMENT" not in d for d in ddl)


def test_unreadable_store_is_a_user_error(tmp_path: Path) -> None:
    from servedoctor.errors import UserError

    with pytest.raises(UserError):
        FindingsStore.open("nosuchdialect://x")
