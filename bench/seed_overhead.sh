#!/usr/bin/env bash
# Issue 17 on the H200: bench/seed_qlora_7b.py plain (a) vs under `loratui run --headless --` (b), rounds
# alternating a b / b a / a b (ARMS), each run a fresh process, on a random Qwen2.5-7B-shaped checkpoint.
#   bash bench/seed_overhead.sh        (on the device, wheels installed, $OUT set; BUDGET seconds, default 530)
#   STEPS=50 ARMS="a b b a a b b a" EST=70 BUDGET=... bash bench/seed_overhead.sh   (the second call: longer
#   runs; a round's first run starts only if 2*EST seconds are left, so no round is left half done)
# $OUT gets summary.txt (one line per run as it finishes) and seed_raw.tar.xz (plain/a*.json, the watched runs'
# events.jsonl, the logs' tails). Figures: python bench/seed_analyse.py OUT-or-archive.
set -u
OUT=${OUT:-/tmp/seed_out}; PY=${PY:-python3}; BUDGET=${BUDGET:-530}; T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
note() { echo "$*" | tee -a "$OUT/summary.txt"; }
W=/tmp/seedw; rm -rf "$W"; mkdir -p "$OUT" "$W/plain" "$W/logs" "$W/runs"
export PYTHONUNBUFFERED=1
note "ENV $($PY -c 'import torch,transformers,peft,accelerate,bitsandbytes as b;print("torch",torch.__version__,"transformers",transformers.__version__,"peft",peft.__version__,"accelerate",accelerate.__version__,"bitsandbytes",b.__version__,torch.cuda.get_device_name(0))' 2>&1 | tail -1)"
CKPT=/tmp/q7b
$PY bench/make_random_ckpt.py $CKPT > "$W/logs/ckpt.log" 2>&1
note "$(grep -h CKPT "$W/logs/ckpt.log" || tail -3 "$W/logs/ckpt.log") ($(( $(date +%s) - T0 ))s)"
STEPS=${STEPS:-12}; ARMS=${ARMS:-a b b a a b}
ARGS="--model $CKPT --max-steps $STEPS --batch 4 --seq 1024"
EST=${EST:-80}
seedline() { $PY -c 'import json,sys
for l in open(sys.argv[1], errors="replace"):
    if l.startswith("SEED "):
        d = json.loads(l[5:]); print("tok/s=%s steps=%d train_runtime=%s load=%ss peak_reserved=%.2fGiB" % (d["tokens_per_s_steps3on"], len(d["step_times"]), d["train_runtime"], d["setup_load_s"], (d["peak_reserved"] or 0)/2**30))' "$1" 2>/dev/null; }
i=0
for arm in $ARMS; do
  i=$((i + 1)); r=$(( (i + 1) / 2 ))
  need=$EST; [ $((i % 2)) -eq 1 ] && { need=$((2 * EST)); skipped=0; }
  if [ "${skipped:-0}" = 1 ] || [ "$(left)" -lt "$need" ]; then skipped=1; note "SKIP $arm$r: $(left)s left"; continue; fi
  ts=$(date +%s)
  if [ $arm = a ]; then
    timeout $(( $(left) - 5 )) $PY bench/seed_qlora_7b.py $ARGS --json "$W/plain/a$r.json" > "$W/logs/a$r.log" 2>&1; rc=$?
    log="$W/logs/a$r.log"
  else
    timeout $(( $(left) - 5 )) $PY -m loratui run --headless --runs-dir "$W/runs" --run-name b$r -- \
      $PY bench/seed_qlora_7b.py $ARGS > "$W/logs/b$r.log" 2>&1; rc=$?
    log=$(ls "$W"/runs/*-b$r/trainer.stdout.log 2>/dev/null | head -1); log=${log:-$W/logs/b$r.log}
  fi
  note "RUN $arm$r rc=$rc $(( $(date +%s) - ts ))s $(seedline "$log")"
  [ $rc -ne 0 ] && tail -5 "$W/logs/$arm$r.log" | sed "s/^/  $arm$r| /" | tee -a "$OUT/summary.txt"
done
for f in "$W"/logs/*.log; do tail -40 "$f" > "$f.tail"; done
$PY bench/seed_analyse.py "$W" 2>&1 | tee -a "$OUT/summary.txt"
cp "$OUT/summary.txt" "$W/summary.txt"
(cd "$W" && tar cJf "$OUT/seed_raw.tar.xz" summary.txt plain logs/*.tail runs/*/events.jsonl runs/*/run.json 2>/dev/null)
note "DONE $(( $(date +%s) - T0 ))s; archive $(stat -c %s "$OUT/seed_raw.tar.xz" 2>/dev/null) bytes"
