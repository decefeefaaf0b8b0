#!/usr/bin/env bash
# Issue 17 to 1 %: ONE watched run of bench/callback_interleaved.py (loratui's callback and token hook switched
# on and off in ABBA blocks) on the random Qwen2.5-7B-shaped checkpoint, all inside the call's budget.
#   T0=<call start, epoch s> BUDGET=<s from T0> bash bench/callback_interleaved.sh   (on the device, wheels
#   installed, $OUT set). CPU smoke test: CKPT=/tmp/qsmall CKPT_ARGS=--small SHAPE="--batch 2 --seq 64" ...
# $OUT gets summary.txt, interleave.json (rewritten at every block boundary: a killed call still has it), the
# run's events.jsonl.xz and the logs' tails. Figures again: python bench/callback_interleaved.py --analyse OUT/interleave.json
set -u
OUT=${OUT:-/tmp/il_out}; PY=${PY:-python3}; T0=${T0:-$(date +%s)}; BUDGET=${BUDGET:-270}
CKPT=${CKPT:-/tmp/q7b}; SHAPE=${SHAPE:---batch 4 --seq 1024}; BLOCK=${BLOCK:-4}
W=/tmp/ilw; rm -rf "$W"; mkdir -p "$OUT" "$W/runs"
export PYTHONUNBUFFERED=1
note() { echo "$*" | tee -a "$OUT/summary.txt"; }
note "ENV $($PY -c 'import importlib.metadata as m, platform
print("python", platform.python_version(), *(f"{p} {m.version(p)}" for p in ("torch", "transformers", "peft", "accelerate", "bitsandbytes")))' 2>&1 | tail -1) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
$PY bench/make_random_ckpt.py "$CKPT" ${CKPT_ARGS:-} > "$W/ckpt.log" 2>&1
note "$(grep -h CKPT "$W/ckpt.log" || tail -3 "$W/ckpt.log") ($(( $(date +%s) - T0 ))s)"
DL=$((T0 + BUDGET))
timeout $(( DL - $(date +%s) + 5 )) $PY -m loratui run --headless --runs-dir "$W/runs" --run-name il -- \
  $PY bench/callback_interleaved.py --model "$CKPT" --out "$W/trainer_out" $SHAPE --block "$BLOCK" --warmup 6 \
  --max-steps 600 --deadline "$DL" --margin 20 --json "$OUT/interleave.json" > "$W/run.log" 2>&1; rc=$?
note "RUN rc=$rc at $(( $(date +%s) - T0 ))s"
log=$(ls "$W"/runs/*/trainer.stdout.log 2>/dev/null | head -1)
[ -n "$log" ] && { grep -h '^IL_' "$log" | grep -v '^IL_BLOCK' | tee -a "$OUT/summary.txt"; tail -60 "$log" > "$OUT/trainer_stdout_tail.log"; }
tail -20 "$W/run.log" > "$OUT/run_tail.log"; tail -30 "$W"/runs/*/trainer.stderr.log > "$OUT/trainer_stderr_tail.log" 2>/dev/null
xz -c "$W"/runs/*/events.jsonl > "$OUT/events.jsonl.xz" 2>/dev/null
note "DONE $(( $(date +%s) - T0 ))s"
