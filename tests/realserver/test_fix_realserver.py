"""`servedoctor fix` against a real `transformers serve` (tiny random Llama, CPU, offline).

The commands carry several flags of which one (or two) really break the server on this
machine; fix must find exactly those, one change per trial, and keep every trial in the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from realserve import free_port, serve_cmd
from servedoctor.findings.store import FindingsStore
from servedoctor.model import REMOVE

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(240)]

SERVEDOCTOR = [sys.executable, "-m", "servedoctor"]


def _fix(tmp_path: Path, env: dict[str, str], argv: list[str]) -> tuple[dict[str, Any], Path]:
    store = tmp_path / "findings.db"
    proc = subprocess.run(
        [*SERVEDOCTOR, "fix", "--json", "--store", str(store), "--runs-dir",
         str(tmp_path / "runs"), "--max-tokens", "4", "--request-timeout", "60",
         "--startup-timeout", "90", "--", *argv],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=220,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout), store


#: What undoes flash_attention_2 on a machine without flash_attn: dropping the flag, or the
#: portable implementation the diagnosis proposes (CTX007).
UNDO_ATTN = {REMOVE, "sdpa", "eager"}


def _undone(result: dict[str, Any]) -> set[str]:
    """The flags the fix dropped or moved to a portable value (never anything else)."""
    for c in result["changes"]:
        assert c["kind"] == "flag"
        assert c["value"] == REMOVE or (
            c["name"] == "--attn-implementation" and c["value"] in UNDO_ATTN
        )
    return {c["name"] for c in result["changes"]}


def _stored_matches(store: Path, result: dict[str, Any]) -> None:
    run = FindingsStore.open(store).run(result["session"])
    assert run is not None
    assert run.status == result["outcome"]
    assert [(t.role, t.outcome) for t in run.trials] == [
        (t["role"], t["outcome"]) for t in result["trials"]
    ]
    assert [c.to_dict() for c in run.fix] == result["changes"]


def test_fix_finds_the_one_breaking_flag_among_harmless_ones(
    tmp_path: Path, models: dict[str, Path], offline_env: dict[str, str], no_leftovers: None
) -> None:
    argv = serve_cmd(
        models["healthy"], free_port(), "--dtype", "bfloat16",
        "--attn-implementation", "flash_attention_2", "--continuous-batching",
    )  # fmt: skip
    result, store = _fix(tmp_path, offline_env, argv)
    assert result["outcome"] == "fixed"
    assert _undone(result) == {"--attn-implementation"}
    assert result["trials_to_healthy"] <= 2
    # the command that works, as argv to run again: flash_attention_2 is gone, the rest kept
    working = result["command"]["argv"]
    assert "flash_attention_2" not in working and str(models["healthy"]) in working
    candidates = [t for t in result["trials"] if t["role"] == "candidate"]
    assert all(len(t["changes"]) == 1 for t in candidates)
    assert result["trials"][0]["outcome"] == "failed"
    assert [t["role"] for t in result["trials"]][-1] == "confirm"
    _stored_matches(store, result)

    listing = subprocess.run([*SERVEDOCTOR, "findings", "--json", "--store", str(store)],
                             capture_output=True, text=True, check=True)  # fmt: skip
    (row,) = [json.loads(line) for line in listing.stdout.splitlines()]
    assert row["changes"] == result["changes"] and row["engine"] == "transformers"
    export = subprocess.run([*SERVEDOCTOR, "findings", "export", "--store", str(store)],
                            capture_output=True, text=True, check=True)  # fmt: skip
    assert (
        "drop --attn-implementation" in export.stdout
        or "--attn-implementation sdpa" in export.stdout
    )
    assert "FlashAttention2" in export.stdout or "flash" in export.stdout.lower()


def test_fix_minimises_two_breaking_flags_to_exactly_those_two(
    tmp_path: Path, models: dict[str, Path], offline_env: dict[str, str], no_leftovers: None
) -> None:
    # flash_attention_2 (no flash_attn package) and --device cuda (a CPU-only torch) each
    # break the server; --dtype float32 is harmless.
    argv = serve_cmd(models["healthy"], free_port(), "--dtype", "float32",
                     "--attn-implementation", "flash_attention_2", "--device", "cuda")  # fmt: skip
    result, store = _fix(tmp_path, offline_env, argv)
    assert result["outcome"] == "fixed"
    assert _undone(result) == {"--attn-implementation", "--device"}
    # 1-minimal: each of the two alone was tried and is not enough
    alone = {
        next(iter(_undone({"changes": t["changes"]})))
        for t in result["trials"]
        if len(t["changes"]) == 1 and t["outcome"] != "healthy"
    }
    assert alone == {"--attn-implementation", "--device"}
    # every launch after the baseline differs from one that ran by one change, or minimises
    for t in result["trials"]:
        if t["role"] == "candidate":
            assert t["tested"] in t["changes"]
    _stored_matches(store, result)
