"""Tiny random-weight models built offline, for real-server tests and the GPU proof.

Run as a script: ``python3 tinymodels.py llama|gpt2|set DIR [--n-positions N]
[--fault raise|hang|exit|segv|slow_load]``. ``set`` builds the healthy Llama and every
fault variant the real-server tests use.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_CORPUS = [
    "Say hello in one sentence.",
    "Hello! I am a tiny model and I say hello to everyone.",
    "The quick brown fox jumps over the lazy dog.",
    "Servers load weights, open a port, and answer chat completions.",
] * 50
SPECIALS = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]

#: Custom model code: a Llama whose forward misbehaves after its first (prefill) call.
FAULTY_CODE = '''
import os, signal, time
from transformers import LlamaForCausalLM


class FaultyLlama(LlamaForCausalLM):
    """Misbehaves in the decode steps of request number ``config.fault_request``."""

    _requests = 0

    def __init__(self, config):
        if config.fault == "slow_load":
            time.sleep(config.fault_seconds)
        super().__init__(config)

    def forward(self, input_ids=None, *args, **kwargs):
        if input_ids is not None and input_ids.shape[-1] > 1:
            FaultyLlama._requests += 1  # a prefill starts a request
        elif FaultyLlama._requests >= self.config.fault_request:
            fault = self.config.fault
            if fault == "raise":
                raise RuntimeError("tiny fault: decode step failed on purpose")
            if fault == "hang":
                while True:
                    time.sleep(1)
            if fault == "exit":
                os._exit(3)
            if fault == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
        return super().forward(input_ids, *args, **kwargs)
'''


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=256 + len(SPECIALS) + 64,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def _vocab_size(out: Path) -> int:
    data = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    return len(data["model"]["vocab"]) + len(SPECIALS)


FAULTS = ("raise", "hang", "exit", "segv", "slow_load")


def build_llama(
    out: Path, *, fault: str | None = None, fault_request: int = 1, fault_seconds: float = 60.0
) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=_vocab_size(out),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(out)
    if fault is not None:
        make_faulty(out, fault, fault_request=fault_request, fault_seconds=fault_seconds)
    return out


def make_faulty(
    out: Path, fault: str, *, fault_request: int = 1, fault_seconds: float = 60.0
) -> None:
    """Turn a saved Llama into custom code (needs --trust-remote-code) that fails on purpose.

    transformers 5.24 looks the class up as ``getattr(transformers, architectures[0])``; an
    ``auto_map`` entry for ``AutoModelForDecision`` makes it load through the auto class
    (see REAL-SERVERS.md).
    """
    (out / "faulty_llama.py").write_text(FAULTY_CODE, encoding="utf-8")
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg["architectures"] = ["FaultyLlama"]
    cfg["fault"] = fault
    cfg["fault_request"] = fault_request
    cfg["fault_seconds"] = fault_seconds
    cfg["auto_map"] = {
        "AutoModelForCausalLM": "faulty_llama.FaultyLlama",
        "AutoModelForDecision": "faulty_llama.FaultyLlama",
    }
    cfg_path.write_text(json.dumps(cfg, indent=2), encoding="utf-8")


#: The variants the real-server tests use: name → (fault, fault_request).
VARIANTS: dict[str, tuple[str, int]] = {
    "raise": ("raise", 1),  # decode of the first request raises (HTTP 500, server stays up)
    "hang": ("hang", 2),  # the second request hangs in decode (/health keeps answering)
    "exit": ("exit", 1),  # os._exit(3) in decode
    "segv": ("segv", 1),  # SIGSEGV in decode
    "slow_load": ("slow_load", 1),  # sleeps while the model is built (to interrupt a load)
}


def build_set(root: Path) -> dict[str, Path]:
    """The healthy Llama under ``root/healthy`` and one copy per fault variant."""
    healthy = build_llama(root / "healthy")
    paths = {"healthy": healthy}
    for name, (fault, request) in VARIANTS.items():
        shutil.copytree(healthy, root / name)
        make_faulty(root / name, fault, fault_request=request)
        paths[name] = root / name
    return paths


def build_gpt2(out: Path, *, n_positions: int = 32) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=_vocab_size(out),
        n_positions=n_positions,
        n_embd=64,
        n_layer=2,
        n_head=4,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,  # tied random weights repeat the last (special) token
    )
    GPT2LMHeadModel(config).save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=["llama", "gpt2", "set"])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--n-positions", type=int, default=32)
    parser.add_argument("--fault", choices=FAULTS)
    parser.add_argument("--fault-request", type=int, default=1)
    args = parser.parse_args(argv)
    if args.kind == "set":
        build_set(args.dir)
    elif args.kind == "llama":
        build_llama(args.dir, fault=args.fault, fault_request=args.fault_request)
    else:
        build_gpt2(args.dir, n_positions=args.n_positions)
    print(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
