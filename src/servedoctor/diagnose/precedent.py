"""Precedents: what labelled public failures that read like this log were, and what fixed them.

Rules recognise the signatures someone wrote down; a new failure family reads as nothing.
Precedents are the fallback that learns from every labelled case instead: each case of the
corpora (a real log, its class, phase and component, and the change its thread confirmed)
is kept as the set of words its log holds (``knowledge/data/precedents.json``, built by
``scripts/precedents/build_precedents.py``). For a log the rules leave undecided:

* a naive Bayes vote over those words guesses the class (only when a line reads as an
  error), the phase (when only the class's default said one) and the component (when
  nothing named one);
* the most similar cases (TF-IDF cosine) offer their confirmed fix, spelled for this
  log's engine and version through the knobs, where the rules leave slots free.

A log is never its own precedent: a case whose log is this very log is left out, with
every case from the same thread. ``SERVEDOCTOR_PRECEDENTS_EXCLUDE`` (comma-separated
corpus names) leaves whole corpora out, so that scoring a labelled corpus never reads its
own answers (``bench/knowledge_eval.py`` sets it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from servedoctor.engines.adapter import knobs_of, spell, spellings
from servedoctor.engines.inventory import env_names, inventory
from servedoctor.knowledge.facts import is_server_package, is_system_package
from servedoctor.knowledge.knobs import knob
from servedoctor.knowledge.propose import Setting, already_in_effect, is_native
from servedoctor.logs.lines import Line
from servedoctor.model import REMOVE, Change, Hypothesis

DATA = Path(__file__).parent.parent / "knowledge" / "data" / "precedents.json"
EXCLUDE_ENV = "SERVEDOCTOR_PRECEDENTS_EXCLUDE"

#: Words: identifiers of three characters or more (numbers, hex and timestamps say nothing).
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
#: A log reads at most this many distinct words (a long server log repeats itself).
MAX_WORDS = 20_000
#: Laplace smoothing of the naive Bayes vote (chosen by leave-one-corpus-out scoring).
SMOOTHING = 0.1
#: How much likelier (natural log) a voted label must be than a default it replaces: a
#: class's default phase is right more often than the vote on the logs the rules know, the
#: vote more often on new ones (docs/precedents.md has both figures).
MARGIN = 8.0
#: How many similar cases may offer their fix, and how similar they must be at least.
NEIGHBOURS = 8
MIN_SIMILARITY = 0.05

#: A line that reports a failure in words, when no rule and no traceback did.
_ERRORISH = re.compile(
    r"(?i)\b(?:error|exception|fatal|failed|failure|abort(?:ed|ing)?|panic(?:ked)?|"
    r"assert(?:ion)?|segmentation fault|core dumped|killed|unable to|cannot|could not|"
    r"not supported|unsupported|does not match|mismatch(?:ed)?|incompatible|xid|"
    r"unexpected(?:ly)?|insufficient|not enough|out of memory|than (?:is )?available)\b"
    # an exception's own name (FileNotFoundError), a C macro's assert (GGML_ASSERT(…)), a
    # check that states what it wanted and what it got
    r"|(?-i:\b[A-Z]\w*(?:Error|Exception)\b)|(?-i:\b[A-Z][A-Z0-9]*_ASSERT\b)"
    r"|\brequires?\b[^\n]{0,120}\bgot\b"
    # a feature refused because the server was started without a flag ("requires --jinja")
    r"|\brequires?\s+(?:the\s+)?[`'\"]?--[a-z][\w-]*"
)
_QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARN", "WARNING", "NOTICE", "TRACE", "D", "I", "W"})

#: A PyPI distribution's name (not an image, a runtime's display name or a list).
_DISTRIBUTION = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
#: A version or a version range (a pin, ">=4.58", "0.14.1"), not words.
_VERSION = re.compile(r"^(?:[<>=!~]=?\s*)?v?\d[\w.+*-]*(?:\s*,\s*[<>=!~]=?\s*v?\d[\w.+*-]*)*$")
#: Environment variables that belong to one engine (another engine does not read them).
_ENGINE_ENV = re.compile(r"^(?:VLLM|SGLANG|SGL|OLLAMA|LLAMA|GGML|TGI|LMDEPLOY|TRTLLM)_")


def words_of(text: str) -> Iterator[str]:
    for word in _WORD.findall(text):
        yield word.lower()


@dataclass(slots=True)
class Reading:
    """What the precedents need from a log, gathered while it streams by."""

    words: set[str] = field(default_factory=set)
    digest: Any = field(default_factory=hashlib.sha256)
    error_line: tuple[int, str] | None = None  # the last line that reads as an error

    def add(self, line: Line) -> None:
        self.digest.update(line.full.strip().encode("utf-8", "replace") + b"\n")
        if len(self.words) < MAX_WORDS:
            self.words.update(words_of(line.full))
        if (line.level or "").upper() not in _QUIET_LEVELS and _ERRORISH.search(line.text):
            self.error_line = (line.number, line.text)

    def watch(self, lines: Iterable[Line]) -> Iterator[Line]:
        for line in lines:
            self.add(line)
            yield line

    @property
    def fingerprint(self) -> str:
        return str(self.digest.hexdigest())


@dataclass(frozen=True, slots=True)
class Case:
    corpus: str
    id: str
    source: str
    engine: str | None
    labels: dict[str, str]  # error_class, phase, component (those the case states)
    fix: dict[str, Any] | None
    digest: str
    words: frozenset[str]


class Precedents:
    """The labelled cases, with a naive Bayes vote per field and a similarity search."""

    def __init__(self, cases: list[Case]) -> None:
        self.cases = cases
        self._df: Counter[str] = Counter(w for c in cases for w in c.words)
        self._vocab = frozenset(self._df)
        self._counts: dict[str, dict[str, Counter[str]]] = {}
        self._priors: dict[str, Counter[str]] = {}
        for name in ("error_class", "phase", "component"):
            priors: Counter[str] = Counter()
            counts: dict[str, Counter[str]] = {}
            for case in cases:
                label = case.labels.get(name)
                if label in (None, "unknown"):
                    continue
                priors[label] += 1
                counts.setdefault(label, Counter()).update(case.words)
            self._priors[name], self._counts[name] = priors, counts
        self._idf = {w: math.log(len(cases) / (1 + n)) for w, n in self._df.items()}
        self._vectors = [self._vector(c.words) for c in cases]

    def without(self, fingerprint: str) -> Precedents:
        """These cases less the one whose log this is, and its thread's other cases."""
        own = {c.source for c in self.cases if c.digest == fingerprint}
        if not own:
            return self
        return Precedents([c for c in self.cases if c.source not in own])

    def scores(self, name: str, words: Iterable[str]) -> dict[str, float]:
        """Each label of ``name`` with its log-likelihood given the words (multinomial
        naive Bayes over the cases' word sets); empty when no word is known."""
        priors, counts = self._priors[name], self._counts[name]
        total = sum(priors.values())
        known = [w for w in set(words) if w in self._vocab]
        if not total or not known:
            return {}
        size = len(self._vocab)
        out = {}
        for label, n in sorted(priors.items()):
            seen = counts[label]
            norm = math.log(sum(seen.values()) + SMOOTHING * size)
            out[label] = math.log(n / total) + sum(
                math.log(seen[w] + SMOOTHING) - norm for w in known
            )
        return out

    def guess(self, name: str, words: Iterable[str]) -> str | None:
        """The label of ``name`` the cases' words vote for."""
        scores = self.scores(name, words)
        return max(scores, key=lambda label: scores[label]) if scores else None

    def outvotes(self, name: str, words: Iterable[str], current: str) -> str | None:
        """A label the words prefer to ``current`` by more than :data:`MARGIN`, if any."""
        scores = self.scores(name, words)
        if not scores:
            return None
        best = max(scores, key=lambda label: scores[label])
        mine = scores.get(current)
        return best if mine is None or scores[best] - mine > MARGIN else None

    def _vector(self, words: Iterable[str]) -> dict[str, float]:
        weights = {w: self._idf.get(w, 0.0) for w in words}
        norm = math.sqrt(sum(x * x for x in weights.values())) or 1.0
        return {w: x / norm for w, x in weights.items() if x > 0}

    def nearest(self, words: Iterable[str]) -> list[tuple[float, Case]]:
        """Cases with a confirmed fix, most similar first."""
        mine = self._vector(w for w in set(words) if w in self._vocab)
        scored = []
        for case, vector in zip(self.cases, self._vectors, strict=True):
            if not case.fix:
                continue
            sim = sum(x * vector.get(w, 0.0) for w, x in mine.items())
            if sim >= MIN_SIMILARITY:
                scored.append((sim, case))
        scored.sort(key=lambda t: (-t[0], t[1].corpus, t[1].id))
        return scored[:NEIGHBOURS]


