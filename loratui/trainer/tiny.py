"""The embedded tiny model: a few-million-parameter Qwen2 with a locally trained tokenizer.

Built once into the cache directory (no download), then loaded through the same `from_pretrained` path a
real model takes. Random weights, a real architecture, a real BPE tokenizer with a chat template.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from loratui.recipe import TINY_DATA

# v2: the tokenizer is trained on the shipped data only (v1 took the first run's data file).
TINY_VERSION = "v2"
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def cache_dir() -> Path:
    """Where built models live: $LORATUI_CACHE, else $XDG_CACHE_HOME/loratui, else ~/.cache/loratui."""
    if "LORATUI_CACHE" in os.environ:
        return Path(os.environ["LORATUI_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "loratui"


def ensure_tiny_model() -> Path:
    """The tiny model's directory, building it on first use (atomically: concurrent builders are safe)."""
    target = cache_dir() / f"tiny-qwen2-{TINY_VERSION}"
    if (target / "config.json").exists() and (target / "tokenizer.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-", dir=target.parent))
    try:
        build_tiny_model(staging)
        try:
            os.rename(staging, target)
        except OSError:  # another process finished first
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def corpus_lines() -> list[str]:
    """The tokenizer's corpus: the shipped instruction set's values, one example a line.

    Always loratui's own file, never the user's data: the model is cached and shared by every later run,
    so what it was built from must not depend on which run came first.
    """
    lines = []
    for raw in TINY_DATA.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            lines.append(" ".join(str(v) for v in json.loads(raw).values()))
    return lines


def build_tiny_model(out: Path, vocab_size: int = 2048) -> None:
    """Train a byte-level BPE on the shipped data, make a random Qwen2 of matching vocabulary, save both."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(corpus_lines(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=256, intermediate_size=768, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        tie_word_embeddings=True, bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(out)
