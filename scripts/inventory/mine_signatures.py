"""Mine each engine's own words from its released source, to tell whose log an excerpt is.

A log excerpt often names no engine: one traceback, one error line. Yet the line is usually
the engine's own message, raised or logged by its source. This script downloads released
source distributions (or pure-Python wheels) of SGLang, vLLM and LMDeploy across their
history, reads every message they raise or log (``raise X("...")``, ``logger.error/
warning/info(...)``, ``assert ..., "..."``: the same reader as ``mine_messages.py``), and
keeps each message's literal runs of words as that engine's signatures. A variable of the
engine's own prefix (``VLLM_``, ``SGLANG_``) named in a log is its signature too. Each run
keeps the first and last release read that print it: a log that prints a message the newer
releases dropped was written by an older one, and its changes are spelled for that one.

A run is kept only when it is long enough to be nobody else's (at least ``MIN_WORDS``
words and ``MIN_CHARS`` characters, the words at an interpolation's edge dropped), when no
other mined engine prints it (SGLang vendored vLLM's code for a year) and when it is not in
the messages of the libraries every engine runs on (torch, transformers, triton and the
rest of ``COMMON_PACKAGES`` as installed here): a torch error in a vLLM log says nothing of
vLLM.

Output: ``src/servedoctor/knowledge/mined/signatures.json``, read by
``servedoctor.knowledge.signatures``.

Usage::

    python scripts/inventory/mine_signatures.py            # the pinned releases below
    python scripts/inventory/mine_signatures.py --download-dir /tmp/sig-dl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mine_messages as mm  # the same message reader as the mined rules
from env_names import PREFIXES  # each engine's own variables' prefixes

from servedoctor.knowledge.signatures import words_of

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "src" / "servedoctor" / "knowledge" / "mined" / "signatures.json"
DOWNLOAD_DIR = Path("/tmp/sig-dl")
GENERATED_BY = "scripts/inventory/mine_signatures.py"
PYPI = "https://pypi.org/pypi/{name}/json"

#: Releases read per engine: from the oldest still met in public threads to the latest, about
#: one every few months, so that a message any of them printed is known.
RELEASES: dict[str, list[str]] = {
    "vllm": [
        "0.2.7", "0.3.3", "0.4.3", "0.5.5", "0.6.3.post1", "0.6.6.post1", "0.7.3",
        "0.8.5.post1", "0.9.2", "0.10.2", "0.11.1", "0.13.0", "0.16.0", "0.19.1", "0.22.1",
        "0.26.0", "0.29.0", "0.33.0",
    ],
    "sglang": [
        "0.1.20", "0.2.15", "0.3.6", "0.4.1.post7", "0.4.6.post5", "0.4.10.post2", "0.5.4",
        "0.5.10.post1", "0.5.16", "0.5.23",
    ],
    "lmdeploy": ["0.4.2", "0.6.5", "0.8.0", "0.10.2"],
}  # fmt: skip
#: Packages whose messages are nobody's signature: every engine imports them.
COMMON_PACKAGES = (
    "torch", "transformers", "triton", "huggingface_hub", "tokenizers", "safetensors",
    "accelerate", "ray", "pydantic", "fastapi", "starlette", "uvicorn", "aiohttp", "numpy",
    "xgrammar", "outlines", "flashinfer", "openai", "peft",
)  # fmt: skip
MIN_WORDS = 6
MIN_CHARS = 32
#: Messages logged at these levels are read too: an info line names its engine as well.
EXTRA_LOG_METHODS = {"info": "logger.info", "info_once": "logger.info", "debug": "logger.debug"}


def runs_of(parts: list[mm.Part]) -> Iterator[tuple[str, ...]]:
    """Each literal run of a message as words, less a word cut by an interpolation."""
    for i, part in enumerate(parts):
        if not isinstance(part, str):
            continue
        run = words_of(part)  # the words diagnose reads a log as
        if i > 0 and part[:1].isalnum():
            run = run[1:]  # "{n}GiB ..." : the first word is glued to a value
        if i < len(parts) - 1 and part[-1:].isalnum():
            run = run[:-1]
        if len(run) >= MIN_WORDS and len(" ".join(run)) >= MIN_CHARS:
            yield tuple(run)


def messages_in(sources: dict[str, str]) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for path, source in sources.items():
        for message in mm.find_messages(source, path):
            found.update(runs_of(mm.normalize(message.parts)))
    return found


def _archive_members(path: Path) -> Iterator[tuple[str, bytes]]:
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                if name.endswith(".py"):
                    yield name, zf.read(name)
        return
    with tarfile.open(path) as tf:
        for member in tf.getmembers():
            if member.isfile() and member.name.endswith(".py"):
                handle = tf.extractfile(member)
                if handle is not None:
                    yield member.name, handle.read()


def engine_sources(archive: Path, package: str) -> dict[str, str]:
    """The package's own ``.py`` files (tests and benchmarks left out), by path in package."""
    sources: dict[str, str] = {}
    for name, data in _archive_members(archive):
        parts = name.split("/")
        if package not in parts:
            continue
        inner = "/".join(parts[parts.index(package) :])
        if any(skip in "/" + inner for skip in mm.SKIP_PARTS) or parts[-1].startswith("test_"):
            continue
        sources[inner] = data.decode("utf-8", errors="replace")
    return sources