def _load_cases() -> list[Case]:
    if not DATA.is_file():
        return []
    data = json.loads(DATA.read_text(encoding="utf-8"))
    return [
        Case(
            corpus=str(c["corpus"]),
            id=str(c["id"]),
            source=str(c.get("source") or c["id"]),
            engine=c.get("engine"),
            labels={k: str(v) for k, v in (c.get("labels") or {}).items() if v},
            fix=c.get("fix"),
            digest=str(c.get("digest") or ""),
            words=frozenset(c.get("words") or ()),
        )
        for c in data.get("cases", [])
    ]


@cache
def _precedents(excluded: frozenset[str]) -> Precedents:
    return Precedents([c for c in _load_cases() if c.corpus not in excluded])


#: Corpora left out while one is being scored (``leaving_out``).
_LEFT_OUT: ContextVar[frozenset[str]] = ContextVar("precedents_left_out", default=frozenset())


@contextmanager
def leaving_out(*corpora: str) -> Iterator[None]:
    """Diagnose without these corpora's cases: scoring a corpus never reads its answers."""
    token = _LEFT_OUT.set(_LEFT_OUT.get() | frozenset(corpora))
    try:
        yield
    finally:
        _LEFT_OUT.reset(token)


def precedents_for(reading: Reading | None) -> Precedents | None:
    """The precedents this log may use (never itself), or ``None`` without a reading."""
    if reading is None:
        return None
    named = os.environ.get(EXCLUDE_ENV, "").split(",")
    excluded = frozenset(n.strip() for n in named if n.strip()) | _LEFT_OUT.get()
    found = _precedents(excluded)
    return found.without(reading.fingerprint) if found.cases else None


