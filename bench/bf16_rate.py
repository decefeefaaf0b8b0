"""The card's measured dense bf16 matmul rate: the denominator of MFU (issue 7, item 6).

    python bench/bf16_rate.py   ->   BF16_RATE {"tflops": ..., "n": 8192, ...}

Square 8192 matmuls, bf16 in and out, fp32 accumulation (torch's default), timed with CUDA events after
warm-up; the median of 20 timed batches of 10 matmuls. This is what the card really delivers to the
shapes training uses, not the datasheet figure (which assumes sparsity or boost clocks).
"""

from __future__ import annotations

import json
import statistics

import torch


def main() -> None:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    rates = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            a @ b
        end.record()
        end.synchronize()
        rates.append(10 * 2 * n**3 / (start.elapsed_time(end) / 1e3) / 1e12)
    print("BF16_RATE " + json.dumps({"tflops": round(statistics.median(rates), 1),
                                     "max_tflops": round(max(rates), 1), "n": n,
                                     "device": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
