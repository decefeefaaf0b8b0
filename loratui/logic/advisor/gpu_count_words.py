"""Several GPUs named in words: `multi-GPU`, `4 RTX 3090 GPUs`, `4x3090`, `8 x A100`, 两卡/4卡/多卡, a ZeRO-2/3 or FSDP
run (it shards over its ranks), or a launch for several ranks (`--nproc_per_node=2`, accelerate's `--num_processes 4`,
`CUDA_VISIBLE_DEVICES=0,1`). One notion, read by the hang rule (text.py: a run said to hang only with several GPUs)
and by the timeout-while-preparing rule (prep_timeout.py: the run has ranks)."""

from __future__ import annotations

import re

SEVERAL_GPUS = re.compile(r"\bmulti-?GPUs?\b|\b(?:two|three|four|eight|several|multiple|[2-9]|1[0-6])\s+(?:or\s+\d+\s+)?"
                          r"(?:\w+\s+){0,2}GPUs\b|\b(?:[2-9]|1[0-6])\s*[x×*]\s*(?:(?:RTX|GTX|Tesla|NVIDIA)\s*)?"
                          r"(?:[AHLVT]\d{2,3}|[1-5]0[5-9]0)\b|多卡|多GPU|多张卡|(?:[两二三四五六七八]|[2-9]|1[0-6])\s*[张块]?\s*"
                          r"(?:卡|GPU|显卡)(?![住死顿])|(?<![A-Za-z0-9])(?:ZeRO[- ]?[23](?![0-9])|FSDP(?![A-Za-z]))|"
                          r"--(?:nproc[_-]per[_-]node|num[_-]processes)`?\s*[= ]\s*`?(?:[2-9]|1[0-6])(?![0-9])|"
                          r"CUDA_VISIBLE_DEVICES\s*=\s*['\"]?\d+(?:\s*,\s*\d+)+", re.I)