def translate(
    fix: dict[str, Any],
    source_engine: str | None,
    engine: str | None,
    version: str | None,
    words: frozenset[str] | set[str] = frozenset(),
) -> Change | None:
    """A precedent's confirmed fix as a change this engine and version accept, or ``None``.
    A package is offered only when this log names it (``words``): another thread's pin of a
    library this failure never touched is noise."""
    kind, name, value = fix.get("kind"), str(fix.get("name") or ""), fix.get("value")
    value = None if value in (None, "") else str(value)
    if not name or kind not in ("flag", "env", "package"):
        return None
    if kind == "package":
        # a library of the server's stack; the servers' own releases are the rules' to offer,
        # and a Python package does not change a compiled server
        if not _DISTRIBUTION.match(name) or is_server_package(name):
            return None
        if not _named(name, words) or (value is not None and not _VERSION.match(value)):
            return None
        if is_system_package(name):  # ROCm, a driver: only for the same server's stack
            return (
                Change(kind="package", name=name, value=value) if engine == source_engine else None
            )
        if is_native(engine):
            return None
        # the version that worked under another server's pins says little about this one's
        pin = value if engine == source_engine else "another release"
        return Change(kind="package", name=name, value=pin)
    if kind == "env" and value is None:
        return None  # a variable is set to something
    if kind == "env" and not _variable_fits(name, source_engine, engine, words):
        return None
    if engine is not None and engine == source_engine:
        if kind == "flag":
            inv = inventory(engine)
            if inv is not None and inv.unknown_version == "any":
                if inv.accepts_spelling(name, version) is None:  # builds no log dates
                    return None
            elif inv is not None:
                # an unknown release may be any: the flag must be in every release read
                releases = [inv.resolve(version)] if version else list(inv.versions)
                if any(inv.flag(name, v) is None for v in releases):
                    return None
            if value is not None and value.lower() in ("removed", "remove", "<remove>"):
                value = REMOVE
        return Change(kind=kind, name=name, value=value)
    if engine is None and kind == "env" and _subject_named(name, words):
        # the log does not say which server wrote it: a variable the precedent's server reads
        # for what this log names (VLLM_USE_DEEP_GEMM for a DeepGEMM failure) is offered as
        # that server spells it; another server ignores it, refusing nothing
        return Change(kind="env", name=name, value=value)
    for knob_id in sorted(knobs_of(name, source_engine)):
        change = _spell_like(knob_id, name, value, source_engine, engine, version)
        if change is not None:
            return change
    if (
        kind == "env"
        and not _ENGINE_ENV.match(name)
        and is_native(engine) == is_native(source_engine)
    ):
        # a compiled server reads none of a Python stack's variables (NCCL's, torch's)
        return Change(kind="env", name=name, value=value)
    return None


