#!/usr/bin/env bash
# Issue 24 item 2 on the H200: does a watched script read the same `torch.cuda.max_memory_allocated()` as alone?
# bench/peak_probe.py (a small Llama through a plain transformers Trainer, bf16, fixed seed and data) runs once
# alone and once under `python -m loratui run --headless --`, each in a fresh process, and prints the figure;
# this prints `PEAK alone=X watched=Y equal=True/False` (bytes, and GiB), plus who reset the counters.
# On the device, from the repo root (wheels of loratui's dependencies in .whl/, see ../shared/GPU.md):
#   bash bench/peak_no_trace.sh            # about 1-2 minutes; $OUT/peak.txt gets the lines printed
set -u
OUT=${OUT:-/tmp/peak_out}; PY=${PY:-python3}; W=/tmp/peak-$(date +%s); mkdir -p "$OUT" "$W/runs"
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
note() { echo "$*" | tee -a "$OUT/peak.txt"; }
ARGS=${ARGS:-"--steps 12 --batch 8 --seq 512"}

$PY bench/peak_probe.py --out "$W/alone" $ARGS > "$W/alone.log" 2>&1; rc_a=$?
$PY -m loratui run --headless --runs-dir "$W/runs" --run-name peak -- $PY bench/peak_probe.py --out "$W/watched" \
  $ARGS > "$W/watched.log" 2>&1; rc_w=$?
watched_out=$(ls "$W"/runs/*/trainer.stdout.log 2>/dev/null | head -1)
a=$(grep -ho 'MAXALLOC [0-9]* RESETS [0-9]*' "$W/alone.log" | tail -1)
w=$(grep -ho 'MAXALLOC [0-9]* RESETS [0-9]*' "${watched_out:-/dev/null}" | tail -1)
note "RUN alone rc=$rc_a ($a); watched rc=$rc_w ($w)"
[ -n "$a" ] || tail -15 "$W/alone.log" | sed 's/^/  alone| /' | tee -a "$OUT/peak.txt"
[ -n "$w" ] || tail -15 "$W/watched.log" "$(dirname "${watched_out:-$W/x}")/trainer.stderr.log" 2>/dev/null \
  | sed 's/^/  watched| /' | tee -a "$OUT/peak.txt"
x=$(echo "$a" | awk '{print $2}'); y=$(echo "$w" | awk '{print $2}')
note "$($PY -c "
import sys; x, y = (int(v) if v else None for v in sys.argv[1:3])
gib = lambda v: f'{v / 2**30:.4f}GiB' if v is not None else 'none'
print(f'PEAK alone={x} ({gib(x)}) watched={y} ({gib(y)}) equal={x is not None and x == y}')" "$x" "$y")"
grep -h '"key": *"estimate"\|peak device used' "$W"/runs/*/events.jsonl 2>/dev/null | tail -2 | cut -c1-300 \
  | tee -a "$OUT/peak.txt"
