"""Build a random-init Qwen2.5-7B-shaped checkpoint (bf16, safetensors) with the tiny model's tokenizer.

    python bench/make_random_ckpt.py /tmp/q7b            # the 7B shape (on the GPU when there is one)
    python bench/make_random_ckpt.py /tmp/qsmall --small # a tiny shape, to test this script on a CPU

Random weights give the same memory and speed figures as real ones (see ../shared/GPU.md). The tokenizer is
the embedded tiny model's (vocabulary 2048 < 152064, so every id is valid; it has a chat template). A
`.complete` marker makes a rerun skip the build.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    out = Path(sys.argv[1])
    small = "--small" in sys.argv
    marker = out / ".complete"
    if marker.exists():
        print(f"{out}: already complete")
        return 0
    t0 = time.time()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    sys.path.insert(0, str(REPO))
    from loratui.trainer.tiny import ensure_tiny_model

    tiny = ensure_tiny_model()
    tok = AutoTokenizer.from_pretrained(tiny)
    shape = dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                 num_key_value_heads=4, vocab_size=152064)
    if small:
        shape = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, vocab_size=4096)
    cfg = Qwen2Config(**shape, tie_word_embeddings=False, max_position_embeddings=32768, rms_norm_eps=1e-6,
                      bos_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    cfg.use_cache = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    t1 = time.time()
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    if device == "cuda":
        torch.cuda.synchronize()
    t2 = time.time()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, max_shard_size="5GB")
    tok.save_pretrained(out)
    t3 = time.time()
    params = sum(p.numel() for p in model.parameters())
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    info = {"params": params, "bytes": size, "device": device, "imports_s": round(t1 - t0, 1),
            "build_s": round(t2 - t1, 1), "save_s": round(t3 - t2, 1)}
    marker.write_text(json.dumps(info))
    print("CKPT " + json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
