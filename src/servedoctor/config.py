"""Defaults from a config file: ``./servedoctor.toml``, then the user's ``config.toml``.

Precedence, per key: the command-line option > the environment variable
(``SERVEDOCTOR_STORE``, ``SERVEDOCTOR_RUNS_DIR``) > ``servedoctor.toml`` in the current
directory > ``$XDG_CONFIG_HOME/servedoctor/config.toml`` (``~/.config/…``) > the built-in
default. ``env`` tables merge: the project file's names over the user file's, and
``launch --env`` over both. Relative paths in a file are taken from the file's folder.

The CLI reads these through option default factories, so a value is looked up only when the
option was not given, at the time the command runs. A file that cannot be read, is not TOML,
or holds an unknown key or a value of the wrong type is a :class:`UserError` (one line, exit 2).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servedoctor.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = [
    "ENV_VARS",
    "KEYS",
    "PROJECT_FILE",
    "Setting",
    "builtin_runs_dir",
    "config_env",
    "default_grace",
    "default_request_timeout",
    "default_runs_dir",
    "default_startup_timeout",
    "default_store",
    "effective",
    "project_file",
    "user_file",
    "value",
]

PROJECT_FILE = "servedoctor.toml"
KEYS = ("store", "runs_dir", "startup_timeout", "request_timeout", "grace", "env")
ENV_VARS = {"store": "SERVEDOCTOR_STORE", "runs_dir": "SERVEDOCTOR_RUNS_DIR"}
_BUILTIN: dict[str, Any] = {"startup_timeout": None, "request_timeout": 60.0, "grace": 10.0}


@dataclass(frozen=True)
class Setting:
    """One key's effective value and where it came from."""

    key: str
    value: Any
    source: str  # "default", "$SERVEDOCTOR_RUNS_DIR", "/path/servedoctor.toml", ...

    def to_dict(self) -> dict[str, Any]:
        value = str(self.value) if isinstance(self.value, Path) else self.value
        return {"key": self.key, "value": value, "source": self.source}


def project_file() -> Path:
    return Path.cwd() / PROJECT_FILE


def user_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".config"
    return root / "servedoctor" / "config.toml"


def builtin_runs_dir() -> Path:
    """``$XDG_STATE_HOME/servedoctor/runs``, else ``~/.local/state/servedoctor/runs``."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "servedoctor" / "runs"


def _builtin_store() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "servedoctor" / "findings.db"


def _number(path: Path, key: str, raw: object, *, zero: bool = False) -> float:
    ok = isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw)
    if not ok or float(raw) < 0 or (float(raw) == 0 and not zero):  # type: ignore[arg-type]
        what = "a number ≥ 0" if zero else "a number > 0"
        raise UserError(f"{path}: {key} must be {what} of seconds, got {raw!r}")
    return float(raw)  # type: ignore[arg-type]


def _path_value(path: Path, key: str, raw: object) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise UserError(f"{path}: {key} must be a non-empty string, got {raw!r}")
    if key == "store" and "://" in raw:
        return raw  # a SQLAlchemy URL
    p = Path(raw).expanduser()
    return str(p if p.is_absolute() else (path.parent / p).resolve())


def _env_table(path: Path, raw: object) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise UserError(f'{path}: env must be a table of NAME = "VALUE", got {raw!r}')
    env: dict[str, str] = {}
    for name, val in raw.items():
        if not name or "=" in name:
            raise UserError(f"{path}: env: {name!r} is not an environment variable name")
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            raise UserError(f"{path}: env.{name} must be a string or a number, got {val!r}")
        env[name] = str(val)
    return env


def _load(path: Path) -> dict[str, Any]:
    """The checked settings of one file ({} when it does not exist)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        msg = " ".join(str(exc).split())
        raise UserError(f"{path}: not valid TOML: {msg}") from None
    settings: dict[str, Any] = {}
    for key, val in raw.items():
        if key not in KEYS:
            raise UserError(f"{path}: unknown key {key!r} (keys: {', '.join(KEYS)})")
        if key in ("store", "runs_dir"):
            settings[key] = _path_value(path, key, val)
        elif key == "env":
            settings[key] = _env_table(path, val)
        else:
            settings[key] = _number(path, key, val, zero=key == "grace")
    return settings


def _files() -> list[tuple[Path, dict[str, Any]]]:
    """The config files that exist, highest precedence first."""
    found = []
    for path in (project_file(), user_file()):
        settings = _load(path)
        if settings or path.is_file():
            found.append((path, settings))
    return found


def effective() -> dict[str, Setting]:
    """Every key's value and source when no command-line option is given."""
    files = _files()
    result: dict[str, Setting] = {}
    for key in KEYS:
        if key == "env":
            merged: dict[str, str] = {}
            sources = []
            for path, settings in reversed(files):
                if "env" in settings:
                    merged.update(settings["env"])
                    sources.append(str(path))
            result[key] = Setting(key, merged, " + ".join(reversed(sources)) or "default")
            continue
        var = ENV_VARS.get(key)
        if var and os.environ.get(var):
            raw = os.environ[var]
            shown: Any = raw if "://" in raw else str(Path(raw).expanduser())
            result[key] = Setting(key, shown, f"${var}")
            continue
        for path, settings in files:
            if key in settings:
                result[key] = Setting(key, settings[key], str(path))
                break
        else:
            result[key] = Setting(key, _builtin(key), "default")
    return result


def _builtin(key: str) -> Any:
    if key == "runs_dir":
        return str(builtin_runs_dir())
    if key == "store":
        return str(_builtin_store())
    return _BUILTIN[key]


def value(key: str) -> Any:
    return effective()[key].value


# ---- option default factories (called by the CLI when the option is not given) ----


def default_runs_dir() -> Path:
    return Path(str(value("runs_dir"))).expanduser()


def default_store() -> str | None:
    """The store a config file names, or None: the findings store then applies
    ``$SERVEDOCTOR_STORE`` and its own default (as it does without a config file)."""
    setting = effective()["store"]
    if setting.source == "default" or setting.source.startswith("$"):
        return None
    return str(setting.value)


def default_request_timeout() -> float:
    return float(value("request_timeout"))


def default_startup_timeout() -> float | None:
    v = value("startup_timeout")
    return None if v is None else float(v)


def default_grace() -> float:
    return float(value("grace"))


def config_env() -> dict[str, str]:
    """Environment variables the config files add to server commands."""
    env = value("env")
    return dict(env) if isinstance(env, dict) else {}