def _variable_fits(
    name: str, source: str | None, engine: str | None, words: frozenset[str] | set[str]
) -> bool:
    """A precedent's variable is offered where it spells a knob, the engine reads it, or
    this log names it or the library it belongs to (NCCL_… for a log that speaks of nccl):
    another thread's patch or wrapper variable (GENESIS_…), or its loader path
    (LD_PRELOAD=/its/site-packages/…), means nothing to this server."""
    if knobs_of(name, source):
        return True
    lowered = name.lower()
    if lowered in words or lowered.split("_")[0] in words:
        return True
    known = env_names(engine) if engine else None
    return known is not None and name in known


#: Words of a variable's name that say what it does to its subject, not what the subject is.
_SWITCH_WORDS = frozenset(
    {"use", "enable", "disable", "allow", "skip", "force", "test", "jit", "backend", "set"}
)


def _subject_named(variable: str, words: frozenset[str] | set[str]) -> bool:
    """Does the log name what an engine's variable switches (DEEP_GEMM as deepgemm, AITER)?"""
    parts = variable.lower().split("_")
    if _ENGINE_ENV.match(variable):
        parts = parts[1:]
    subject = [p for p in parts if p not in _SWITCH_WORDS and not p.isdigit()]
    if not subject:
        return False
    # every word of it: "model" and "runner" alone are in any log, V2_MODEL_RUNNER is not
    return "".join(subject) in words or all(p in words for p in subject)


def _named(package: str, words: frozenset[str] | set[str]) -> bool:
    """Does the log name this distribution (flashinfer-python as flashinfer)?"""
    plain = package.lower().replace("-", "_").replace(".", "_")
    return plain in words or plain.split("_")[0] in words


def _spell_like(
    knob_id: str,
    name: str,
    value: str | None,
    source_engine: str | None,
    engine: str | None,
    version: str | None,
) -> Change | None:
    """The knob that ``name=value`` sets for the source engine, spelled for ``engine``."""
    if engine is None:
        return None
    neutral = None if knob(knob_id).value == "none" else value
    source = next((s for s in spellings(knob_id, source_engine) if s.target == name), None)
    if source is not None and source.values and value is not None:
        neutral = next((k for k, v in source.values.items() if v == value), neutral)
    return spell(knob_id, neutral, engine=engine, version=version)


def precedent_hypotheses(
    found: Precedents, words: set[str] | frozenset[str], setting: Setting
) -> list[Hypothesis]:
    """The fixes confirmed for the most similar cases, one hypothesis each."""
    out: list[Hypothesis] = []
    seen: set[tuple[str, str]] = set()
    for sim, case in found.nearest(words):
        assert case.fix is not None
        change = translate(case.fix, case.engine, setting.engine, setting.version, words)
        if change is None or (change.kind, change.name) in seen or _moot(change, setting):
            continue
        seen.add((change.kind, change.name))
        out.append(
            Hypothesis(
                id=f"PRECEDENT.{case.id}",
                cause=(
                    f"A public failure whose log reads like this one ({case.id}, "
                    f"{case.labels.get('error_class', 'unclassified')}) was fixed by "
                    f"{change.describe()}."
                ),
                confidence=round(min(0.3, 0.08 + 0.25 * sim), 3),
                changes=(change,),
                why=f"similar log (cosine {sim:.2f}) with a confirmed fix",
                references=(case.source,),
            )
        )
    return out


def _moot(change: Change, setting: Setting) -> bool:
    """Already in effect, or taking away what the known command does not have."""
    if change.value == REMOVE:
        return setting.flags_known and setting.value_of(change.name) in (None, "false", "False")
    return already_in_effect(change, setting)


def case_record(corpus: str, labels: dict[str, Any], reading: Reading) -> dict[str, Any]:
    """One case as the data file keeps it (the builder's half of the contract)."""
    fix = labels.get("fix")
    return {
        "corpus": corpus,
        "id": labels["id"],
        "source": labels.get("source"),
        "engine": labels.get("engine"),
        "labels": {
            k: labels.get(k) for k in ("error_class", "phase", "component") if labels.get(k)
        },
        "fix": fix
        if isinstance(fix, dict) and fix.get("kind") in ("flag", "env", "package")
        else None,
        "digest": reading.fingerprint,
        "words": sorted(reading.words),
    }
