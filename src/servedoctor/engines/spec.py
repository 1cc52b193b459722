"""What we know about one inference server, as data: ``engines/data/<name>.yaml``.

Phase patterns are shared by the diagnosis engine (phase of a failure) and the supervisor
(live phase timeline); readiness, endpoints and default address serve the supervisor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cached_property, lru_cache
from pathlib import Path

from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, Field

from servedoctor.datafile import load_yaml
from servedoctor.knowledge.facts import is_server_package
from servedoctor.taxonomy import Phase

DATA_DIR = Path(__file__).parent / "data"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PhaseMarker(_Strict):
    """A log line that shows the server has entered ``phase``."""

    phase: Phase
    pattern: str
    label: str = Field(description="short name shown in timelines, e.g. 'load weight begin'")
    frequent: bool = Field(
        default=False, description="printed per batch: the scanner keeps only the last one"
    )

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)


class Build(_Strict):
    """A build of the engine shipped under another name (a fork): where a log line matches
    ``pattern``, the package the user upgrades or reinstalls is ``distribution``."""

    distribution: str
    pattern: str

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)


class Progress(_Strict):
    """A progress bar or counter the log prints: groups 'done' and 'total' (or 'percent')."""

    name: str
    pattern: str

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)


class MemoryFigure(_Strict):
    """A memory figure the log reports, e.g. 'avail mem=70.1 GB': group 'value', in ``unit``."""

    name: str
    pattern: str
    unit: str = Field(default="GB", pattern=r"^(GB|GiB|MB|MiB)$")

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)


class EngineSpec(_Strict):
    name: str
    display: str
    distribution: str | None = Field(
        default=None, description="the package the engine ships as (PyPI name), if any"
    )
    native: bool = Field(
        default=False,
        description="one compiled binary: Python package changes do not apply to it",
    )
    builds: list[Build] = Field(
        default_factory=list,
        description="forks shipped under another name, told apart by their log lines",
    )
    sources: list[str] = Field(
        default_factory=list,
        description="folder names of its source tree when another project vendors it "
        "(``<project>/thirdparty/llama.cpp/…``): that project's package is the one to change",
    )
    embeds: list[str] = Field(
        default_factory=list,
        description="engines it runs inside (Ollama runs llama.cpp): their lines in its log "
        "say nothing against it",
    )
    command: list[str] = Field(description="regexes over the joined argv that identify it")
    log: list[str] = Field(default_factory=list, description="regexes over lines that identify it")
    phases: list[PhaseMarker] = Field(default_factory=list)
    ready: list[str] = Field(default_factory=list, description="log lines meaning 'ready'")
    fatal: list[str] = Field(default_factory=list, description="log lines meaning 'dead'")
    progress: list[Progress] = Field(default_factory=list)
    memory: list[MemoryFigure] = Field(
        default_factory=list, description="memory figures the log reports (live display)"
    )
    config_dump: list[str] = Field(
        default_factory=list, description="regexes whose group 1 is the effective config"
    )
    version: list[str] = Field(
        default_factory=list, description="regexes whose group 'version' is the engine's version"
    )
    health_path: str | None = "/health"
    models_path: str = "/v1/models"
    chat_path: str = "/v1/chat/completions"
    default_host: str = "127.0.0.1"
    default_port: int = 8000
    first_forward: Phase | None = Field(
        default=None,
        description="phase of the engine's first forward pass during start-up (vLLM: the "
        "memory profiling run; SGLang: CUDA graph capture)",
    )
    warmup_before_ready: bool = Field(
        default=False, description="serves its own warm-up request before saying 'ready'"
    )
    undated: dict[str, Phase] = Field(
        default_factory=dict,
        description="error class → the phase its failures happen in when nothing in the log "
        "dates them (a binary that starts a runner per model fails while loading it)",
    )
    host_flags: list[str] = Field(default_factory=lambda: ["--host"])
    port_flags: list[str] = Field(default_factory=lambda: ["--port"])

    @cached_property
    def command_re(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.command]

    @cached_property
    def log_re(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.log]

    @cached_property
    def ready_re(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.ready]

    @cached_property
    def fatal_re(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.fatal]

    @cached_property
    def version_re(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.version]

    @cached_property
    def config_re(self) -> list[re.Pattern[str]]:
        return [re.compile(p) for p in self.config_dump]

    def phase_of(self, text: str) -> PhaseMarker | None:
        for marker in self.phases:
            if marker.regex.search(text):
                return marker
        return None


@lru_cache(maxsize=1)
def all_engines() -> dict[str, EngineSpec]:
    specs = {}
    for path in sorted(DATA_DIR.glob("*.yaml")):
        spec = EngineSpec.model_validate(load_yaml(path))
        specs[spec.name] = spec
    return specs


def engine_distribution(engine: str | None) -> str | None:
    """The package an engine ships as (``vllm``, ``text-generation-inference``), if any."""
    spec = all_engines().get(engine or "")
    return spec.distribution if spec is not None else None


def build_of(engine: str | None, lines: Iterable[str]) -> str | None:
    """The package a log's server is installed as: a fork's name where its lines show one
    (ik_llama.cpp's sources in a llama.cpp log), else the engine's own distribution."""
    spec = all_engines().get(engine or "")
    if spec is None:
        return None
    vendored = _vendored_re(tuple(spec.sources)) if spec.sources else None
    if spec.builds or vendored:
        for line in lines:
            for build in spec.builds:
                if build.regex.search(line):
                    return build.distribution
            m = vendored.search(line) if vendored else None
            if m is not None:
                return _project_name(m.group("project"))
    return spec.distribution


#: the folders projects keep other projects' sources in (git submodules, vendored copies)
_VENDOR_DIRS = r"(?:thirdparty|third_party|3rdparty|third-party|vendor|vendored|external|deps)"


#: what a build adds to a project's folder name: pip's temporary build folder's hash
#: (``llama-cpp-python_c40ab0ad…``), an unpacked sdist's version (``llama_cpp_python-0.3.6``)
_BUILD_SUFFIX = re.compile(r"_[0-9a-f]{32}$|-v?\d+(?:\.\d+)+[\w.+-]*$")


def _project_name(folder: str) -> str:
    """The distribution a project's source folder holds (PEP 503 normalized); a repository
    named after a server's package and what it does with it (``llama-cpp-python-cuBLAS-wheels``
    builds llama-cpp-python's wheels) holds that package."""
    name = canonicalize_name(_BUILD_SUFFIX.sub("", folder))
    words = name.split("-")
    for n in range(len(words) - 1, 0, -1):
        if is_server_package("-".join(words[:n])):
            return "-".join(words[:n])
    return name


@lru_cache(maxsize=16)
def _vendored_re(sources: tuple[str, ...]) -> re.Pattern[str]:
    """A source path of a project that builds the engine from its own copy of it:
    ``/home/runner/work/xllamacpp/xllamacpp/thirdparty/llama.cpp/ggml/…`` → xllamacpp."""
    names = "|".join(re.escape(s) for s in sources)
    return re.compile(rf"[\\/](?P<project>[A-Za-z][\w.-]+)[\\/]{_VENDOR_DIRS}[\\/](?:{names})[\\/]")


def get_engine(name: str) -> EngineSpec:
    engines = all_engines()
    if name not in engines:
        from servedoctor.errors import UserError

        raise UserError(f"unknown engine {name!r}; known: {', '.join(sorted(engines))}")
    return engines[name]


def engine_for_command(argv: list[str]) -> EngineSpec:
    """The engine a server command runs; 'openai' (any OpenAI-compatible server) if unsure."""
    joined = " ".join(argv)
    for spec in all_engines().values():
        if spec.name != "openai" and any(r.search(joined) for r in spec.command_re):
            return spec
    return all_engines()["openai"]


def engine_for_lines(lines: list[str]) -> str | None:
    """Guess the engine from a sample of log lines (first match by vote)."""
    votes: dict[str, int] = {}
    for spec in all_engines().values():
        for text in lines:
            if any(r.search(text) for r in spec.log_re):
                votes[spec.name] = votes.get(spec.name, 0) + 1
    return max(votes, key=lambda k: votes[k]) if votes else None
