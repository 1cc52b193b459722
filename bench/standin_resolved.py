"""Stand-in for a real server whose failure was resolved in a public thread.

Run under the engine's own command line (``standin_resolved.py vllm serve /m --flag …``), it
behaves like that engine at the case's release: a flag its parser (the inventory) does not
have is refused the way argparse refuses it; with the fix the thread confirmed applied (the
same flag or variable, or the same knob in another spelling), it starts; otherwise it prints
the real log of the failure and exits 1. A fix that takes a switch away (``--enable-X``
off) starts the case with the switch and works once it is gone. A case whose confirmed fix is a package version
checks the version installed in the environment it runs in (importlib.metadata: an overlay
first on PYTHONPATH counts) and starts only at that version. The case folder comes from
STANDIN_CASE.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version

from servedoctor.diagnose.fixmatch import same_fix
from servedoctor.engines.inventory import inventory
from servedoctor.model import Change

READY = {
    "sglang": "The server is fired up and ready to roll!",
    "vllm": "INFO:     Application startup complete.",
    "tgi": "INFO text_generation_router: Connected",
}


def settings(argv: list[str]) -> list[Change]:
    out: list[Change] = []
    for i, token in enumerate(argv):
        if token.startswith("--"):
            name, _, inline = token.partition("=")
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            value = inline or (nxt if nxt is not None and not nxt.startswith("--") else None)
            out.append(Change("flag", name, value))
    # the variables a trial set: not the stand-in's own, not those it inherited unchanged
    inherited = json.loads(os.environ.get("STANDIN_INHERITED", "{}"))
    out += [
        Change("env", k, v)
        for k, v in os.environ.items()
        if k.isupper() and not k.startswith("STANDIN_") and inherited.get(k) != v
    ]
    return out


#: the confirmed fix takes a switch away (or turns it off): the server starts with the switch
OFF = frozenset({"off", "removed", "<remove>", "false", "disabled"})


def _accepted(inv: Any, name: str, version: str | None) -> Any:
    """The flag ``name`` selects for the case's release (an older servedoctor's inventory,
    replayed as the baseline, has no accepts_spelling: its latest-or-stated release)."""
    accepts = getattr(inv, "accepts_spelling", None)
    if accepts is not None:
        return accepts(name, version)
    return inv.flag(name, inv.resolve(version))


def switched_off(fix: dict[str, object], engine: str, version: str | None) -> bool:
    """Is the confirmed fix "without this switch" (a boolean flag of the engine's parser)?"""
    if fix.get("kind") != "flag" or str(fix.get("value")).lower() not in OFF:
        return False
    inv = inventory(engine)
    if inv is None:
        return False
    flag = _accepted(inv, str(fix["name"]), version)
    if flag is None:
        return False
    return flag.type_at(inv.resolve(version)) == "bool" if version else flag.type == "bool"


def without_switch(argv: list[str], name: str) -> bool:
    """The switch is gone from the command line, or its ``--no-`` form is given."""
    flags = {c.name for c in settings(argv) if c.kind == "flag"}
    return name not in flags or "--no-" + name.lstrip("-") in flags


def installed_is(name: str, wanted: str) -> bool:
    """Is ``name`` installed here at ``wanted`` (compared as versions: 2.1 == 2.1.0)?"""
    try:
        return Version(metadata.version(name)) == Version(wanted)
    except (metadata.PackageNotFoundError, InvalidVersion):
        return False


def main() -> int:
    case = Path(os.environ["STANDIN_CASE"])
    labels = yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))
    engine, fix = labels["engine"], labels["fix"]
    argv = sys.argv[1:]
    inv = inventory(engine)
    # a server whose builds logs do not date (llama.cpp, and its forks with flags of their
    # own) is not held to one build's parser
    if inv is not None and getattr(inv, "unknown_version", "latest") != "any":
        stated = labels.get("engine_version")
        for change in settings(argv):
            if change.kind == "flag" and _accepted(inv, change.name, stated) is None:
                print(f"usage: {engine} [options]", file=sys.stderr)
                print(f"{engine}: error: unrecognized arguments: {change.name}", file=sys.stderr)
                return 2
    if fix.get("kind") == "package":
        works = installed_is(fix["name"], str(fix["value"]))
    elif switched_off(fix, engine, labels.get("engine_version")):
        works = without_switch(argv, fix["name"])
    else:
        works = any(same_fix(change, fix, engine) for change in settings(argv))
    if works:
        print(READY.get(engine, "INFO:     Uvicorn running on http://127.0.0.1:8000"))
        return 0
    sys.stdout.write((case / "log.txt").read_text(encoding="utf-8", errors="replace"))
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
