"""The static reader of llama.cpp's common/arg.cpp (scripts/inventory/llamacpp_args.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "inventory" / "llamacpp_args.py"


def _reader() -> ModuleType:
    spec = importlib.util.spec_from_file_location("llamacpp_args", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("llamacpp_args", module)
    spec.loader.exec_module(module)
    return module


SOURCE = r"""
    add_opt(common_arg(
        {"-c", "--ctx-size"}, "N",
        string_format("size of the prompt context (default: %d, 0 = loaded from model)", params.n_ctx),
        [](common_params & params, int value) {
            params.n_ctx = value;
        }
    ).set_examples({LLAMA_EXAMPLE_COMMON, LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_CTX_SIZE"));
    add_opt(common_arg({ "-fa", "--flash-attn" }, "[on|off|auto]",
        "set Flash Attention use ('on', 'off', or 'auto')",
        [](common_params & params, const std::string & value) {
            if (value == "on") { params.fa = 1; }
            else { throw std::invalid_argument(string_format("error: unknown value for --flash-attn: '%s'\n", value.c_str())); }
        }
    ).set_env("LLAMA_ARG_FLASH_ATTN"));
    add_opt(common_arg(
        {"--mmap"},
        {"--no-mmap"},
        string_format("whether to memory-map model (default: %s)", params.use_mmap ? "enabled" : "disabled"),
        [](common_params & params, bool value) {
            params.use_mmap = value;
        }
    ).set_env("LLAMA_ARG_MMAP"));
    add_opt(common_arg(
        {"--verbose-prompt"},
        "print a verbose prompt before generation",
        [](common_params & params) {
            params.verbose_prompt = true;
        }
    ).set_excludes({LLAMA_EXAMPLE_SERVER}));
    add_opt(common_arg(
        {"--draft", "--draft-n", "--draft-max"}, "N",
        "the argument has been removed. use --spec-draft-n-max or --spec-ngram-mod-n-max",
        [](common_params &, const std::string &) {
            arg_removed("use --spec-draft-n-max or --spec-ngram-mod-n-max");
        }
    ).set_examples({LLAMA_EXAMPLE_SPECULATIVE, LLAMA_EXAMPLE_SERVER}));
    add_opt(common_arg(
        {"--spec-ngram-size-n"}, "N",
        "the argument has been removed. use the respective --spec-ngram-*-size-n",
        [](common_params &, const std::string &) {
            arg_removed("use the respective --spec-ngram-*-size-n");
        }
    ).set_examples({LLAMA_EXAMPLE_SERVER}));
    add_opt(common_arg(
        {"-sm", "--split-mode"}, "{none,layer,row}",
        "how to split the model across multiple GPUs, one of:\n"
        "- none: use one GPU only\n",
        [](common_params & params, const std::string & value) {}
    ).set_examples({LLAMA_EXAMPLE_BENCH}));
"""


def test_options_their_types_and_the_tools_they_are_offered_to() -> None:
    reader = _reader()
    options = {o.names[0]: o for o in reader.read_options(SOURCE)}
    assert list(options) == ["-c", "-fa", "--mmap", "--verbose-prompt", "--draft",
                             "--spec-ngram-size-n", "-sm"]  # fmt: skip
    ctx = options["-c"]
    assert ctx.names == ["-c", "--ctx-size"] and ctx.type == "int" and ctx.value_hint == "N"
    assert ctx.env == "LLAMA_ARG_CTX_SIZE" and ctx.help.startswith("size of the prompt context")
    fa = options["-fa"]
    assert fa.type == "str" and reader.choices(fa.value_hint) == ["on", "off", "auto"]
    mmap = options["--mmap"]
    assert mmap.negated == ["--no-mmap"] and mmap.type == "bool"
    assert options["--verbose-prompt"].type == "bool"
    assert reader.choices(options["-sm"].value_hint) == ["none", "layer", "row"]
    assert reader.choices("lo-hi") is None and reader.choices("P0,P1,...") is None
    server = {o.names[0] for o in reader.server_options(SOURCE)}
    assert server == {"-c", "-fa", "--mmap", "--draft", "--spec-ngram-size-n"}


def test_a_removed_option_names_its_replacement_but_not_a_pattern_of_names() -> None:
    reader = _reader()
    options = {o.names[0]: o for o in reader.read_options(SOURCE)}
    draft = options["--draft"]
    assert draft.removed and draft.replacement == "--spec-draft-n-max"
    ngram = options["--spec-ngram-size-n"]
    assert ngram.removed and ngram.replacement is None
    assert not options["-c"].removed