def download(name: str, version: str, into: Path) -> Path:
    """The release's source distribution, else its pure-Python wheel, from PyPI."""
    into.mkdir(parents=True, exist_ok=True)
    for hit in sorted(into.glob(f"{name}-{version}[.-]*")):
        return hit
    index = PYPI.format(name=name)
    with urllib.request.urlopen(index, timeout=60) as resp:
        files = json.load(resp)["releases"].get(version) or []
    sdists = [f for f in files if f["packagetype"] == "sdist"]
    wheels = [f for f in files if f["filename"].endswith("-none-any.whl")]
    wheels += [f for f in files if f["filename"].endswith(".whl") and "x86_64" in f["filename"]]
    chosen = (sdists or wheels or [None])[0]
    if chosen is None:
        raise SystemExit(f"{name}=={version}: no source distribution or wheel on PyPI")
    target = into / chosen["filename"]
    urllib.request.urlretrieve(urllib.parse.urljoin(index, chosen["url"]), target)
    return target


def installed_sources(package: str) -> dict[str, str]:
    """The ``.py`` files of a package installed here (empty when it is not)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return {}
    root = Path(next(iter(spec.submodule_search_locations)))
    return {
        str(p.relative_to(root.parent)): p.read_text(encoding="utf-8", errors="replace")
        for p in root.rglob("*.py")
    }


def common_words() -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for package in COMMON_PACKAGES:
        runs = messages_in(installed_sources(package))
        print(f"common {package}: {len(runs)} runs", file=sys.stderr)
        found |= runs
    return found


def _contains(longer: tuple[str, ...], shorter: tuple[str, ...]) -> bool:
    n = len(shorter)
    return any(longer[i : i + n] == shorter for i in range(len(longer) - n + 1))


def unique(
    per_engine: dict[str, set[tuple[str, ...]]], common: Iterable[tuple[str, ...]]
) -> dict[str, list[tuple[str, ...]]]:
    """Each engine's runs that no other engine's run and no common run holds."""
    others_text = {
        engine: "\n".join(" ".join(r) for e, rs in per_engine.items() if e != engine for r in rs)
        for engine in per_engine
    }
    common_text = "\n".join(" ".join(r) for r in common)
    out: dict[str, list[tuple[str, ...]]] = {}
    for engine, runs in per_engine.items():
        kept = []
        for run in sorted(runs):
            text = " ".join(run)
            if text in others_text[engine] or text in common_text:
                continue
            kept.append(run)
        out[engine] = kept
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--download-dir", type=Path, default=DOWNLOAD_DIR)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    mm.LOG_METHODS.update(EXTRA_LOG_METHODS)
    per_engine: dict[str, set[tuple[str, ...]]] = {}
    printed_by: dict[str, dict[tuple[str, ...], list[int]]] = {}
    for engine, versions in RELEASES.items():
        runs: dict[tuple[str, ...], list[int]] = {}
        for i, version in enumerate(versions):
            archive = download(engine, version, args.download_dir)
            found = messages_in(engine_sources(archive, engine))
            print(f"{engine} {version}: {len(found)} runs", file=sys.stderr)
            for run in found:
                runs.setdefault(run, []).append(i)
        per_engine[engine] = set(runs)
        printed_by[engine] = runs
    kept = unique(per_engine, common_words())
    data = {
        "generated_by": GENERATED_BY,
        "min_words": MIN_WORDS,
        "engines": {
            engine: {
                "releases": RELEASES[engine],
                "env_prefixes": list(PREFIXES.get(engine, ())),
                # [words, first, last]: the run and the first and last of the releases above
                # that print it (the log of a release outside them would not)
                "signatures": [
                    [" ".join(run), min(printed_by[engine][run]), max(printed_by[engine][run])]
                    for run in kept[engine]
                ],
            }
            for engine in RELEASES
        },
    }
    for engine in RELEASES:
        print(f"{engine}: {len(kept[engine])} signatures kept", file=sys.stderr)
    args.out.write_text(json.dumps(data, indent=0, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
