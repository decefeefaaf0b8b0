"""A larger instruction JSONL for seq-1024 packing: the shipped tiny set repeated (shuffled) N times.

    python bench/make_bench_data.py OUT.jsonl [N]
"""

import json
import random
import sys
from pathlib import Path

src = Path(__file__).resolve().parent.parent / "recipes" / "data" / "tiny-instructions.jsonl"
out = Path(sys.argv[1])
n = int(sys.argv[2]) if len(sys.argv) > 2 else 12
rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
allrows = rows * n
random.Random(0).shuffle(allrows)
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("".join(json.dumps(r) + "\n" for r in allrows), encoding="utf-8")
print(f"{out}: {len(allrows)} rows")
