"""Every rule fires on its own positive examples and stays quiet on its look-alikes."""

from __future__ import annotations

import re

import pytest

from servedoctor.diagnose import diagnose_text
from servedoctor.errors import UserError
from servedoctor.knowledge.registry import RuleFileError, default_registry, load_rules
from servedoctor.knowledge.schema import Rule

RULES = list(default_registry())


def _cases(kind: str) -> list[tuple[str, str]]:
    out = []
    for rule in RULES:
        examples = rule.examples.fires if kind == "fires" else rule.examples.ok
        out += [(rule.id, snippet) for snippet in examples]
    return out


@pytest.mark.parametrize(("rule_id", "snippet"), _cases("fires"))
def test_rule_fires_on_its_example(rule_id: str, snippet: str) -> None:
    assert rule_id in diagnose_text(snippet).rules


@pytest.mark.parametrize(("rule_id", "snippet"), _cases("ok"))
def test_rule_is_quiet_on_its_look_alike(rule_id: str, snippet: str) -> None:
    assert rule_id not in diagnose_text(snippet).rules


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_metadata_is_complete(rule: Rule) -> None:
    if rule.area == "diagnose":  # preflight rules are tested on facts in tests/env
        assert rule.examples.fires, "a rule needs a positive example"
        assert rule.examples.ok, "a rule needs a look-alike it must not fire on"
    assert rule.references, "a rule cites public threads or docs"
    assert rule.what and rule.why and rule.fix
    generated = re.fullmatch(r"(SGLANG|VLLM)-[0-9A-F]{8}", rule.id)
    assert generated or re.fullmatch(r"[A-Z]{2,6}\d{3}", rule.id)
    if generated:
        assert rule.status == "preview" and not rule.labels.error_class, "mined rules only advise"


def test_rule_ids_are_unique_and_loading_rejects_duplicates(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    body = "id: DUP001\nname: a\nmatch: ['x']\nwhat: w\nwhy: y\nfix: f\n"
    (tmp_path / "a.yaml").write_text(body)
    (tmp_path / "b.yaml").write_text(body)
    with pytest.raises(ValueError, match="defined twice"):
        load_rules(tmp_path)


def test_bad_rule_is_rejected_with_its_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "bad.yaml").write_text(
        "id: bad\nname: Not Kebab\nmatch: ['(']\nwhat: w\nwhy: y\nfix: f\n"
    )
    with pytest.raises(ValueError, match=r"bad\.yaml"):
        load_rules(tmp_path)


def test_unparsable_rule_file_is_one_user_error_naming_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "broken.yaml").write_text("id: X001\nmatch: ['a'\nwhat: [unclosed\n")
    with pytest.raises(RuleFileError, match=r"broken\.yaml: not readable YAML") as info:
        load_rules(tmp_path)
    assert isinstance(info.value, UserError) and "\n" not in str(info.value)


def test_located_conditions_need_a_diagnosis(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "ctx.yaml").write_text(
        "id: CTX901\nname: located\nwhen: {culprit: [flashinfer]}\nwhat: w\nwhy: y\nfix: f\n"
    )
    with pytest.raises(RuleFileError, match=r"need when\.error_class"):
        load_rules(tmp_path)


def test_an_error_the_server_says_it_ignores_is_not_the_failure() -> None:
    ignored = (
        "[2026-03-27 20:05:36 TP0] Ignore import error when loading sglang.srt.models.glmasr: "
        "cannot import name 'GlmAsrConfig' from 'transformers' (/usr/lib/transformers/__init__.py)\n"
    )
    failure = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
    assert diagnose_text(ignored + failure).error_class == "kv_cache_capacity"
    # the same import error, not ignored, is the failure
    assert (
        diagnose_text(
            ignored.replace("Ignore import error when loading", "Error loading") + failure
        ).error_class
        == "missing_dependency"
    )
