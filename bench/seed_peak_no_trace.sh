#!/usr/bin/env bash
# Issue 24 item 2 on the H200 with the seed guide's QLoRA Trainer script on a random 7B (the setting where the issue
# saw 17.45 GiB alone and 7.89 GiB watched): bench/seed_qlora_7b.py prints its own torch.cuda.max_memory_allocated()
# in its last line (SEED {json}); run once alone and once under `loratui run --headless --`, each a fresh process.
# Prints `SEEDPEAK alone=X watched=Y equal=...`. From the repo root on the device, after the wheels are installed
# and PYTHONPATH set (see ../shared/GPU.md); about 3 minutes with the checkpoint build.
set -u
OUT=${OUT:-/tmp/seedpeak_out}; PY=${PY:-python3}; W=/tmp/seedpeak-$$; mkdir -p "$OUT" "$W/runs"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
[ -f /tmp/q7b/config.json ] || $PY bench/make_random_ckpt.py /tmp/q7b > "$OUT/ckpt.log" 2>&1
ARGS="--model /tmp/q7b --max-steps 8 --batch 4 --seq 1024"
$PY bench/seed_qlora_7b.py $ARGS --out "$W/alone" > "$W/alone.log" 2>&1; rc_a=$?
$PY -m loratui run --headless --runs-dir "$W/runs" --run-name seedpeak -- $PY bench/seed_qlora_7b.py $ARGS \
  --out "$W/watched" > "$W/watched.log" 2>&1; rc_w=$?
watched_out=$(ls "$W"/runs/*/trainer.stdout.log 2>/dev/null | head -1)
$PY - "$W/alone.log" "${watched_out:-/dev/null}" "$rc_a" "$rc_w" <<'PY' | tee -a "$OUT/seedpeak.txt"
import json, sys
def peak(path):
    lines = [l for l in open(path, errors="replace") if l.startswith("SEED ")]
    return json.loads(lines[-1][5:])["peak_allocated"] if lines else None
a, w = peak(sys.argv[1]), peak(sys.argv[2])
gib = lambda v: f"{v / 2**30:.4f}GiB" if v is not None else "none"
print(f"SEEDPEAK alone={a} ({gib(a)}) watched={w} ({gib(w)}) equal={a is not None and a == w} rc={sys.argv[3]},{sys.argv[4]}")
PY
grep -h 'peak device used' "$W"/runs/*/events.jsonl 2>/dev/null | tail -1 | cut -c1-300 | tee -a "$OUT/seedpeak.txt"
tail -5 "$W/alone.log" > "$OUT/alone.tail"; tail -5 "${watched_out:-/dev/null}" > "$OUT/watched.tail" 2>/dev/null
