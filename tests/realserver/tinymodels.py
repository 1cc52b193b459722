"""Tiny random-weight models built offline, for real-server tests and the GPU proof.

Run as a script: ``python3 tinymodels.py llama|gpt2 DIR [--n-positions N]
[--fault raise|hang|exit|segv]``.
"""

from __future__ import annotations

import argparse
import json
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
    _calls = 0

    def forward(self, *args, **kwargs):
        FaultyLlama._calls += 1
        if FaultyLlama._calls > 1:
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
        return super().forward(*args, **kwargs)
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


def build_llama(out: Path, *, fault: str | None = None) -> Path:
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
        _make_faulty(out, fault)
    return out


def _make_faulty(out: Path, fault: str) -> None:
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
    cfg["auto_map"] = {
        "AutoModelForCausalLM": "faulty_llama.FaultyLlama",
        "AutoModelForDecision": "faulty_llama.FaultyLlama",
    }
    cfg_path.write_text(json.dumps(cfg, indent=2), encoding="utf-8")


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
    )
    GPT2LMHeadModel(config).save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=["llama", "gpt2"])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--n-positions", type=int, default=32)
    parser.add_argument("--fault", choices=["raise", "hang", "exit", "segv"])
    args = parser.parse_args(argv)
    if args.kind == "llama":
        build_llama(args.dir, fault=args.fault)
    else:
        build_gpt2(args.dir, n_positions=args.n_positions)
    print(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
