"""The static reader of the engines' messages (scripts/inventory/mine_messages.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "inventory"


def _reader() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mine_messages", SCRIPTS / "mine_messages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mine_messages", module)
    spec.loader.exec_module(module)
    return module


# the shape of vLLM's max_model_len check: the message is built in a name, then raised with
# more text around it; the name of the config key is a value, not text
SOURCE = """
def check(max_model_len, derived, hf_config):
    max_len_key = None
    for key in ("max_position_embeddings", "n_positions"):
        max_len_key = key
    if getattr(hf_config, "sliding_window", None):
        max_len_key = "sliding_window"
    if max_model_len > derived:
        msg = (
            f"User-specified max_model_len ({max_model_len}) is greater "
            f"than the derived max_model_len ({max_len_key}={derived})."
        )
        raise ValueError(f"{msg} To allow overriding this maximum, set the env var X=1.")
    key = "sliding_window"
    raise ValueError(f"bad {key} value")
"""


def test_a_message_built_in_a_name_is_read_whole() -> None:
    mm = _reader()
    templates = [mm.make_template(f.parts) for f in mm.find_messages(SOURCE, "config.py")]
    assert (
        "User-specified max_model_len ({max_model_len}) is greater than the derived "
        "max_model_len ({max_len_key}={derived}). To allow overriding this maximum, set the "
        "env var X=1."
    ) in templates
    # a name holding a key, not words, stays an interpolation
    assert "bad {key} value" in templates


def test_a_setting_that_only_silences_the_warning_is_no_advice() -> None:
    mm = _reader()
    text = (
        "Custom allreduce is disabled because the P2P test failed. To silence this warning, "
        "specify disable_custom_all_reduce=True explicitly."
    )
    assert mm._blocked(text, text.index("specify"), "specify")
    advice = "Custom allreduce is disabled. To use it, specify --enable-custom-all-reduce."
    assert not mm._blocked(advice, advice.index("specify"), "specify")
