"""``servedoctor config``: each setting's effective value and where it came from."""

from __future__ import annotations

import json

import typer

from servedoctor.cli.app import app, out
from servedoctor.config import effective, project_file, user_file


def _say(text: str) -> None:
    out.print(text, highlight=False, markup=False, soft_wrap=True)


def _shown(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "(none)"
    return str(value)


@app.command("config")
def config_cmd(
    json_out: bool = typer.Option(False, "--json", help="one JSON object per line (JSON Lines)"),
) -> None:
    """Show each setting's effective value and its source.

    Precedence: command-line option > $SERVEDOCTOR_STORE / $SERVEDOCTOR_RUNS_DIR >
    ./servedoctor.toml > $XDG_CONFIG_HOME/servedoctor/config.toml > built-in default.
    Keys: store, runs_dir, startup_timeout, request_timeout, grace, env (a table).
    """
    settings = effective()
    if json_out:
        for setting in settings.values():
            _say(json.dumps(setting.to_dict(), ensure_ascii=False))
        return
    for name, path in (("project file", project_file()), ("user file", user_file())):
        _say(f"# {name}: {path}{'' if path.is_file() else '  (none)'}")
    width = max(len(k) for k in settings)
    shown = {k: _shown(s.value) for k, s in settings.items()}
    value_width = min(max(len(v) for v in shown.values()), 60)
    for key, setting in settings.items():
        _say(f"{key:<{width}}  {shown[key]:<{value_width}}  {setting.source}")
