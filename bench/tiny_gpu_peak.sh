#!/usr/bin/env bash
# bench/tiny_gpu_peak.sh — the embedded tiny recipe on a CUDA GPU: the estimate against the run's measured peaks
# (device used from NVML samples, torch's peak reserved/allocated per step), and nvidia-smi at 100 ms beside it.
# On the device, from the repo root (wheels in .whl/ as ../shared/GPU.md says):
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site:$PWD && OUT=$OUT bash bench/tiny_gpu_peak.sh
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/tiny_gpu_out}
mkdir -p "$OUT"
python3 -m loratui estimate tiny > "$OUT/estimate.txt" 2>&1
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$OUT/smi.csv" 2>/dev/null &
SMI=$!
python3 -m loratui run tiny --headless --max-steps 120 --runs-dir "$OUT/runs" > "$OUT/run.txt" 2>&1
kill $SMI
python3 - "$OUT" <<'PY'
import json, sys, glob
out = sys.argv[1]
for d in sorted(glob.glob(f"{out}/runs/*/")):
    used, res, alloc, est = 0, 0, 0, None
    for line in open(d + "events.jsonl"):
        e = json.loads(line)
        if e.get("kind") == "sample":  # a fresh machine: no other process on the card
            used = max(used, e["used_max"])
        if e.get("kind") == "step":
            res = max(res, e.get("peak_reserved") or 0); alloc = max(alloc, e.get("peak_allocated") or 0)
        if e.get("kind") == "estimate": est = (e["peak_device_gib"], e["peak_reserved_gib"])
    print(f"{d}: estimate (device, reserved) GiB {est}; measured device used max {used/2**30:.3f} GiB, "
          f"torch peak reserved {res/2**30:.3f} GiB, peak allocated {alloc/2**30:.3f} GiB")
smi = [int(x) for x in open(f"{out}/smi.csv").read().split() if x.strip().isdigit()]
print(f"nvidia-smi at 100 ms: max used {max(smi) if smi else None} MiB over {len(smi)} readings (idle first: {smi[:1]})")
PY
